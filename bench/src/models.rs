//! `bench models`: the workbook's headline workloads, eager against compiled (Inductor, default
//! mode), timed the way PyTorch's own comparisons are (`triton.testing.do_bench`): warm-up,
//! interleaved samples on the device's clock, medians; plus the first call, which pays for
//! tracing and compilation.
//!
//! [`workloads`] is the list the other commands reuse (modes, roofline): each workload is a
//! closure over its seeded inputs, built from `workbook_models::phase5`, so the numbers the book
//! quotes and the numbers a learner measures come from the same code.

use std::rc::Rc;
use std::time::Duration;

use anyhow::{Result, bail};
use engine::bench::{Bench, Timing, time_once};
use engine::{Device, Tensor, dynamo};
use serde::Serialize;
use workbook_models::phase5::{
    self, Block, BlockShape, MLP_BATCHES, MLP_FEATURES, Mlp, POINTWISE_ELEMENTS, naive_layer_norm, naive_softmax,
};

use crate::Options;
use crate::first_call::{self, FreshCache};
use crate::table::Table;

/// A workload's computation: the inputs in, one tensor out. Shared (`Rc`) so that an eager run
/// and any number of compiled wrappers can call the same closure.
pub type Forward = Rc<dyn Fn(&[Tensor]) -> engine::Result<Tensor>>;

/// One benchmark workload: a name for tables, its inputs on the device, its computation.
pub struct Workload {
    /// How tables name it, e.g. `"mlp bs=16"`.
    pub name: String,
    /// The inputs, already on the device (weights are captured by `forward`, as module
    /// parameters are in Dynamo).
    pub inputs: Vec<Tensor>,
    /// The computation, run eagerly as is or handed to `dynamo::compile`.
    pub forward: Forward,
}

impl Workload {
    /// A workload of `inputs` computing `forward`.
    pub fn new(
        name: impl Into<String>,
        inputs: Vec<Tensor>,
        forward: impl Fn(&[Tensor]) -> engine::Result<Tensor> + 'static,
    ) -> Workload {
        Workload { name: name.into(), inputs, forward: Rc::new(forward) }
    }

    /// Runs the workload eagerly once.
    pub fn eager(&self) -> engine::Result<Tensor> {
        (self.forward)(&self.inputs)
    }

    /// The computation in the form `dynamo::compile` takes; add a backend or mode to taste.
    pub fn traceable(&self) -> impl Fn(Vec<Tensor>) -> engine::Result<Tensor> + 'static {
        let forward = self.forward.clone();
        move |inputs| forward(&inputs)
    }
}

/// The headline workloads in the order tables list them, each built (inputs allocated on
/// `device`) only when the iterator reaches it: the MLP 512-2048-512 at every batch of
/// [`MLP_BATCHES`], the naive transformer block at [`BlockShape::SMALL`] and
/// [`BlockShape::LARGE`], naive softmax 4096x4096, naive layer norm 8192x1024, and the pointwise
/// chains of 16 M elements (add-ReLU-mul, 8 and 16 ops of sin/mul/add, 8 tanh).
pub fn workloads(device: Device) -> impl Iterator<Item = Result<Workload>> {
    type Build = Box<dyn Fn() -> Result<Workload>>;
    let mut builds: Vec<Build> = Vec::new();
    for batch in MLP_BATCHES {
        builds.push(Box::new(move || {
            let mlp = Mlp::new(0, device)?;
            let x = Tensor::randn(&[batch, MLP_FEATURES], 1).to(device)?;
            Ok(Workload::new(format!("mlp bs={batch}"), vec![x], move |t| mlp.forward(&t[0])))
        }));
    }
    for shape in [BlockShape::SMALL, BlockShape::LARGE] {
        builds.push(Box::new(move || {
            let block = Block::new(shape, 0, device)?;
            let x = Tensor::randn(&[shape.batch, shape.seq, shape.d_model], 1).to(device)?;
            Ok(Workload::new(format!("block {}", shape.label()), vec![x], move |t| block.naive_forward(&t[0])))
        }));
    }
    builds.push(Box::new(move || {
        let x = Tensor::randn(&[4096, 4096], 2).to(device)?;
        Ok(Workload::new("naive softmax 4096x4096", vec![x], |t| naive_softmax(&t[0])))
    }));
    builds.push(Box::new(move || {
        let x = Tensor::randn(&[8192, 1024], 3).to(device)?;
        let w = Tensor::uniform(&[1024], 0.5, 1.5, 4).to(device)?;
        let b = Tensor::randn(&[1024], 5).to(device)?;
        Ok(Workload::new("naive layer norm 8192x1024", vec![x, w, b], |t| naive_layer_norm(&t[0], &t[1], &t[2])))
    }));
    builds.push(Box::new(move || {
        let (x, bias) = (pointwise_input(6, device)?, pointwise_input(7, device)?);
        Ok(Workload::new("add-relu-mul 16M", vec![x, bias], |t| phase5::add_relu_mul(&t[0], &t[1])))
    }));
    for ops in [8, 16] {
        builds.push(Box::new(move || {
            let x = pointwise_input(8, device)?;
            Ok(Workload::new(format!("{ops}-op chain 16M"), vec![x], move |t| phase5::pointwise_chain(&t[0], ops)))
        }));
    }
    builds.push(Box::new(move || {
        let x = pointwise_input(9, device)?;
        Ok(Workload::new("8x tanh 16M", vec![x], |t| phase5::repeated_tanh(&t[0], 8)))
    }));
    builds.into_iter().map(|build| build())
}

fn pointwise_input(seed: u64, device: Device) -> Result<Tensor> {
    Ok(Tensor::randn(&[POINTWISE_ELEMENTS], seed).to(device)?)
}

/// On the CPU, seconds of timed samples to aim for per workload: the whole command must finish
/// in about two minutes on a 2-core machine, and a transformer block takes seconds per call there.
const CPU_SECONDS_PER_WORKLOAD: f64 = 3.0;

/// What [`measure`] found for one workload.
pub struct Measured {
    /// Steady-state eager samples.
    pub eager: Timing,
    /// Steady-state compiled samples, interleaved with the eager ones.
    pub compiled: Timing,
    /// Wall-clock time of the compiled function's first call (tracing, compiling, running).
    pub first_call: Duration,
    /// Largest difference between the eager and compiled outputs, relative to the largest
    /// eager value (at least 1).
    pub max_difference: f64,
}

/// Times `workload` eagerly and through `compiled` (a compiled form of the same computation,
/// whose first call this makes): the first call on the wall clock, then interleaved samples with
/// `options`' device, samples and warm-up. On the CPU the sample count adapts to fit
/// [`CPU_SECONDS_PER_WORKLOAD`] (down to one sample for a workload slower than that), and slow
/// workloads skip warm-up (the first calls warmed them).
pub fn measure(
    workload: &Workload,
    compiled: &dyn Fn(&[Tensor]) -> engine::Result<Tensor>,
    options: &Options,
) -> Result<Measured> {
    let device = options.device;
    let (eager_out, eager_once) = time_once(device, || workload.eager())?;
    let (compiled_out, first_call) = time_once(device, || compiled(&workload.inputs))?;
    let max_difference = difference(&eager_out, &compiled_out)?;
    drop((eager_out, compiled_out));
    // Eager's first call compiles nothing on the CPU, so it predicts a sample (compiled assumed
    // no slower): a pair of samples costs about twice it.
    let pair = 2.0 * eager_once.as_secs_f64();
    let (samples, warmup) = match device {
        Device::Cpu => {
            let fitting = (CPU_SECONDS_PER_WORKLOAD / pair) as usize;
            (fitting.clamp(1, options.samples), if pair < 0.1 { options.warmup } else { 0 })
        }
        Device::Cuda(_) => (options.samples, options.warmup),
    };
    // On the CPU, samples run back to back, as `bench/torch/models.py` takes PyTorch's: steady
    // state, as in serving. (A flush by one thread would evict only its own core's caches, and
    // leave the pool asleep at the start of every sample.)
    let bench = Bench::new(device).samples(samples).warmup(warmup).flush_cache(!matches!(device, Device::Cpu));
    let mut eager = || workload.eager().map(drop);
    let mut compiled_run = || compiled(&workload.inputs).map(drop);
    let mut timings = bench.run_interleaved(&mut [&mut eager, &mut compiled_run])?;
    let compiled = timings.pop().expect("two closures timed");
    let eager = timings.pop().expect("two closures timed");
    Ok(Measured { eager, compiled, first_call, max_difference })
}

/// `max |a - b| / max(1, max |a|)`, after checking the shapes agree.
fn difference(a: &Tensor, b: &Tensor) -> Result<f64> {
    if a.shape() != b.shape() {
        bail!("compiled output has shape {:?}, eager {:?}", b.shape(), a.shape());
    }
    let (a, b) = (a.to_vec()?, b.to_vec()?);
    let scale = a.iter().fold(1.0f64, |m, v| m.max(f64::from(v.abs())));
    let worst = a.iter().zip(&b).fold(0.0f64, |m, (x, y)| m.max(f64::from((x - y).abs())));
    Ok(worst / scale)
}

/// Relative differences beyond this are reported as wrong results, not timed silently.
const TOLERANCE: f64 = 1e-3;

/// One row of `bench models --json`.
#[derive(Serialize)]
struct Row {
    workload: String,
    eager_ms: f64,
    compiled_ms: f64,
    speedup: f64,
    /// Wall-clock milliseconds of the compiled function's first call.
    first_call_ms: f64,
    /// Milliseconds its backend spent compiling (inside the first call).
    compile_ms: f64,
    /// The first call in a new process with an empty kernel cache: milliseconds, and where the
    /// compile's time went by stage.
    cold: serde_json::Value,
    /// The same with the cache the cold run filled (a warm start).
    warm: serde_json::Value,
    samples: usize,
    eager_spread: f64,
    compiled_spread: f64,
    max_difference: f64,
}

/// The whole report of `bench models --json`.
#[derive(Serialize)]
struct Report {
    device: String,
    timing: &'static str,
    rows: Vec<Row>,
}

/// `bench models`: every workload whose name contains one of `only` (all when empty).
pub fn run(options: &Options, only: &[String]) -> Result<()> {
    let device = options.device;
    let timing = match device {
        Device::Cpu => {
            "CPU: median of interleaved wall-clock samples, back to back (no cache flush, as bench/torch/models.py); \
             samples per workload fit ~3 s (1 at least, --samples at most), warm-up skipped where one call takes over \
             100 ms (the first calls warmed it)"
        }
        Device::Cuda(_) => "CUDA: median of interleaved CUDA-event samples, L2 flushed before each",
    };
    if !options.json {
        println!("bench models on {device}\n{timing}\n");
    }
    let mut rows = Vec::new();
    for workload in workloads(device) {
        let workload = workload?;
        if !only.is_empty() && !only.iter().any(|o| workload.name.contains(o.as_str())) {
            continue;
        }
        let cache = FreshCache::new("models");
        let args = vec![
            "models-first-call".to_string(),
            "--device".into(),
            device.to_string(),
            "--workload".into(),
            workload.name.clone(),
        ];
        let cold = first_call::in_new_process(&args, cache.path())?;
        let warm = first_call::in_new_process(&args, cache.path())?;
        eprintln!("  {}: cold first call {:.1} ms: {}", workload.name, cold.seconds * 1e3, cold.stages_line());
        let compiled = dynamo::compile(workload.traceable()).name(&workload.name);
        let measured = measure(&workload, &|inputs| compiled.call(inputs), options)?;
        let row = Row {
            workload: workload.name.clone(),
            eager_ms: measured.eager.median() * 1e3,
            compiled_ms: measured.compiled.median() * 1e3,
            speedup: measured.eager.median() / measured.compiled.median(),
            first_call_ms: measured.first_call.as_secs_f64() * 1e3,
            compile_ms: compiled.stats().compile_time.as_secs_f64() * 1e3,
            cold: cold.to_json(),
            warm: warm.to_json(),
            samples: measured.eager.samples().len(),
            eager_spread: measured.eager.spread(),
            compiled_spread: measured.compiled.spread(),
            max_difference: measured.max_difference,
        };
        if row.max_difference > TOLERANCE {
            eprintln!(
                "warning: {}: compiled differs from eager by {:.1e} (relative)",
                row.workload, row.max_difference
            );
        }
        eprintln!("  {}: eager {:.3} ms, compiled {:.3} ms", row.workload, row.eager_ms, row.compiled_ms);
        rows.push(row);
    }
    if options.json {
        let report = Report { device: device.to_string(), timing, rows };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", render(&rows));
    }
    Ok(())
}

/// `bench models-first-call`: the first compiled call of workload `name`, in this (new) process,
/// after bringing the device up with its inputs; prints what [`first_call::in_new_process`] reads.
pub fn first_call(options: &Options, name: &str) -> Result<()> {
    let device = options.device;
    let Some(workload) = workloads(device).find(|w| w.as_ref().map_or(true, |w| w.name == name)) else {
        bail!("no workload named `{name}`");
    };
    let workload = workload?;
    device.synchronize()?;
    let compiled = dynamo::compile(workload.traceable()).name(&workload.name);
    let (_, seconds) = time_once(device, || compiled.call(&workload.inputs))?;
    first_call::report(seconds.as_secs_f64(), &compiled.stats());
    Ok(())
}

fn render(rows: &[Row]) -> String {
    let mut table = Table::new(&[
        "workload",
        "eager ms",
        "compiled ms",
        "speedup",
        "first call ms",
        "compile ms",
        "cold / warm first call ms",
        "samples",
        "spread e/c",
    ]);
    for r in rows {
        table.row(vec![
            r.workload.clone(),
            format!("{:.3}", r.eager_ms),
            format!("{:.3}", r.compiled_ms),
            format!("{:.2}x", r.speedup),
            format!("{:.1}", r.first_call_ms),
            format!("{:.1}", r.compile_ms),
            format!(
                "{:.0} / {:.0}",
                r.cold["first_call_ms"].as_f64().unwrap_or(f64::NAN),
                r.warm["first_call_ms"].as_f64().unwrap_or(f64::NAN)
            ),
            r.samples.to_string(),
            format!("{:.0}%/{:.0}%", r.eager_spread * 100.0, r.compiled_spread * 100.0),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_times_both_forms_and_compares_their_outputs() {
        let x = Tensor::randn(&[1000], 0);
        let workload = Workload::new("tiny", vec![x], |t| t[0].mul(2.0)?.relu());
        let compiled = dynamo::compile(workload.traceable());
        let options = Options { device: Device::Cpu, samples: 4, warmup: 1, json: false };
        let measured = measure(&workload, &|inputs| compiled.call(inputs), &options).unwrap();
        assert_eq!((measured.eager.samples().len(), measured.compiled.samples().len()), (4, 4));
        assert!(measured.max_difference < 1e-6, "{}", measured.max_difference);
        assert_eq!(compiled.stats().compiles, 1);
        let broken = |_: &[Tensor]| Tensor::randn(&[7], 1).relu();
        assert!(measure(&workload, &broken, &options).is_err(), "a wrong shape is an error");
    }
}
