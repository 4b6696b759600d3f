//! Checks of `sweep`. `crossover` is compared with the grader's answer on random sweeps;
//! `plot_svg` draws random sweeps whose file is read back, point by point; `sweep_mlp` times
//! the real MLP, and its times are compared by the judge with the reference solution's, measured
//! in the judge's own process.

use std::collections::BTreeSet;

use engine::Device;
use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record, record_floats};
use proptest::prelude::*;

use super::support::{Timed, log2_ms, timed, wake_the_gpu};
use crate::subject::sweep::{Point, crossover, plot_svg, sweep_mlp};

/// The grader's crossover: the first batch after the last one where compiled is not fast enough.
fn reference_crossover(points: &[Point], min_speedup: f64) -> Option<usize> {
    let mut answer = None;
    for p in points.iter().rev() {
        if p.eager / p.compiled < min_speedup {
            break;
        }
        answer = Some(p.batch);
    }
    answer
}

/// Sweeps of 1 to 7 increasing batch sizes with times from 10 µs to 100 ms.
fn sweeps(min_points: usize) -> impl Strategy<Value = Vec<Point>> {
    let batch = (0u32..14).prop_map(|p| 1usize << p);
    (prop::collection::btree_set(batch, min_points..8), prop::collection::vec((1e-5f64..0.1, 0.3f64..3.0), 8)).prop_map(
        |(batches, times): (BTreeSet<usize>, Vec<(f64, f64)>)| {
            batches
                .into_iter()
                .zip(times)
                .map(|(batch, (eager, speedup))| Point { batch, eager, compiled: eager / speedup })
                .collect()
        },
    )
}

/// `crossover` agrees with the grader's on random sweeps and thresholds.
pub fn crossover_is_found(ctx: &Context) -> CheckResult {
    let cases = 300;
    for_all(ctx, cases, (sweeps(1), prop::sample::select(vec![1.0, 1.1, 1.5])), |(points, min_speedup)| {
        let (got, expected) = (crossover(&points, min_speedup), reference_crossover(&points, min_speedup));
        record("crossover", format!("{got:?}"));
        ensure(got == expected, || {
            let speedups: Vec<String> = points.iter().map(|p| format!("{}: {:.2}x", p.batch, p.speedup())).collect();
            format!(
                "crossover at min_speedup {min_speedup} of a sweep with speedups [{}] returned {got:?}, expected {expected:?}",
                speedups.join(", ")
            )
        })
    })?;
    Ok(format!("crossover agrees with the grader's on {cases} random sweeps"))
}

/// The numbers of a `<polyline points="x,y x,y ...">`.
fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|element| {
            let (_, rest) = element.split_once("points=\"")?;
            let (list, _) = rest.split_once('"')?;
            list.split_whitespace()
                .map(|pair| {
                    let (x, y) = pair.split_once(',')?;
                    Some((x.parse().ok()?, y.parse().ok()?))
                })
                .collect()
        })
        .collect()
}

/// The largest distance, in pixels, of `(value, pixel)` pairs from the least-squares line of
/// `pixel` against `ln(value)`, and that line's slope.
fn log_fit(pairs: &[(f64, f64)]) -> (f64, f64) {
    let n = pairs.len() as f64;
    let (mx, my) = pairs.iter().fold((0.0, 0.0), |(x, y), &(v, p)| (x + v.ln() / n, y + p / n));
    let sxx: f64 = pairs.iter().map(|&(v, _)| (v.ln() - mx).powi(2)).sum();
    let sxy: f64 = pairs.iter().map(|&(v, p)| (v.ln() - mx) * (p - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let worst = pairs.iter().map(|&(v, p)| (my + slope * (v.ln() - mx) - p).abs()).fold(0.0, f64::max);
    (worst, slope)
}

/// Whether polylines `a` and `b` draw the eager and compiled times of `points` on one pair of
/// logarithmic axes: x from the batch, y from the time, larger times higher up (smaller y).
fn draws_both(points: &[Point], a: &[(f64, f64)], b: &[(f64, f64)]) -> bool {
    // plotters rounds to whole pixels.
    let within = 2.0;
    let on_axes = |value: fn(&Point) -> f64, coordinate: fn(&(f64, f64)) -> f64| -> Vec<(f64, f64)> {
        let a = points.iter().zip(a).map(|(p, xy)| (value(p), coordinate(xy)));
        a.chain(points.iter().zip(b).map(|(p, xy)| (value(p), coordinate(xy)))).collect()
    };
    let (x_error, x_slope) = log_fit(&on_axes(|p| p.batch as f64, |xy| xy.0));
    let ys: Vec<(f64, f64)> = points
        .iter()
        .zip(a)
        .map(|(p, &(_, y))| (p.eager, y))
        .chain(points.iter().zip(b).map(|(p, &(_, y))| (p.compiled, y)))
        .collect();
    let (y_error, y_slope) = log_fit(&ys);
    x_error <= within && x_slope > 0.0 && y_error <= within && y_slope < 0.0
}

/// `plot_svg` writes an SVG with the two series on logarithmic axes, the axis labels, the legend
/// and the title, for random sweeps.
pub fn plot_shows_both_series(ctx: &Context) -> CheckResult {
    let cases = 8;
    let dir = tempfile::Builder::new()
        .prefix("phase5-plots-")
        .tempdir()
        .map_err(|e| Failure::Setup(format!("cannot create a temporary directory: {e}")))?;
    for_all(ctx, cases, sweeps(3), |points| {
        let path = dir.path().join("sweep.svg");
        let _ = std::fs::remove_file(&path);
        plot_svg(&points, "a random sweep", &path)?;
        let svg = std::fs::read_to_string(&path)
            .map_err(|e| Failure::fail(format!("plot_svg returned Ok but {} cannot be read: {e}", path.display())))?;
        let texts = ["a random sweep", "batch", "ms per call", "eager", "compiled"];
        let missing: Vec<&str> = texts.iter().copied().filter(|t| !svg.contains(&format!("\n{t}\n"))).collect();
        let lines: Vec<Vec<(f64, f64)>> = polylines(&svg).into_iter().filter(|l| l.len() == points.len()).collect();
        let found = lines.iter().any(|a| lines.iter().any(|b| draws_both(&points, a, b)));
        record(format!("an SVG with both series of {points:?} on log-log axes"), found);
        record("labels missing", format!("{missing:?}"));
        ensure(svg.starts_with("<svg"), || format!("{} is not an SVG file", path.display()))?;
        ensure(missing.is_empty(), || format!("the plot has no text {missing:?} (each label is a text of its own)"))?;
        ensure(found, || {
            format!(
                "the plot has no two line series of {} points each that draw the eager and compiled times on \
                 logarithmic axes ({} polylines of that length); the sweep was {points:?}",
                points.len(),
                lines.len()
            )
        })
    })?;
    Ok(format!("{cases} random sweeps plotted, each read back point by point"))
}

/// `sweep_mlp` times the MLP at every batch, eagerly and compiled. The times are recorded as
/// `log2` of milliseconds, so that the judge, which measures the same sweep with the reference
/// solution in its own process, compares them as ratios.
pub fn sweep_times_the_mlp(_ctx: &Context) -> CheckResult {
    let device = Device::cuda_if_available();
    let Timed { sweep, batches, steady, .. } = timed(device);
    wake_the_gpu(device)?;
    let points = sweep_mlp(device, batches, &sweep)?;
    let got: Vec<usize> = points.iter().map(|p| p.batch).collect();
    record("batches", format!("{got:?}"));
    ensure(got == batches, || format!("sweep_mlp(.., {batches:?}, ..) returned points for batches {got:?}"))?;
    let times = |p: &Point| [p.eager, p.compiled];
    ensure(points.iter().flat_map(times).all(|t| t.is_finite() && t > 0.0), || {
        format!("every time must be a positive number of seconds; you returned {points:?}")
    })?;
    for p in &points {
        record_floats(format!("log2 of eager ms at batch {}", p.batch), &[log2_ms(p.eager)], steady);
        record_floats(format!("log2 of compiled ms at batch {}", p.batch), &[log2_ms(p.compiled)], steady);
    }
    let shown: Vec<String> =
        points.iter().map(|p| format!("{}: {:.3} / {:.3} ms", p.batch, p.eager * 1e3, p.compiled * 1e3)).collect();
    Ok(format!("eager / compiled on {device}: {}", shown.join(", ")))
}
