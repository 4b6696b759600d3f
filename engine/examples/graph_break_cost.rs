//! What a graph break costs: one computation (eight layers of `mul`, `add`, `tanh`) compiled
//! whole, split by one break, split after every layer, and split after every layer by reading a
//! value (`item()`, which waits for the device), timed against each other and against eager on
//! the same input. Times are medians of interleaved calls (one call of each variant per round)
//! after a warm-up, each ended by a device synchronisation; ratios are against the unbroken
//! compiled model measured in the same run.
//!
//! ```text
//! cargo run --release -p engine --example graph_break_cost -- [--backend eager|aot_eager] [--device cpu|cuda] [--calls N]
//! ```

use std::time::{Duration, Instant};

use engine::backends::{AotEager, Backend, Eager};
use engine::{Device, Result, Tensor, dynamo};

const LAYERS: usize = 8;

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

    fn breaks(self) -> usize {
        match self {
            Split::Breaks(n) => n,
            Split::ItemReads => LAYERS - 1,
        }
    }
}

/// The eight layers, split as `split` says.
fn model(x: &Tensor, split: Split) -> Result<Tensor> {
    let mut h = x.clone();
    for layer in 1..=LAYERS {
        h = h.mul(1.01)?.add(0.1)?.tanh()?;
        let every = (LAYERS / (split.breaks() + 1)).max(1);
        if layer < LAYERS && split.breaks() > 0 && layer % every == 0 {
            match split {
                Split::Breaks(_) => dynamo::graph_break()?,
                Split::ItemReads => {
                    h.sum_all()?.item()?;
                }
            }
        }
    }
    Ok(h)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median time of one call of each variant, interleaved so that a machine getting busier or
/// quieter affects every variant alike. Each call ends when the device has finished its work.
fn time_interleaved(calls: usize, device: Device, variants: &[&dyn Fn() -> Result<Tensor>]) -> Result<Vec<Duration>> {
    let timed = |variant: &dyn Fn() -> Result<Tensor>| -> Result<Duration> {
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

fn backend(name: &str) -> Option<Box<dyn Backend>> {
    match name {
        "eager" => Some(Box::new(Eager)),
        "aot_eager" => Some(Box::new(AotEager)),
        _ => None,
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let backend_name = flag("--backend").unwrap_or_else(|| "eager".into());
    let calls: usize = flag("--calls").and_then(|c| c.parse().ok()).unwrap_or(200);
    let device = match flag("--device").as_deref() {
        None | Some("cpu") => Device::Cpu,
        Some("cuda") => Device::Cuda(0),
        Some(other) => {
            eprintln!("unknown device `{other}`; use cpu or cuda");
            std::process::exit(2);
        }
    };
    if backend(&backend_name).is_none() {
        eprintln!("unknown backend `{backend_name}`; use eager or aot_eager");
        std::process::exit(2);
    }
    for split in Split::ALL {
        let report = dynamo::explain(|x: Tensor| model(&x, split)).call(&Tensor::randn(&[2], 0))?;
        assert_eq!(report.graph_count(), split.breaks() + 1, "{} makes {} graphs", split.label(), split.breaks() + 1);
    }
    println!(
        "graph break cost: backend {backend_name}, device {device}, {LAYERS} layers of mul/add/tanh, median of {calls} calls\n"
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
            .map(|&split| {
                dynamo::compile(move |x: Tensor| model(&x, split))
                    .backend(backend(&backend_name).expect("checked above"))
            })
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
