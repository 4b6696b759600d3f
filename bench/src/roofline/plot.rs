//! The roofline as an SVG (plotters, SVG backend only): attainable GFLOP/s against arithmetic
//! intensity on log-log axes, the roof `min(peak, bandwidth x intensity)`, and one marker per
//! kernel, eager and compiled in two colours.

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::{Ceilings, Point};

/// Writes the roofline of `points` under `ceilings` to `path`, titled `title`.
pub fn svg(path: &Path, title: &str, ceilings: &Ceilings, points: &[Point]) -> Result<()> {
    draw(path, title, ceilings, points).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw(
    path: &Path,
    title: &str,
    ceilings: &Ceilings,
    points: &[Point],
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let placed: Vec<&Point> = points.iter().filter(|p| p.gflops() > 0.0).collect();
    let ridge = ceilings.ridge();
    let (x_low, x_high) = placed
        .iter()
        .map(|p| p.cost.intensity())
        .chain([ridge])
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (x_low, x_high) = (x_low / 3.0, x_high * 3.0);
    // Headroom above the roof for the legend.
    let y_high = ceilings.gflops * 12.0;
    let y_low = placed.iter().map(|p| p.gflops()).fold(ceilings.bandwidth_gbs * x_low, f64::min) / 3.0;

    let root = SVGBackend::new(path, (720, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((x_low..x_high).log_scale(), (y_low..y_high).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (flop / byte)")
        .y_desc("GFLOP/s")
        .label_style(("sans-serif", 13))
        .draw()?;

    // The roof: bandwidth-bound left of the ridge, compute-bound right of it.
    let roof = [(x_low, ceilings.bandwidth_gbs * x_low), (ridge, ceilings.gflops), (x_high, ceilings.gflops)];
    chart
        .draw_series(LineSeries::new(roof, BLACK.stroke_width(2)))?
        .label(format!("roof: {:.0} GB/s copy, {:.0} GFLOP/s GEMM", ceilings.bandwidth_gbs, ceilings.gflops))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.stroke_width(2)));

    // The ridge point: where a kernel stops being limited by memory.
    chart.draw_series(DashedLineSeries::new(
        [(ridge, y_low), (ridge, ceilings.gflops)],
        4,
        4,
        BLACK.mix(0.5).into(),
    ))?;
    chart.draw_series([Text::new(
        format!("ridge: {ridge:.1} flop/byte"),
        (ridge * 1.1, y_low * 2.0),
        ("sans-serif", 13),
    )])?;

    let eager = RGBColor(214, 96, 77);
    let compiled = RGBColor(67, 147, 195);
    let of = |version: &'static str| {
        placed.iter().filter(move |p| p.version == version).map(|p| (p.cost.intensity(), p.gflops()))
    };
    chart
        .draw_series(of("eager").map(|xy| Circle::new(xy, 4, eager.filled())))?
        .label("eager kernels")
        .legend(move |(x, y)| Circle::new((x + 8, y), 4, eager.filled()));
    chart
        .draw_series(of("compiled").map(|xy| TriangleMarker::new(xy, 5, compiled.filled())))?
        .label("compiled kernels (fused, and extern matmuls)")
        .legend(move |(x, y)| TriangleMarker::new((x + 8, y), 5, compiled.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 13))
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
