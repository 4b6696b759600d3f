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
    todo!()
}
// ANCHOR_END: top_kernels
