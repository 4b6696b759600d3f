//! `bench train`: training steps (forward, MSE loss, backward, SGD with momentum, gradients
//! cleared) of the workbook's MLP 512-2048-512 at batch 64 and 4096 and of the naive transformer
//! block at 4x128x512 and 8x1024x768, in five forms timed in turns:
//!
//! - `eager`: every op a kernel, the optimizer's update per parameter;
//! - `compiled model`: `dynamo::compile(model.forward)` (AOTAutograd's compiled forward and
//!   backward), the loss, `backward()` and the optimizer eager (`torch.compile(model)`);
//! - `compiled step <mode>`: the whole step compiled with compiled autograd in each mode: one
//!   graph of forward, backward and the foreach update written into the parameters (compiling the
//!   step function in PyTorch).
//!
//! Each form trains its own copy of the model from the same seed. The first call is timed on the
//! wall clock (tracing and compiling); the first two steps' losses are compared with eager's;
//! then samples of one step each, in turns, with no cache flush (a training loop's steady state),
//! medians reported. `bench/torch/train.py` measures PyTorch the same way; bench/NOTES-training.md
//! has the tables and what a step must move.

use std::rc::Rc;
use std::time::Duration;

use anyhow::Result;
use engine::bench::{Bench, Timing, time_once};
use engine::dynamo::{self, Mode};
use engine::optim::{Optimizer, Sgd};
use engine::profiler::{self, SortBy};
use engine::{Device, Tensor};
use serde::Serialize;
use workbook_models::phase5::{Block, BlockShape, MLP_FEATURES, Mlp};

use crate::Options;
use crate::table::Table;

/// The SGD every step uses (PyTorch: `torch.optim.SGD(params, lr=1e-3, momentum=0.9)`).
const LR: f32 = 1e-3;
/// See [`LR`].
const MOMENTUM: f32 = 0.9;

/// The MLP batches timed.
pub const MLP_TRAIN_BATCHES: [usize; 2] = [64, 4096];

/// On the CPU, seconds of timed samples to aim for per workload (all forms together).
const CPU_SECONDS_PER_WORKLOAD: f64 = 4.0;

/// A model's forward pass, shared by the step that calls it and a compiled wrapper of it.
type Forward = Rc<dyn Fn(&Tensor) -> engine::Result<Tensor>>;

/// A model being trained: its parameters, its forward, a batch and its target.
#[derive(Clone)]
struct Trainee {
    params: Vec<Tensor>,
    forward: Forward,
    x: Tensor,
    target: Tensor,
}

/// One workload: a name and how to build a fresh trainee (the same one each time) on a device.
struct Workload {
    name: String,
    build: Box<dyn Fn(Device) -> Result<Trainee>>,
}

/// One form's step as the timer calls it.
type Run<'a> = Box<dyn FnMut() -> engine::Result<()> + 'a>;

fn workloads(quick: bool) -> Vec<Workload> {
    let mut all = Vec::new();
    for batch in MLP_TRAIN_BATCHES {
        all.push(Workload {
            name: format!("mlp bs={batch}"),
            build: Box::new(move |device| {
                let mlp = Mlp::new(0, device)?.requires_grad_();
                let x = Tensor::randn(&[batch, MLP_FEATURES], 1).to(device)?;
                let target = Tensor::randn(&[batch, MLP_FEATURES], 2).to(device)?;
                let params = mlp.parameters();
                Ok(Trainee { params, forward: Rc::new(move |x| mlp.forward(x)), x, target })
            }),
        });
    }
    for shape in [BlockShape::SMALL, BlockShape::LARGE] {
        all.push(Workload {
            name: format!("block {}", shape.label()),
            build: Box::new(move |device| {
                let block = Block::new(shape, 0, device)?.requires_grad_();
                let dims = [shape.batch, shape.seq, shape.d_model];
                let x = Tensor::randn(&dims, 1).to(device)?;
                let target = Tensor::randn(&dims, 2).to(device)?;
                let params = block.parameters();
                Ok(Trainee { params, forward: Rc::new(move |x| block.naive_forward(x)), x, target })
            }),
        });
    }
    if quick {
        // The small shapes only: what CI can afford on two cores.
        all.retain(|w| w.name == "mlp bs=64" || w.name == format!("block {}", BlockShape::SMALL.label()));
    }
    all
}

/// How a form takes one step.
type Step = Box<dyn Fn() -> engine::Result<Tensor>>;

/// One step on the batch `x` and its `target` with `forward`: loss, backward, the optimizer's
/// update, gradients cleared.
fn step(
    forward: &dyn Fn(&Tensor) -> engine::Result<Tensor>,
    sgd: &Sgd,
    x: &Tensor,
    target: &Tensor,
) -> engine::Result<Tensor> {
    let loss = forward(x)?.mse_loss(target)?;
    loss.backward()?;
    sgd.step()?;
    sgd.zero_grad();
    Ok(loss)
}

/// The forms timed, each with its step and, when it compiles, a way to read its compile time.
struct Form {
    name: String,
    step: Step,
    compile_time: Option<Box<dyn Fn() -> Duration>>,
}

fn forms(build: &dyn Fn() -> Result<Trainee>) -> Result<Vec<Form>> {
    let sgd_of = |t: &Trainee| Rc::new(Sgd::new(&t.params, LR).momentum(MOMENTUM));
    let mut forms = Vec::new();
    let t = build()?;
    let sgd = sgd_of(&t);
    forms.push(Form {
        name: "eager".into(),
        step: Box::new(move || step(&*t.forward, &sgd, &t.x, &t.target)),
        compile_time: None,
    });
    let t = build()?;
    let sgd = sgd_of(&t);
    let forward = t.forward.clone();
    let model = Rc::new(dynamo::compile(move |x: Tensor| forward(&x)).name("compiled model"));
    let stats = model.clone();
    forms.push(Form {
        name: "compiled model".into(),
        step: Box::new(move || step(&|x| model.call(x), &sgd, &t.x, &t.target)),
        compile_time: Some(Box::new(move || stats.stats().compile_time)),
    });
    for mode in Mode::ALL {
        let t = build()?;
        let sgd = sgd_of(&t);
        let (x, target) = (t.x.clone(), t.target.clone());
        let compiled = Rc::new(
            dynamo::compile(move |(x, target): (Tensor, Tensor)| step(&*t.forward, &sgd, &x, &target))
                .mode(mode)
                .compiled_autograd(true)
                .fullgraph(true)
                .name(&format!("compiled step {mode}")),
        );
        let stats = compiled.clone();
        forms.push(Form {
            name: format!("compiled step {mode}"),
            step: Box::new(move || compiled.call((&x, &target))),
            compile_time: Some(Box::new(move || stats.stats().compile_time)),
        });
    }
    Ok(forms)
}

/// One row of `bench train --json`: one form of one workload.
#[derive(Serialize)]
struct Row {
    workload: String,
    form: String,
    /// Median milliseconds of one step.
    ms: f64,
    /// The eager step's median over this one's.
    speedup_over_eager: f64,
    /// Wall-clock milliseconds of the first step (tracing and compiling included).
    first_call_ms: f64,
    /// Milliseconds its backend spent compiling (0 for eager).
    compile_ms: f64,
    samples: usize,
    spread: f64,
    /// The largest difference of the first two losses from eager's, relative to eager's.
    loss_difference: f64,
}

/// The whole report of `bench train --json`.
#[derive(Serialize)]
struct Report {
    device: String,
    timing: &'static str,
    rows: Vec<Row>,
}

/// Steps of each form that `--profile` records.
const PROFILED_STEPS: usize = 3;

/// Losses differing from eager's by more than this (relative) are reported as wrong.
const TOLERANCE: f64 = 1e-3;

/// `bench train`: every workload (the small ones with `quick`) whose name contains one of `only`;
/// with `profile`, each form's kernels by device time after the timing.
pub fn run(options: &Options, only: &[String], quick: bool, profile: bool) -> Result<()> {
    let device = options.device;
    let timing = match device {
        Device::Cpu => {
            "CPU: median of wall-clock samples of one step, the forms in turns, back to back (no cache flush); \
             samples fit ~4 s per workload (1 at least, --samples at most)"
        }
        Device::Cuda(_) => "CUDA: median of CUDA-event samples of one step, the forms in turns, no L2 flush",
    };
    crate::say(options, &format!("bench train on {device}\n{timing}\n"));
    let mut rows = Vec::new();
    for workload in workloads(quick) {
        if !only.is_empty() && !only.iter().any(|o| workload.name.contains(o.as_str())) {
            continue;
        }
        let build = || (workload.build)(device);
        let forms = forms(&build)?;
        // The first two steps of every form: the first on the wall clock, both losses compared.
        let mut first_calls = Vec::new();
        let mut losses: Vec<Vec<f32>> = Vec::new();
        for form in &forms {
            let (first, time) = time_once(device, || (form.step)())?;
            let second = (form.step)()?;
            first_calls.push(time);
            losses.push(vec![first.item()?, second.item()?]);
        }
        let one_step = first_calls[0].as_secs_f64();
        let (samples, warmup) = match device {
            Device::Cpu => {
                let fitting = (CPU_SECONDS_PER_WORKLOAD / (one_step * forms.len() as f64)) as usize;
                (fitting.clamp(1, options.samples), if one_step < 0.05 { options.warmup } else { 0 })
            }
            Device::Cuda(_) => (options.samples, options.warmup),
        };
        let bench = Bench::new(device).samples(samples).warmup(warmup).flush_cache(false);
        let mut runs: Vec<Run> = forms.iter().map(|f| Box::new(|| (f.step)().map(drop)) as Run).collect();
        let mut refs: Vec<&mut dyn FnMut() -> engine::Result<()>> =
            runs.iter_mut().map(|r| &mut **r as &mut dyn FnMut() -> engine::Result<()>).collect();
        let timings: Vec<Timing> = bench.run_interleaved(&mut refs)?;
        let eager_ms = timings[0].median() * 1e3;
        for (i, (form, timing)) in forms.iter().zip(&timings).enumerate() {
            let difference = losses[i]
                .iter()
                .zip(&losses[0])
                .map(|(l, e)| f64::from((l - e).abs()) / f64::from(e.abs()).max(1e-12))
                .fold(0.0, f64::max);
            if difference > TOLERANCE {
                eprintln!(
                    "warning: {} {}: losses {:?} differ from eager's {:?}",
                    workload.name, form.name, losses[i], losses[0]
                );
            }
            let ms = timing.median() * 1e3;
            let row = Row {
                workload: workload.name.clone(),
                form: form.name.clone(),
                ms,
                speedup_over_eager: eager_ms / ms,
                first_call_ms: first_calls[i].as_secs_f64() * 1e3,
                compile_ms: form.compile_time.as_ref().map_or(0.0, |c| c().as_secs_f64() * 1e3),
                samples: timing.samples().len(),
                spread: timing.spread(),
                loss_difference: difference,
            };
            eprintln!("  {} {}: {:.3} ms", row.workload, row.form, row.ms);
            rows.push(row);
        }
        if profile {
            for form in &forms {
                let ((), steps) = profiler::profile(|| {
                    for _ in 0..PROFILED_STEPS {
                        (form.step)()?;
                    }
                    device.synchronize()
                })?;
                let table = steps.key_averages().sort_by(SortBy::SelfDeviceTotal);
                eprintln!("{} {}, {PROFILED_STEPS} steps:\n{table}\n", workload.name, form.name);
            }
        }
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&Report { device: device.to_string(), timing, rows })?);
    } else {
        println!("{}", render(&rows));
    }
    Ok(())
}

fn render(rows: &[Row]) -> String {
    let mut table =
        Table::new(&["workload", "form", "ms", "vs eager", "first call ms", "compile ms", "samples", "spread"]);
    for r in rows {
        table.row(vec![
            r.workload.clone(),
            r.form.clone(),
            format!("{:.3}", r.ms),
            format!("{:.2}x", r.speedup_over_eager),
            format!("{:.1}", r.first_call_ms),
            format!("{:.1}", r.compile_ms),
            r.samples.to_string(),
            format!("{:.0}%", r.spread * 100.0),
        ]);
    }
    table.render()
}
