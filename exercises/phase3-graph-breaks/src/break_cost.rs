//! Exercise `break_cost` (stretch): what a graph break costs, measured.

use std::time::{Duration, Instant};

use engine::{Result, Tensor, dynamo};

/// Two compiled versions of one computation, timed against each other.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakCost {
    /// Graphs the whole version makes.
    pub graphs_whole: usize,
    /// Graphs the split version makes.
    pub graphs_split: usize,
    /// Median time of one call of the whole version.
    pub whole: Duration,
    /// Median time of one call of the split version.
    pub split: Duration,
}

impl BreakCost {
    /// How many times longer the split version takes.
    pub fn ratio(&self) -> f64 {
        self.split.as_secs_f64() / self.whole.as_secs_f64()
    }
}

// ANCHOR: measure_break_cost
/// **Exercise `break_cost` (stretch).** Compare two versions of a computation, `whole` and
/// `split` (the same with graph breaks): count the graphs each makes on `x` with `explain`, then
/// measure the median time of one call of each, compiled with `dynamo::compile` (its default
/// backend, Inductor), over `calls` timed calls of each. Report the upper middle of the sorted
/// samples as the median.
///
/// A fair measurement rules out three mistakes, and the grader watches for each from outside
/// your code: a call that compiles is not a measurement (each version runs exactly `calls + 2`
/// times: once under `explain`, once untimed, then `calls` timed); a machine that gets busier
/// during the measurement must slow both versions alike (after `explain`, the versions' calls
/// alternate, one of each per round, the untimed ones included); and a call returns before the
/// device has done its work, as on a GPU, so a time that ends before the output's values are read
/// (`.to_vec()`) is too short (the split version's break keeps the device busy for a secret time).
///
/// Book: `book/src/phase3/exercises.md`, section "break_cost". Check: `cargo grader check phase3`.
pub fn measure_break_cost(
    whole: impl Fn(Tensor) -> Result<Tensor>,
    split: impl Fn(Tensor) -> Result<Tensor>,
    x: &Tensor,
    calls: usize,
) -> Result<BreakCost> {
    todo!()
}
// ANCHOR_END: measure_break_cost
