//! `bench regional`: a stack of [`LAYERS`] naive transformer blocks compiled whole (one graph
//! with every block in it) against compiled regionally (one block compiled with
//! `dynamo::compile_region` and reused for every block), as PyTorch's regional compilation recipe
//! compares `torch.compile(model)` with `block.compile()` per block (`bench/torch/regional.py` is
//! its PyTorch side).
//!
//! Per form: the first call with an empty kernel cache (tracing, compiling, loading and running
//! once), the call at a new sequence length (a recompile, after which automatic dynamic shapes
//! make the length a symbol), the call at a third length (the dynamic graph's code for new sizes),
//! and the steady state, the two forms timed interleaved in one process. The compile figures come
//! from a new process per form, each with an empty kernel cache of its own, so that neither reads
//! the other's kernels.

use anyhow::{Context, Result, bail};
use engine::bench::{Bench, time_once};
use engine::dynamo::{self, CompileStats};
use engine::{Device, Tensor};
use serde::{Deserialize, Serialize};
use workbook_models::phase5::{Block, BlockShape, LAYERS, Stack};

use crate::Options;
use crate::first_call::FreshCache;
use crate::table::Table;

/// The two ways to compile the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    /// `dynamo::compile` of the whole stack: one graph.
    Whole,
    /// `dynamo::compile_region` of one block, called for each.
    Regional,
}

/// A call of a stack on its input.
type StackCall = Box<dyn Fn(&Stack, &Tensor) -> engine::Result<Tensor>>;

/// A compiled stack: its blocks and how to call them.
struct Compiled {
    stack: Stack,
    call: StackCall,
    stats: Box<dyn Fn() -> CompileStats>,
}

impl Compiled {
    /// The stack of [`LAYERS`] blocks of `shape` on `device`, compiled in `form`.
    fn new(form: Form, shape: BlockShape, device: Device) -> Result<Compiled> {
        let stack = Stack::new(shape, LAYERS, 0, device)?;
        Ok(match form {
            Form::Whole => {
                // The stack's weights are captured by the closure, as a model's parameters are.
                let captured = stack.clone();
                let whole =
                    std::rc::Rc::new(dynamo::compile(move |x: Tensor| captured.naive_forward(&x)).name("whole stack"));
                let stats = whole.clone();
                Compiled { stack, call: Box::new(move |_, x| whole.call(x)), stats: Box::new(move || stats.stats()) }
            }
            Form::Regional => {
                let region = std::rc::Rc::new(
                    dynamo::compile_region(|block: &Block, x: Tensor| block.naive_forward(&x)).name("block region"),
                );
                let stats = region.clone();
                let call = move |stack: &Stack, x: &Tensor| {
                    stack.blocks.iter().try_fold(x.clone(), |h, block| region.call(block, &h))
                };
                Compiled { stack, call: Box::new(call), stats: Box::new(move || stats.stats()) }
            }
        })
    }

    fn call(&self, x: &Tensor) -> engine::Result<Tensor> {
        (self.call)(&self.stack, x)
    }
}

/// What one form's compiles cost, measured in a process of its own.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Compiles {
    /// The form.
    pub form: Form,
    /// Milliseconds of the first call (empty kernel cache).
    pub first_call_ms: f64,
    /// Milliseconds of the call at the second length (a recompile).
    pub new_length_ms: f64,
    /// Milliseconds of the call at each later length (the dynamic graph at new sizes).
    pub later_lengths_ms: Vec<f64>,
    /// Graphs compiled, recompiles, specializations and cache hits over the whole schedule.
    pub compiles: usize,
    /// Of which recompiles.
    pub recompiles: usize,
    /// Compiles of a dynamic graph for new sizes.
    pub specializations: usize,
    /// Calls served by a graph already compiled.
    pub cache_hits: usize,
    /// Milliseconds counted as compiling over the whole schedule (`CompileStats::compile_time`).
    pub compile_ms: f64,
    /// The same by stage (`CompileStats::stages`).
    pub stages_ms: Vec<(String, f64)>,
}

/// `bench regional-run`: in this (new) process, `form`'s first call at `seqs[0]`, then one call
/// at each later length, timed; prints them as JSON for [`run`].
pub fn run_one(options: &Options, form: Form, seqs: &[usize]) -> Result<()> {
    let device = options.device;
    let shape = BlockShape::SMALL;
    let compiled = Compiled::new(form, shape, device)?;
    let inputs = seqs.iter().map(|&s| input(shape, s, device)).collect::<Result<Vec<_>>>()?;
    device.synchronize()?;
    let mut times = Vec::new();
    for x in &inputs {
        times.push(time_once(device, || compiled.call(x))?.1.as_secs_f64() * 1e3);
    }
    let stats = (compiled.stats)();
    let stages_ms = engine::compile_time::Stage::ALL
        .iter()
        .map(|&s| (s.name().to_string(), stats.stages.get(s).as_secs_f64() * 1e3))
        .filter(|(_, ms)| *ms > 0.0)
        .collect();
    let report = Compiles {
        form,
        first_call_ms: times[0],
        new_length_ms: times.get(1).copied().unwrap_or(f64::NAN),
        later_lengths_ms: times.iter().skip(2).copied().collect(),
        compiles: stats.compiles,
        recompiles: stats.recompiles,
        specializations: stats.specializations,
        cache_hits: stats.cache_hits,
        compile_ms: stats.compile_time.as_secs_f64() * 1e3,
        stages_ms,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

fn input(shape: BlockShape, seq: usize, device: Device) -> Result<Tensor> {
    Ok(Tensor::randn(&[shape.batch, seq, shape.d_model], seq as u64).to(device)?)
}

/// Runs `bench regional-run` for `form` in a new process with an empty kernel cache.
fn in_new_process(options: &Options, form: Form, seqs: &[usize]) -> Result<Compiles> {
    let cache = FreshCache::new(&format!("regional-{form:?}"));
    let seq_list: Vec<String> = seqs.iter().map(ToString::to_string).collect();
    let form_name = match form {
        Form::Whole => "whole",
        Form::Regional => "regional",
    };
    let exe = std::env::current_exe().context("finding the bench binary")?;
    let output = std::process::Command::new(exe)
        .args(["regional-run", "--device", &options.device.to_string(), "--form", form_name, "--seqs"])
        .arg(seq_list.join(","))
        .env("ENGINE_CACHE_DIR", cache.path())
        .output()
        .context("running bench regional-run")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("bench regional-run failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    }
    let line = stdout.lines().last().context("bench regional-run printed nothing")?;
    Ok(serde_json::from_str(line)?)
}

/// The whole report of `bench regional --json`.
#[derive(Serialize)]
struct Report {
    device: String,
    shape: String,
    layers: usize,
    seqs: Vec<usize>,
    whole: Compiles,
    regional: Compiles,
    steady_whole_ms: f64,
    steady_regional_ms: f64,
    steady_ratio: f64,
}

/// `bench regional`: both forms' compiles, each in a fresh process, then their steady states
/// interleaved at `seqs[0]`.
pub fn run(options: &Options, seqs: &[usize]) -> Result<()> {
    if seqs.is_empty() {
        bail!("give at least one sequence length (--seqs 128,256,384)");
    }
    let device = options.device;
    let shape = BlockShape::SMALL;
    let whole = in_new_process(options, Form::Whole, seqs)?;
    let regional = in_new_process(options, Form::Regional, seqs)?;
    // Steady state: both forms in this process, their first calls made before timing.
    let (w, r) = (Compiled::new(Form::Whole, shape, device)?, Compiled::new(Form::Regional, shape, device)?);
    let x = input(shape, seqs[0], device)?;
    let (a, b) = (w.call(&x)?, r.call(&x)?);
    let difference = a.sub(&b)?.abs()?.amax(-1, false)?.to_vec()?.into_iter().fold(0.0f32, f32::max);
    if difference > 1e-2 {
        bail!("the regional stack differs from the whole one by {difference}");
    }
    let samples = if device == Device::Cpu { options.samples.min(10) } else { options.samples };
    let bench = Bench::new(device).samples(samples).warmup(options.warmup);
    let t = bench.run_interleaved(&mut [&mut || w.call(&x).map(drop), &mut || r.call(&x).map(drop)])?;
    let (steady_whole, steady_regional) = (t[0].median() * 1e3, t[1].median() * 1e3);
    let report = Report {
        device: device.to_string(),
        shape: shape.label(),
        layers: LAYERS,
        seqs: seqs.to_vec(),
        steady_ratio: steady_regional / steady_whole,
        whole,
        regional,
        steady_whole_ms: steady_whole,
        steady_regional_ms: steady_regional,
    };
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mut table = Table::new(&["ms", "whole model", "regional", "regional / whole"]);
    let row = |name: &str, w: f64, r: f64| {
        vec![name.to_string(), format!("{w:.1}"), format!("{r:.1}"), format!("{:.2}x", r / w)]
    };
    table.row(row(
        &format!("first call, length {} (empty cache)", seqs[0]),
        report.whole.first_call_ms,
        report.regional.first_call_ms,
    ));
    if seqs.len() > 1 {
        table.row(row(
            &format!("new length {} (recompile)", seqs[1]),
            report.whole.new_length_ms,
            report.regional.new_length_ms,
        ));
    }
    for (i, (w, r)) in report.whole.later_lengths_ms.iter().zip(&report.regional.later_lengths_ms).enumerate() {
        table.row(row(&format!("length {} (dynamic sizes)", seqs[i + 2]), *w, *r));
    }
    table.row(row("compiling, over all lengths", report.whole.compile_ms, report.regional.compile_ms));
    table.row(row(&format!("steady state, length {}", seqs[0]), steady_whole, steady_regional));
    let counts = |c: &Compiles| {
        format!(
            "{} compiles ({} recompiles), {} specializations, {} cache hits",
            c.compiles, c.recompiles, c.specializations, c.cache_hits
        )
    };
    println!(
        "bench regional on {device}: {LAYERS} naive blocks {}\n\n{}\nwhole: {}\nregional: {}\n\ntargets (H100): regional first call <= 1000 ms, new length <= 1000 ms, steady state within 1.1x of whole",
        shape.label(),
        table.render(),
        counts(&report.whole),
        counts(&report.regional),
    );
    Ok(())
}
