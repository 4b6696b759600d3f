//! `bench sweep`: the MLP 512-2048-512 eager against compiled over batch sizes, the way phase 5's
//! `sweep` exercise times it, with the three things a CPU learner can vary and the one rule that
//! says whether two times differ:
//!
//! - `--host-overhead python` adds PyTorch's host costs (`engine::host_overhead`) to every eager op
//!   and compiled call, which is what moves PyTorch's crossover to large batches;
//! - `--threads 1,2` repeats the sweep at each thread count (`torch.set_num_threads`);
//! - `--load N` keeps N other threads busy meanwhile, as a neighbour's job would;
//! - each row says whether compiled is faster, slower or not distinguishable from eager, by
//!   comparing the two medians' 90% confidence intervals ([`Estimate`]), the rule behind
//!   `torch.utils.benchmark.Compare`'s significant figures.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use anyhow::{Result, bail};
use engine::bench::Bench;
use engine::host_overhead::{self, Setting};
use engine::{Device, Tensor, dynamo, parallel};
use serde::Serialize;
use workbook_models::phase5::{MLP_FEATURES, Mlp};

use crate::Options;
use crate::table::Table;

/// What `bench sweep` varies.
pub struct Sweep {
    /// Rows of the MLP's input.
    pub batches: Vec<usize>,
    /// Thread counts to sweep at (empty: the pool as it is).
    pub threads: Vec<usize>,
    /// Host time added per eager op and compiled call.
    pub host_overhead: Setting,
    /// Threads kept busy beside the sweep.
    pub load: usize,
}

/// A median with the half-width of its 90% confidence interval, estimated as
/// `torch.utils.benchmark` estimates a measurement's significant figures: from the samples
/// between the quartiles, `1.645 * std / sqrt(n)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Seconds.
    pub median: f64,
    /// Seconds either side of the median.
    pub half_width: f64,
}

impl Estimate {
    /// The estimate of `samples` (seconds, any order; at least one).
    pub fn of(samples: &[f64]) -> Estimate {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        let middle = &sorted[n / 4..(3 * n).div_ceil(4).max(n / 4 + 1)];
        let mean = middle.iter().sum::<f64>() / middle.len() as f64;
        let std = (middle.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / middle.len() as f64).sqrt();
        Estimate { median, half_width: 1.645 * std / (middle.len() as f64).sqrt() }
    }

    /// Whether this and `other` differ beyond noise: their intervals do not overlap.
    pub fn differs_from(&self, other: &Estimate) -> bool {
        (self.median - other.median).abs() > self.half_width + other.half_width
    }
}

/// One row: a thread count and batch, both estimates, and the verdict.
#[derive(Serialize)]
struct Row {
    threads: usize,
    batch: usize,
    eager: Estimate,
    compiled: Estimate,
    verdict: &'static str,
}

fn verdict(eager: &Estimate, compiled: &Estimate) -> &'static str {
    match (compiled.differs_from(eager), compiled.median < eager.median) {
        (false, _) => "no difference beyond noise",
        (true, true) => "compiled faster",
        (true, false) => "eager faster",
    }
}

pub fn run(options: &Options, sweep: &Sweep) -> Result<()> {
    if sweep.batches.is_empty() {
        bail!("--batches names no batch size");
    }
    let device = options.device;
    host_overhead::set(sweep.host_overhead);
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..sweep.load)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let result = measure(options, sweep, device);
    stop.store(true, Ordering::Relaxed);
    for thread in load {
        let _ = thread.join();
    }
    host_overhead::set(Setting::Off);
    let rows = result?;
    if options.json {
        println!("{}", serde_json::json!({ "device": device.to_string(), "rows": rows }));
        return Ok(());
    }
    let overhead = sweep.host_overhead.on(device);
    println!(
        "bench sweep on {device}: MLP 512-2048-512, eager against compiled (Inductor), {} samples each, interleaved\n\
         host overhead added ({:?}): {:?} per eager op, {:?} per compiled graph call, {:?} per compiled \
         launch; {} busy threads beside\n",
        options.samples,
        sweep.host_overhead,
        overhead.eager_op,
        overhead.graph_call,
        overhead.compiled_launch,
        sweep.load
    );
    let mut table = Table::new(&["threads", "batch", "eager ms", "compiled ms", "speedup", "verdict"]);
    let ms = |e: &Estimate| format!("{:.4} ± {:.4}", e.median * 1e3, e.half_width * 1e3);
    for r in &rows {
        table.row(vec![
            r.threads.to_string(),
            r.batch.to_string(),
            ms(&r.eager),
            ms(&r.compiled),
            format!("{:.2}x", r.eager.median / r.compiled.median),
            r.verdict.into(),
        ]);
    }
    println!("{}\n", table.render());
    println!(
        "± is the half-width of each median's 90% confidence interval (torch.utils.benchmark's estimate); two times \
         differ only where their intervals do not overlap."
    );
    for threads in rows.iter().map(|r| r.threads).collect::<std::collections::BTreeSet<_>>() {
        let these: Vec<&Row> = rows.iter().filter(|r| r.threads == threads).collect();
        let losing = these.iter().rposition(|r| r.verdict != "compiled faster");
        let crossover = these.get(losing.map_or(0, |i| i + 1)).map(|r| r.batch);
        match crossover {
            Some(batch) => println!("{threads} threads: compiled is faster from batch {batch} on"),
            None => println!("{threads} threads: compiled is not faster at the largest batch: no crossover here"),
        }
    }
    Ok(())
}

fn measure(options: &Options, sweep: &Sweep, device: Device) -> Result<Vec<Row>> {
    let bench = Bench::new(device).samples(options.samples).warmup(options.warmup);
    let mlp = Mlp::new(5, device)?;
    let thread_counts = if sweep.threads.is_empty() { vec![parallel::num_threads()] } else { sweep.threads.clone() };
    let mut rows = Vec::new();
    for &threads in &thread_counts {
        parallel::set_num_threads(threads);
        for &batch in &sweep.batches {
            let x = Tensor::randn(&[batch, MLP_FEATURES], batch as u64).to(device)?;
            // A fresh compiled function per batch, so each sees one shape (as the exercise asks).
            let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x));
            compiled.call(&x)?;
            let mut eager = || mlp.forward(&x).map(drop);
            let mut compiled_call = || compiled.call(&x).map(drop);
            let timings = bench.run_interleaved(&mut [&mut eager, &mut compiled_call])?;
            let (eager, compiled) = (Estimate::of(timings[0].samples()), Estimate::of(timings[1].samples()));
            rows.push(Row {
                threads: parallel::num_threads(),
                batch,
                eager,
                compiled,
                verdict: verdict(&eager, &compiled),
            });
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_comes_from_the_middle_samples() {
        // The outliers (100, 200) lie outside the quartiles and do not widen the interval.
        let e = Estimate::of(&[1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 100.0, 200.0, 0.0, 0.0]);
        assert_eq!(e.median, 2.0);
        let middle = [1.0, 1.0, 1.0, 3.0, 3.0, 3.0];
        let mean = middle.iter().sum::<f64>() / 6.0;
        let std = (middle.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / 6.0).sqrt();
        assert!((e.half_width - 1.645 * std / 6f64.sqrt()).abs() < 1e-12, "{e:?}");
        assert_eq!(Estimate::of(&[4.0]), Estimate { median: 4.0, half_width: 0.0 });
    }

    #[test]
    fn times_differ_only_beyond_their_intervals() {
        let a = Estimate { median: 10.0, half_width: 1.0 };
        assert!(!a.differs_from(&Estimate { median: 11.5, half_width: 1.0 }));
        assert!(a.differs_from(&Estimate { median: 12.5, half_width: 1.0 }));
        assert_eq!(verdict(&a, &Estimate { median: 7.0, half_width: 0.5 }), "compiled faster");
        assert_eq!(verdict(&a, &Estimate { median: 14.0, half_width: 0.5 }), "eager faster");
        assert_eq!(verdict(&a, &Estimate { median: 10.2, half_width: 0.5 }), "no difference beyond noise");
    }
}
