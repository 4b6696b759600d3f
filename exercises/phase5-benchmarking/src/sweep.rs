//! Exercise `sweep`: the MLP eager against compiled over batch sizes, the crossover, an SVG plot.

use std::path::Path;

use engine::{Device, Error, Result, Tensor, dynamo};
use plotters::prelude::*;

use crate::models::{MLP_FEATURES, Mlp};
use crate::timer::{TimerConfig, do_bench};

/// The seed of the MLP's weights in the sweep.
pub const SEED: u64 = 5;

/// One batch size of a sweep: the median time of one call, eagerly and compiled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Rows of the input.
    pub batch: usize,
    /// Median seconds of an eager call.
    pub eager: f64,
    /// Median seconds of a compiled call (steady state: the first call, which compiles, is a
    /// warm-up call).
    pub compiled: f64,
}

impl Point {
    /// How many times faster compiled is than eager (below 1: slower).
    pub fn speedup(&self) -> f64 {
        self.eager / self.compiled
    }
}

// ANCHOR: sweep_mlp
/// **Exercise `sweep`, part 1.** For each batch size in `batches`, in order, build an input
/// `Tensor::randn(&[batch, MLP_FEATURES], batch as u64)` on `device` and time the MLP
/// (`Mlp::new(SEED, device)`, one model for the whole sweep) with your [`do_bench`] and
/// `config`: eagerly (`mlp.forward(&x)`), then compiled with a fresh `dynamo::compile` for this
/// batch size, so that every compiled function sees one shape. The first compiled call
/// compiles: it must be one of `do_bench`'s warm-up calls, never a sample.
///
/// Book: `book/src/phase5/exercises.md`, section "sweep". Check: `cargo grader check phase5`.
pub fn sweep_mlp(device: Device, batches: &[usize], config: &TimerConfig) -> Result<Vec<Point>> {
    todo!()
}
// ANCHOR_END: sweep_mlp

// ANCHOR: crossover
/// **Exercise `sweep`, part 2.** The crossover: the smallest batch of `points` (sorted by
/// batch) from which compiled is at least `min_speedup` times faster than eager, at that batch
/// and at every larger one. `None` when it is not at the largest batch.
///
/// Book: `book/src/phase5/exercises.md`, section "sweep". Check: `cargo grader check phase5`.
pub fn crossover(points: &[Point], min_speedup: f64) -> Option<usize> {
    todo!()
}
// ANCHOR_END: crossover

// ANCHOR: plot_svg
/// **Exercise `sweep`, part 3.** Plot `points` as an SVG file at `path`, with plotters: the
/// batch size on a logarithmic x axis (labelled `batch`), milliseconds per call on a logarithmic
/// y axis (labelled `ms per call`), and two line series, one point per batch, labelled `eager`
/// and `compiled` in a legend. `title` goes above the plot.
///
/// Book: `book/src/phase5/exercises.md`, section "sweep". Check: `cargo grader check phase5`.
pub fn plot_svg(points: &[Point], title: &str, path: &Path) -> Result<()> {
    todo!()
}
// ANCHOR_END: plot_svg
