//! What a graph break costs: one computation (eight layers of `mul`, `add`, `tanh`, the phase 3
//! models' `layered`) compiled whole, split by one break, split after every layer, and split after
//! every layer by reading a value (`item()`, which waits for the device), timed against each other
//! and against eager on the same input. Times are medians of interleaved calls (one call of each
//! variant per round) after a warm-up, each ended by a device synchronisation; ratios are against
//! the unbroken compiled model measured in the same run.
//!
//! ```text
//! cargo run --release -p engine --example graph_break_cost -- [--backend eager|aot-eager] [--device cpu|cuda] [--calls N]
//! ```

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::{Parser, ValueEnum};
use engine::backends::{AotEager, Backend, Eager};
use engine::device::cuda;
use engine::{Device, Tensor, dynamo};
use workbook_models::phase3::layered;

const LAYERS: usize = 8;

/// Time a computation compiled whole against the same split by graph breaks.
#[derive(Parser)]
struct Args {
    /// The backend each graph is handed to.
    #[arg(long, value_enum, default_value_t = BackendName::Eager)]
    backend: BackendName,
    /// Where the tensors live.
    #[arg(long, value_enum, default_value_t = DeviceName::Cpu)]
    device: DeviceName,
    /// Timed calls of each variant.
    #[arg(long, default_value_t = 200)]
    calls: usize,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendName {
    /// Runs each graph op by op (`backend="eager"`).
    Eager,
    /// Decomposes each graph first (`backend="aot_eager"`).
    AotEager,
}

impl BackendName {
    fn build(self) -> Box<dyn Backend> {
        match self {
            BackendName::Eager => Box::new(Eager),
            BackendName::AotEager => Box::new(AotEager),
        }
    }

    fn label(self) -> &'static str {
        match self {
            BackendName::Eager => "eager",
            BackendName::AotEager => "aot_eager",
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum DeviceName {
    Cpu,
    Cuda,
}

/// How the model is split.
#[derive(Clone, Copy)]
enum Split {
    /// `breaks` explicit graph breaks (`dynamo::graph_break()`), spread evenly.
    Breaks(usize),
    /// A value read with `item()` after every layer but the last.
    ItemReads,
}

impl Split {
    const ALL: [Split; 4] = [Split::Breaks(0), Split::Breaks(1), Split::Breaks(LAYERS - 1), Split::ItemReads];

    fn label(self) -> String {
        match self {
            Split::Breaks(0) => "whole".into(),
            Split::Breaks(1) => "1 break".into(),
            Split::Breaks(n) => format!("{n} breaks"),
            Split::ItemReads => format!("{} item()", LAYERS - 1),
        }
    }

    fn graphs(self) -> usize {
        match self {
            Split::Breaks(n) => n + 1,
            Split::ItemReads => LAYERS,
        }
    }
}

/// The eight layers, split as `split` says.
fn model(x: &Tensor, split: Split) -> engine::Result<Tensor> {
    match split {
        Split::Breaks(breaks) => layered(x, LAYERS, breaks),
        Split::ItemReads => {
            let mut h = x.clone();
            for layer in 1..=LAYERS {
                h = h.mul(1.01)?.add(0.1)?.tanh()?;
                if layer < LAYERS {
                    h.sum_all()?.item()?;
                }
            }
            Ok(h)
        }
    }
}
fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median time of one call of each variant, interleaved so that a machine getting busier or
/// quieter affects every variant alike. Each call ends when the device has finished its work.
fn time_interleaved(
    calls: usize,
    device: Device,
    variants: &[&dyn Fn() -> engine::Result<Tensor>],
) -> engine::Result<Vec<Duration>> {
    let timed = |variant: &dyn Fn() -> engine::Result<Tensor>| -> engine::Result<Duration> {
        let start = Instant::now();
        variant()?;
        device.synchronize()?;
        Ok(start.elapsed())
    };
    for variant in variants {
        for _ in 0..calls / 10 + 1 {
            timed(*variant)?;
        }
    }
    let mut samples = vec![Vec::with_capacity(calls); variants.len()];
    for _ in 0..calls {
        for (variant, samples) in variants.iter().zip(&mut samples) {
            samples.push(timed(*variant)?);
        }
    }
    Ok(samples.into_iter().map(median).collect())
}

fn main() -> Result<()> {
    let args = Args::parse();
    let device = match args.device {
        DeviceName::Cpu => Device::Cpu,
        DeviceName::Cuda => match cuda::unavailable_reason() {
            None => Device::Cuda(0),
            Some(reason) => bail!("--device cuda: {reason}. Measure on the CPU with --device cpu."),
        },
    };
    for split in Split::ALL {
        let report = dynamo::explain(|x: Tensor| model(&x, split)).call(&Tensor::randn(&[2], 0))?;
        if report.graph_count() != split.graphs() {
            bail!("{} makes {} graphs, not {}", split.label(), report.graph_count(), split.graphs());
        }
    }
    let calls = args.calls;
    println!(
        "graph break cost: backend {}, device {device}, {LAYERS} layers of mul/add/tanh, median of {calls} calls\n",
        args.backend.label()
    );
    let labels: Vec<String> = Split::ALL.iter().map(|s| s.label()).collect();
    println!(
        "{:>12}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:>9}  {:>9}  {:>9}",
        "shape", "eager", labels[0], labels[1], labels[2], labels[3], "1 brk/0", "7 brk/0", "7 item/0"
    );
    for shape in [[1, 64], [64, 256], [1024, 1024]] {
        let x = Tensor::randn(&shape, 0).to(device)?;
        let compiled: Vec<_> = Split::ALL
            .iter()
            .map(|&split| dynamo::compile(move |x: Tensor| model(&x, split)).backend(args.backend.build()))
            .collect();
        let (x, compiled) = (&x, &compiled);
        let eager = || model(x, Split::Breaks(0));
        let call = |i: usize| move || compiled[i].call(x);
        let (c0, c1, c7, ci) = (call(0), call(1), call(2), call(3));
        let times = time_interleaved(calls, device, &[&eager, &c0, &c1, &c7, &ci])?;
        let ratio = |d: Duration| d.as_secs_f64() / times[1].as_secs_f64();
        println!(
            "{:>12}  {:>11.1?}  {:>11.1?}  {:>11.1?}  {:>11.1?}  {:>11.1?}  {:>8.2}x  {:>8.2}x  {:>8.2}x",
            format!("{shape:?}"),
            times[0],
            times[1],
            times[2],
            times[3],
            times[4],
            ratio(times[2]),
            ratio(times[3]),
            ratio(times[4])
        );
    }
    Ok(())
}
