//! Exercise `latency`: the first call of a compiled function against its steady state.

use std::time::{Duration, Instant};

use engine::backends::Backend;
use engine::dynamo::{self, CompileStats};
use engine::{Device, Result, Tensor};

use crate::model::workload;

/// Rows in the batch [`measure_latency`] runs.
pub const BATCH: usize = 64;

/// What [`measure_latency`] measured for one backend.
#[derive(Clone, Debug)]
pub struct Latency {
    /// The backend's name.
    pub backend: String,
    /// The first call: tracing, compiling and running.
    pub first_call: Duration,
    /// Each later call, in order: tracing, a cache hit, and running.
    pub steady: Vec<Duration>,
    /// The median of `steady`.
    pub steady_median: Duration,
    /// The compiled function's counters after the last call ([`dynamo::Compiled::stats`]).
    pub stats: CompileStats,
}

// ANCHOR: median
/// **Exercise `latency`, part 1.** The median of `samples`: the middle value once sorted, or
/// the mean of the two middle values when there is an even number of them. Returns
/// `Duration::ZERO` for no samples.
///
/// Book: `book/src/phase1/exercises.md`, section "latency". Check: `cargo grader check phase1`.
pub fn median(samples: &[Duration]) -> Duration {
    // ANCHOR: solution
    let mut sorted = samples.to_vec();
    sorted.sort();
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
    // ANCHOR_END: solution
}
// ANCHOR_END: median

// ANCHOR: measure_latency
/// **Exercise `latency`, part 2.** Build the model and a batch of [`BATCH`] rows on `device`
/// with [`workload`], compile `mlp.forward` with `backend`, then time `1 + steady_calls` calls
/// with [`Instant`]: the first call alone, then each of `steady_calls` more. Stop each clock only
/// once the output's values are read back (`to_vec()`), because on a GPU a call returns before
/// its kernels finish. Return the timings, their median and the compiled function's stats.
///
/// Book: `book/src/phase1/exercises.md`, section "latency". Check: `cargo grader check phase1`.
pub fn measure_latency(backend: Box<dyn Backend>, device: Device, steady_calls: usize) -> Result<Latency> {
    // ANCHOR: solution
    let (mlp, x) = workload(device, BATCH)?;
    let name = backend.name().to_string();
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(backend);
    let timed_call = || -> Result<Duration> {
        let start = Instant::now();
        compiled.call(&x)?.to_vec()?;
        Ok(start.elapsed())
    };
    let first_call = timed_call()?;
    let steady = (0..steady_calls).map(|_| timed_call()).collect::<Result<Vec<_>>>()?;
    Ok(Latency { backend: name, first_call, steady_median: median(&steady), steady, stats: compiled.stats() })
    // ANCHOR_END: solution
}
// ANCHOR_END: measure_latency
