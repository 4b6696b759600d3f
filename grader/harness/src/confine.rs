//! The runner's own part of the sandbox: closing its `/proc/<pid>` once CUDA has started.
//!
//! The grader's sandbox lets a runner that holds the GPU read and write its own `/proc/<pid>`,
//! because the CUDA driver names the threads it starts by writing their
//! `/proc/self/task/<tid>/comm` and fails `cuInit` when it cannot. That directory also holds the
//! process's memory (`mem`, and each thread's), through which safe code could read the run's
//! seed and rewrite the checks. So before any check runs, the runner starts CUDA on every device
//! it sees, and then adds a Landlock layer of its own that keeps every place the sandbox allowed
//! (listed by the sandbox in [`KEPT_PLACES`]) except its `/proc/<pid>`. Landlock layers only
//! ever narrow: the sandbox's own rules still hold beneath this one.

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, path_beneath_rules,
};

/// The environment variable in which the sandbox lists the places a runner keeps (as `PATH`
/// lists directories), set only where it let the runner write its own `/proc/<pid>`.
pub const KEPT_PLACES: &str = "GRADER_SANDBOX_KEPT_PLACES";

/// The newest Landlock ABI the sandbox and this layer ask for; older kernels get what they support.
pub const LANDLOCK_ABI: ABI = ABI::V6;

/// Starts CUDA on every device this process sees, then closes this process's `/proc/<pid>` to
/// it, where the sandbox asked for that; does nothing elsewhere.
pub fn close_own_process_after_cuda() -> Result<(), String> {
    let Some(kept) = std::env::var_os(KEPT_PLACES) else { return Ok(()) };
    let probe = engine::device::cuda::probe();
    if probe.usable().is_ok() {
        // Each device's context and stream, and what the engine starts on first use (cuBLAS for
        // a product, NVRTC or the kernel cache for an eager kernel): the threads CUDA starts for
        // them are named now, while the process may still write their names.
        for ordinal in 0..probe.devices.as_ref().map_or(0, Vec::len) {
            let device = engine::Device::Cuda(ordinal);
            let start = || -> engine::Result<()> {
                let a = engine::Tensor::ones(&[16, 16]).to(device)?;
                a.matmul(&a)?.add(&a)?.to_vec()?;
                Ok(())
            };
            start().map_err(|e| format!("cannot start CUDA on {device}: {e}"))?;
        }
    }
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let closed = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(std::env::split_paths(&kept).filter(|p| p.exists()), all)))
        .and_then(|r| r.restrict_self());
    closed.map(|_| ()).map_err(|e| format!("cannot close this process's /proc/<pid>: {e}"))
}
