//! A place to try your phase 5 functions by hand: `cargo run -p phase5-benchmarking --example
//! phase5-scratch` (add `--release` for numbers worth quoting). It times a known wait with your timer,
//! sweeps the MLP over batch sizes and plots it to `target/scratch/sweep.svg`, and measures what compiling the
//! naive layer norm costs and when it pays back, and compares waits of known length with your
//! `compare`. A function that is still `todo!()` prints one
//! line saying so, and the others still run. Edit freely: the grader never reads this file.

use std::time::Duration;

use engine::Device;
use engine::bench::spin;
use phase5_benchmarking::break_even::{break_even, measure_costs};
use phase5_benchmarking::compare::compare;
use phase5_benchmarking::sweep::{crossover, plot_svg, sweep_mlp};
use phase5_benchmarking::timer::{TimerConfig, do_bench};

#[path = "../../show.rs"]
mod show;
use show::{output_file, quiet_panics, show};

fn main() {
    quiet_panics();
    let device = Device::cuda_if_available();
    let config = TimerConfig::default();
    show("do_bench of a 2 ms wait: median and (p20, p80) in ms", || {
        let m = do_bench(device, &config, || spin(device, Duration::from_millis(2)))?;
        let (p20, p80) = m.p20_p80();
        Ok((m.median() * 1e3, (p20 * 1e3, p80 * 1e3), m.samples.len()))
    });
    let batches: &[usize] = if matches!(device, Device::Cuda(_)) { &[1, 16, 256, 4096] } else { &[1, 16, 64, 256] };
    show("the MLP swept over batch sizes", || {
        let points = sweep_mlp(device, batches, &config)?;
        let path = output_file("sweep.svg");
        plot_svg(&points, &format!("MLP 512-2048-512 on {device}"), &path)?;
        println!("the plot is in {} (open it in a browser)", path.display());
        Ok((crossover(&points, 1.0), points))
    });
    show("the naive layer norm: costs and break-even", || {
        let costs = measure_costs(device, 1024, 1024, &config)?;
        Ok((break_even(&costs), costs))
    });
    // Waits of a known length: the same twice (expect Same), then one 10% longer (expect Faster,
    // with a ratio near 0.91). Make them noisy, as the grader's are, to see what your answer
    // depends on.
    let budget = Duration::from_millis(500);
    for (a, b) in [(2.0, 2.0), (2.0, 2.2)] {
        let wait = |ms: f64| spin(device, Duration::from_secs_f64(ms * 1e-3));
        show(&format!("compare a {a} ms wait with a {b} ms wait, within {budget:?}"), || {
            compare(device, budget, || wait(a), || wait(b))
        });
    }
}
