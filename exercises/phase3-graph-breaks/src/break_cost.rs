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
/// `split` (the same with graph breaks). Count the graphs each makes on `x` with `explain`. Then
/// compile each with `dynamo::compile` (its default backend, Inductor), call each once to warm
/// up, and time `calls` calls of each, interleaved (one call of each per round, so that a machine
/// getting busier slows both alike). A call's time runs until its output's values are read with
/// `.to_vec()`: that read waits for the device, so on a GPU the time includes the kernels, not
/// only their launch. Report the median time of one call of each: the upper middle of the sorted
/// samples.
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
