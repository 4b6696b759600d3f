//! What a graph break costs: the same model compiled whole, and split by 1 and by 4 breaks, timed
//! against each other and against eager on the same input. Times are medians of many calls after
//! a warm-up; ratios are against the unbroken compiled model measured in the same run.
//!
//! ```text
//! cargo run --release -p engine --example graph_break_cost -- [--backend eager|aot_eager] [--calls N]
//! ```

use std::time::{Duration, Instant};

use engine::backends::{AotEager, Backend, Eager};
use engine::{Result, Tensor, dynamo};

const LAYERS: usize = 8;

/// The break counts compared: none, one in the middle, one after every layer but the last.
const BREAKS: [usize; 3] = [0, 1, LAYERS - 1];

/// Eight pointwise layers; with `breaks` breaks spread evenly between them.
fn model(x: &Tensor, breaks: usize) -> Result<Tensor> {
    let mut h = x.clone();
    for layer in 1..=LAYERS {
        h = h.mul(1.01)?.add(0.1)?.tanh()?;
        if layer < LAYERS && breaks > 0 && layer % (LAYERS / (breaks + 1)).max(1) == 0 {
            dynamo::graph_break()?;
        }
    }
    Ok(h)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median time of one call of each variant. Runs are interleaved (one call of each variant per
/// round) so that a machine that gets busier or quieter affects every variant alike.
fn time_interleaved(calls: usize, variants: &[&dyn Fn() -> Result<Tensor>]) -> Result<Vec<Duration>> {
    for variant in variants {
        for _ in 0..calls / 10 + 1 {
            variant()?;
        }
    }
    let mut samples = vec![Vec::with_capacity(calls); variants.len()];
    for _ in 0..calls {
        for (variant, samples) in variants.iter().zip(&mut samples) {
            let start = Instant::now();
            variant()?;
            samples.push(start.elapsed());
        }
    }
    Ok(samples.into_iter().map(median).collect())
}

fn backend(name: &str) -> Option<Box<dyn Fn() -> Box<dyn Backend>>> {
    match name {
        "eager" => Some(Box::new(|| Box::new(Eager))),
        "aot_eager" => Some(Box::new(|| Box::new(AotEager))),
        _ => None,
    }
}

struct Boxed(Box<dyn Backend>);

impl Backend for Boxed {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn compile(
        &self,
        graph: &engine::fx::Graph,
        inputs: &[Tensor],
    ) -> Result<Box<dyn engine::backends::CompiledGraph>> {
        self.0.compile(graph, inputs)
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let backend_name = flag("--backend").unwrap_or_else(|| "eager".into());
    let calls: usize = flag("--calls").and_then(|c| c.parse().ok()).unwrap_or(200);
    let Some(make_backend) = backend(&backend_name) else {
        eprintln!("unknown backend `{backend_name}`; use eager or aot_eager");
        std::process::exit(2);
    };
    println!("graph break cost, backend {backend_name}, {LAYERS} layers of mul/add/tanh, median of {calls} calls\n");
    for breaks in BREAKS {
        let report = dynamo::explain(|x: Tensor| model(&x, breaks)).call(&Tensor::randn(&[2], 0))?;
        assert_eq!(report.graph_break_count(), breaks, "the model places its breaks as documented");
    }
    let header = ["shape", "eager", "0 breaks", "1 break", "7 breaks", "1 break/0", "7 breaks/0"];
    println!(
        "{:>12}  {:>12}  {:>12}  {:>12}  {:>12}  {:>10}  {:>10}",
        header[0], header[1], header[2], header[3], header[4], header[5], header[6]
    );
    for shape in [[1, 64], [64, 256], [1024, 1024]] {
        let x = Tensor::randn(&shape, 0);
        let compiled: Vec<_> = BREAKS
            .iter()
            .map(|&breaks| dynamo::compile(move |x: Tensor| model(&x, breaks)).backend(Boxed(make_backend())))
            .collect();
        let eager = || model(&x, 0);
        let (f0, f1, f7) = (|| compiled[0].call(&x), || compiled[1].call(&x), || compiled[2].call(&x));
        let times = time_interleaved(calls, &[&eager, &f0, &f1, &f7])?;
        let (eager, compiled) = (times[0], &times[1..]);
        let ratio = |d: Duration| d.as_secs_f64() / compiled[0].as_secs_f64();
        println!(
            "{:>12}  {:>12?}  {:>12?}  {:>12?}  {:>12?}  {:>9.2}x  {:>9.2}x",
            format!("{shape:?}"),
            eager,
            compiled[0],
            compiled[1],
            compiled[2],
            ratio(compiled[1]),
            ratio(compiled[2])
        );
    }
    Ok(())
}
