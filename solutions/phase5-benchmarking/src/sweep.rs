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
    // ANCHOR: solution
    let mlp = Mlp::new(SEED, device)?;
    let mut points = Vec::with_capacity(batches.len());
    for &batch in batches {
        let x = Tensor::randn(&[batch, MLP_FEATURES], batch as u64).to(device)?;
        let eager = do_bench(device, config, || mlp.forward(&x).map(drop))?;
        let compiled_mlp = dynamo::compile(|x: Tensor| mlp.forward(&x));
        let compiled = do_bench(device, config, || compiled_mlp.call(&x).map(drop))?;
        points.push(Point { batch, eager: eager.median(), compiled: compiled.median() });
    }
    Ok(points)
    // ANCHOR_END: solution
}
// ANCHOR_END: sweep_mlp

// ANCHOR: crossover
/// **Exercise `sweep`, part 2.** The crossover: the smallest batch of `points` (sorted by
/// batch) from which compiled is at least `min_speedup` times faster than eager, at that batch
/// and at every larger one. `None` when it is not at the largest batch.
///
/// Book: `book/src/phase5/exercises.md`, section "sweep". Check: `cargo grader check phase5`.
pub fn crossover(points: &[Point], min_speedup: f64) -> Option<usize> {
    // ANCHOR: solution
    let losing = points.iter().rposition(|p| p.speedup() < min_speedup);
    let first_winning = losing.map_or(0, |i| i + 1);
    points.get(first_winning).map(|p| p.batch)
    // ANCHOR_END: solution
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
    // ANCHOR: solution
    draw(points, title, path).map_err(|e| Error::Io { path: path.to_path_buf(), message: e.to_string() })
    // ANCHOR_END: solution
}
// ANCHOR_END: plot_svg

// ANCHOR: solution-only
fn draw(points: &[Point], title: &str, path: &Path) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let milliseconds = points.iter().flat_map(|p| [p.eager * 1e3, p.compiled * 1e3]);
    let (low, high) = milliseconds.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let batches = points.iter().map(|p| p.batch as f64);
    let (first, last) = batches.fold((f64::INFINITY, 0.0f64), |(lo, hi), b| (lo.min(b), hi.max(b)));
    let root = SVGBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((first / 1.5..last * 1.5).log_scale(), (low / 1.5..high * 1.5).log_scale())?;
    chart.configure_mesh().x_desc("batch").y_desc("ms per call").draw()?;
    let series = [
        ("eager", RED, points.iter().map(|p| p.eager).collect::<Vec<_>>()),
        ("compiled", BLUE, points.iter().map(|p| p.compiled).collect()),
    ];
    for (label, color, seconds) in series {
        let line = points.iter().zip(seconds).map(|(p, s)| (p.batch as f64, s * 1e3));
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
    }
    chart.configure_series_labels().background_style(WHITE).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
// ANCHOR_END: solution-only
