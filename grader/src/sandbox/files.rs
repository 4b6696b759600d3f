//! What a sandboxed process may read, write and execute, enforced by Landlock: a list of what is
//! allowed, everything else denied, whoever the process runs as (root included).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, path_beneath_rules,
};

/// The newest Landlock ABI the sandbox asks for; older kernels get what they support.
pub const WANTED_ABI: ABI = ABI::V6;

/// The places a sandboxed process may use, beyond the system's own programs and libraries.
#[derive(Clone, Debug, Default)]
pub struct Places {
    /// Directories or files it may read (and list), not execute.
    pub read: Vec<PathBuf>,
    /// Directories it may read and execute from.
    pub read_exec: Vec<PathBuf>,
    /// Programs it may execute.
    pub executables: Vec<PathBuf>,
    /// Directories it may read and write, not execute from.
    pub writable: Vec<PathBuf>,
}

/// Device files every process may read and write: what a shell, the C compiler and Rust's
/// standard library open.
const DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// Device files every process may read: the kernel's random sources.
const RANDOM_DEVICES: [&str; 2] = ["/dev/random", "/dev/urandom"];

/// The GPU's device files (`/dev/nvidia0`, `/dev/nvidiactl`, `/dev/nvidia-uvm`, and the
/// `/dev/nvidia-caps` directory), which the CUDA driver opens and controls with `ioctl`.
fn gpu_devices() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/dev") else { return Vec::new() };
    let mut found: Vec<PathBuf> =
        entries.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("nvidia")).map(|e| e.path()).collect();
    found.sort();
    found
}

/// System directories a sandboxed process reads from, where they exist. `/dev` is not among
/// them: only the device files above are open to it (so `/dev/shm`, where processes share
/// memory, is not).
fn system_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/run"]
            .iter()
            .map(PathBuf::from)
            .collect();
    for variable in ["LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(value) = std::env::var_os(variable) {
            dirs.extend(std::env::split_paths(&value).filter(|p| p.is_absolute()));
        }
    }
    dirs.retain(|d| d.exists());
    dirs
}

/// Restricts this process (and what it executes) to `places`, and the GPU's device files where
/// `gpu` allows them.
pub fn confine(places: &Places, gpu: bool) -> Result<()> {
    let all = AccessFs::from_all(WANTED_ABI);
    let read = AccessFs::from_read(WANTED_ABI);
    let read_only = read & !AccessFs::Execute;
    let program = AccessFs::from_file(WANTED_ABI) & (AccessFs::Execute | AccessFs::ReadFile);
    let device = AccessFs::from_file(WANTED_ABI) & !AccessFs::Execute;
    let existing = |paths: &[&str]| paths.iter().map(PathBuf::from).filter(|p| p.exists()).collect::<Vec<_>>();
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .handle_access(AccessNet::from_all(WANTED_ABI))?
        .scope(Scope::from_all(WANTED_ABI))?
        .create()?
        .add_rules(path_beneath_rules(system_dirs(), read_only))?
        .add_rules(path_beneath_rules(&places.read, read_only))?
        .add_rules(path_beneath_rules(&places.read_exec, read))?
        .add_rules(path_beneath_rules(&places.executables, program))?
        .add_rules(path_beneath_rules(existing(&["/proc", "/sys"]), read_only))?
        .add_rules(path_beneath_rules(existing(&RANDOM_DEVICES), read_only))?
        .add_rules(path_beneath_rules(
            existing(&DEVICES).into_iter().chain(if gpu { gpu_devices() } else { Vec::new() }),
            device,
        ))?
        .add_rules(path_beneath_rules(
            places.writable.iter().map(PathBuf::as_path).chain([Path::new("/proc/self")]),
            all & !AccessFs::Execute,
        ))?
        .restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        bail!("sandbox: the kernel refused the Landlock rules");
    }
    Ok(())
}
