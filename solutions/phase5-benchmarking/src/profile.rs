//! Exercise `profile` (stretch): the three most expensive kernels of a compiled block, named by
//! the profiler, as `prof.key_averages().table(sort_by="cuda_time_total")` names them.

use engine::profiler::{self, AverageRow, EventKind, SortBy};
use engine::{Result, Tensor, dynamo};

/// How many kernels [`top_kernels`] names.
pub const TOP: usize = 3;

/// One kernel of a profile: its row in the `key_averages()` table and its share of the time.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelShare {
    /// The kernel's name as the table gives it (`matmul`, `poi_fused_add_mul_3`).
    pub name: String,
    /// What launched it: a compiled kernel, a library kernel, or an eager op the plan fell back to.
    pub kind: EventKind,
    /// Its time over the time of every kernel in the profile, between 0 and 1.
    pub share: f64,
}

// ANCHOR: top_kernels
/// **Exercise `profile` (stretch).** Compile `forward` with `dynamo::compile`, call it once on
/// `x` outside any profile (so that tracing and compiling are not profiled), then profile `calls`
/// calls of it with `engine::profiler` and return its [`TOP`] most expensive kernels, most
/// expensive first. A kernel's time is its self device time where the profile has device times
/// (a GPU) and its self host time where it has none (the CPU); its share is that time over the
/// same time of every kernel in the profile (ranges are not kernels).
///
/// Book: `book/src/phase5/exercises.md`, section "profile". Check: `cargo grader check phase5`.
pub fn top_kernels(forward: impl Fn(&Tensor) -> Result<Tensor>, x: &Tensor, calls: usize) -> Result<Vec<KernelShare>> {
    // ANCHOR: solution
    let device = x.device();
    let compiled = dynamo::compile(|x: Tensor| forward(&x));
    compiled.call(x)?;
    device.synchronize()?;
    let ((), profile) = profiler::profile(|| {
        for _ in 0..calls {
            compiled.call(x)?;
        }
        // The GPU's work ends inside the profile, so every kernel's events are read.
        device.synchronize()
    })?;
    let table = profile.key_averages();
    let on_device = table.rows().iter().any(|r| !r.self_device_total.is_zero());
    let (column, time): (SortBy, fn(&AverageRow) -> f64) = if on_device {
        (SortBy::SelfDeviceTotal, |r| r.self_device_total.as_secs_f64())
    } else {
        (SortBy::SelfHostTotal, |r| r.self_host_total.as_secs_f64())
    };
    let table = table.sort_by(column);
    let kernels: Vec<&AverageRow> = table.rows().iter().filter(|r| r.kind != EventKind::Range).collect();
    let total: f64 = kernels.iter().map(|r| time(r)).sum();
    let top = kernels.iter().take(TOP);
    Ok(top.map(|r| KernelShare { name: r.name.clone(), kind: r.kind, share: time(r) / total }).collect())
    // ANCHOR_END: solution
}
// ANCHOR_END: top_kernels
