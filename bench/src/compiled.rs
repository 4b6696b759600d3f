//! `bench compiled`: what Inductor's generated code achieves, each figure a ratio against a
//! baseline timed in the same run (or a host time against its budget): fused pointwise kernels
//! and whole-row reductions against a device-to-device copy, compiled add-ReLU-mul against eager,
//! the host cost of a cached call, and the time to compile cold and to start warm from the disk
//! cache in a new process.
//!
//! Bytes are the fewest a kernel must move (each input read once, each output written once), so
//! "fraction of copy" near 1.0 means the kernel runs at the speed of memory.

use std::time::Instant;

use anyhow::Result;
use engine::backends::Inductor;
use engine::bench::baseline;
use engine::bench::{Bench, Timing};
use engine::inductor::{CompiledModule, Config, compile_fx};
use engine::{Device, Tensor, dynamo, profiler};
use workbook_models::phase5::add_relu_mul;

use crate::Options;
use crate::first_call::{self, FreshCache};
use crate::table::Table;

/// Eight adds and multiplies over two inputs.
fn chain8(x: &Tensor, y: &Tensor) -> engine::Result<Tensor> {
    let t = x.add(y)?.mul(1.5)?.add(0.25)?.mul(y)?;
    t.sub(x)?.mul(0.5)?.add(1.0)?.mul(x)
}

/// Ten pointwise ops on one input: the graph whose cached call's host cost is measured.
fn ten_ops(x: &Tensor) -> engine::Result<Tensor> {
    let t = x.mul(2.0)?.add(1.0)?.relu()?.sub(0.5)?.mul(x)?;
    t.add(x)?.tanh()?.mul(3.0)?.sub(x)?.abs()
}

/// The columns of the per-workload table, each with what it means (printed under the table).
const DETAILS: [(&str, &str); 7] = [
    ("workload", "what runs, and over how many elements"),
    ("moved", "the fewest bytes any implementation must read and write"),
    ("compiled", "median time of Inductor's generated code"),
    ("eager", "median time of the same ops run one kernel at a time"),
    ("copy", "median time of a plain device copy of as many bytes, timed in turn with the other two"),
    (
        "compiled/copy",
        "the compiled code's bytes per second as a fraction of the copy's: 1.0 is the speed of memory; \
         a CPU kernel that computes much per byte (exp, tanh) sits well below it",
    ),
    ("eager/compiled", "how many times faster compiled is than eager"),
];

/// What the summary's `met` column means, printed under it.
const TARGETS: &str = "target: the bar set for the reference machines (an H100 and its 16-core host, \
     bench/NOTES-inductor.md); `missed` on a smaller or busy machine says how it compares, not that something \
     is broken. The cold compile's bar holds on the CPU too, down to a 2-core machine: it is one run of the \
     system C compiler (bench/NOTES-compile-time.md).";

/// A pass/fail bar for one figure.
#[derive(Clone, Copy)]
enum Bar {
    AtLeast(f64),
    AtMost(f64),
    None,
}

/// One row of the summary.
struct Figure {
    name: String,
    measured: f64,
    unit: &'static str,
    bar: Bar,
}

impl Figure {
    fn met(&self) -> Option<bool> {
        match self.bar {
            Bar::AtLeast(v) => Some(self.measured >= v),
            Bar::AtMost(v) => Some(self.measured <= v),
            Bar::None => None,
        }
    }
}

/// Compiles `f`, called on `inputs`, with Inductor, and returns the compiled module itself: the
/// kernels and the call plan, without dynamo's per-call tracing in front.
fn compile(f: impl Fn(Vec<Tensor>) -> engine::Result<Tensor>, inputs: &[Tensor]) -> Result<CompiledModule> {
    let graph = dynamo::explain(|t: Vec<Tensor>| f(t)).call(inputs)?.graphs.remove(0);
    Ok(compile_fx(&graph, &Config::default())?)
}

pub fn run(options: &Options) -> Result<()> {
    let device = options.device;
    let bench = Bench::new(device).samples(options.samples).warmup(options.warmup);
    // The CPU target names 4 M floats; the GPU needs 16 M to fill an H100 and outgrow its L2.
    let n: usize = if device == Device::Cpu { 1 << 22 } else { 1 << 24 };
    let mut figures = Vec::new();
    let mut details = Table::new(&DETAILS.map(|(column, _)| column));
    let mut copy = baseline::copy(device, n)?;
    let copy_bytes = 8.0 * n as f64;

    // Fused pointwise kernels.
    let x = Tensor::randn(&[n], 0).to(device)?;
    let y = Tensor::randn(&[n], 1).to(device)?;
    for (name, f, eager_kernels) in [
        ("add-relu-mul", add_relu_mul as fn(&Tensor, &Tensor) -> engine::Result<Tensor>, 3.0),
        ("8-op chain", chain8, 8.0),
    ] {
        let inputs = vec![x.clone(), y.clone()];
        let module = compile(|t| f(&t[0], &t[1]), &inputs)?;
        let mut compiled = || module.run(&inputs).map(drop);
        let mut eager = || f(&x, &y).map(drop);
        let t = bench.run_interleaved(&mut [&mut copy, &mut compiled, &mut eager])?;
        let bytes = 12.0 * n as f64;
        let (of_copy, speedup) =
            ((bytes / t[1].median()) / (copy_bytes / t[0].median()), t[2].median() / t[1].median());
        details.row(vec![
            format!("{name} [{n}]"),
            megabytes(bytes),
            micros(&t[1]),
            micros(&t[2]),
            micros(&t[0]),
            format!("{of_copy:.2}"),
            format!("{speedup:.2}"),
        ]);
        let on_gpu = device != Device::Cpu;
        figures.push(Figure {
            name: format!("{name}: fraction of copy bandwidth"),
            measured: of_copy,
            unit: "",
            bar: if on_gpu { Bar::AtLeast(0.85) } else { Bar::None },
        });
        let bar = match (name, on_gpu) {
            ("add-relu-mul", true) => Bar::AtLeast(2.0),
            ("8-op chain", false) => Bar::AtLeast(2.0),
            _ => Bar::None,
        };
        figures.push(Figure {
            name: format!("{name}: compiled speed-up over eager ({eager_kernels} kernels)"),
            measured: speedup,
            unit: "x",
            bar,
        });
    }

    // Whole-row reductions, one read and one write of the tensor.
    for (name, rows, cols) in [("softmax", 4096, 4096), ("layer_norm", 8192, 1024)] {
        let x = Tensor::randn(&[rows, cols], 2).to(device)?;
        let w = Tensor::uniform(&[cols], 0.5, 1.5, 3).to(device)?;
        let b = Tensor::randn(&[cols], 4).to(device)?;
        let run: fn(&[Tensor]) -> engine::Result<Tensor> =
            if name == "softmax" { |t| t[0].softmax(-1) } else { |t| t[0].layer_norm(&t[1], &t[2], 1e-5) };
        let inputs = if name == "softmax" { vec![x.clone()] } else { vec![x.clone(), w, b] };
        let module = compile(|t| run(&t), &inputs)?;
        let mut compiled = || module.run(&inputs).map(drop);
        let mut eager = || run(&inputs).map(drop);
        let t = bench.run_interleaved(&mut [&mut copy, &mut compiled, &mut eager])?;
        let bytes = 8.0 * (rows * cols) as f64;
        let of_copy = (bytes / t[1].median()) / (copy_bytes / t[0].median());
        details.row(vec![
            format!("{name} [{rows}, {cols}]"),
            megabytes(bytes),
            micros(&t[1]),
            micros(&t[2]),
            micros(&t[0]),
            format!("{of_copy:.2}"),
            format!("{:.2}", t[2].median() / t[1].median()),
        ]);
        let bar = if device == Device::Cpu { Bar::None } else { Bar::AtLeast(0.70) };
        figures.push(Figure {
            name: format!("{name} [{rows}, {cols}]: fraction of copy"),
            measured: of_copy,
            unit: "",
            bar,
        });
    }

    // Host cost of a cached call: dynamo traces and looks up the graph, then the plan queues one
    // launch; no synchronisation, so the time is the host's until the last launch is queued.
    let small = Tensor::randn(&[1024], 5).to(device)?;
    let cached = dynamo::compile(|x: Tensor| ten_ops(&x)).backend(Inductor::default());
    cached.call(&small)?;
    let module = compile(|t| ten_ops(&t[0]), std::slice::from_ref(&small))?;
    let per_call = |f: &mut dyn FnMut() -> engine::Result<()>| -> Result<f64> {
        let mut samples = Vec::new();
        for _ in 0..25 {
            device.synchronize()?;
            let start = Instant::now();
            for _ in 0..200 {
                f()?;
            }
            samples.push(start.elapsed().as_secs_f64() / 200.0);
        }
        device.synchronize()?;
        Ok(Timing::new(samples).median())
    };
    let full = per_call(&mut || cached.call(&small).map(drop))?;
    let plan_only = per_call(&mut || module.run(std::slice::from_ref(&small)).map(drop))?;
    // The same cached call with its parts timed (a clock read around the lookup and the run):
    // medians of each part over 25 batches of 200 calls.
    let mut parts: [Vec<f64>; 3] = Default::default();
    for _ in 0..25 {
        device.synchronize()?;
        let mut sum = [0.0; 3];
        for _ in 0..200 {
            let (_, t) = cached.call_timed(&small)?;
            for (s, d) in sum.iter_mut().zip([t.trace, t.guards, t.run]) {
                *s += d.as_secs_f64() / 200.0;
            }
        }
        for (p, s) in parts.iter_mut().zip(sum) {
            p.push(s);
        }
    }
    device.synchronize()?;
    let [trace, guards, run] = parts.map(|p| Timing::new(p).median());
    figures.push(Figure {
        name: "cached call of a 10-op graph: host time (dynamo + plan)".into(),
        measured: full * 1e6,
        unit: "us",
        bar: Bar::AtMost(if device == Device::Cpu { 20.0 } else { 8.0 }),
    });
    for (name, seconds) in [
        ("  tracing the closure", trace),
        ("  guard checks and cache lookup", guards),
        ("  the compiled plan (through dynamo)", run),
        ("  the compiled plan alone (no dynamo)", plan_only),
    ] {
        figures.push(Figure { name: name.into(), measured: seconds * 1e6, unit: "us", bar: Bar::None });
    }

    // What the profiler costs: an eager launch (one kernel) with no profile running, which pays
    // one branch, and with one recording it (clock reads, an event entry, CUDA events on a GPU).
    let launch = &mut || small.relu().map(drop);
    let off = per_call(launch)?;
    let (on, _) = profiler::profile(|| Ok(per_call(launch)))?;
    let on = on?;
    figures.push(Figure {
        name: "eager launch (relu of 1024 floats): host time, no profile".into(),
        measured: off * 1e6,
        unit: "us",
        bar: Bar::None,
    });
    figures.push(Figure {
        name: "  the same while profiling: the profiler's cost per launch".into(),
        measured: (on - off) * 1e6,
        unit: "us",
        bar: Bar::None,
    });

    // Cold compile and warm start, each in a fresh process sharing a fresh cache directory.
    let cache = FreshCache::new("compiled");
    let args = vec!["compiled-first-call".to_string(), "--device".into(), device.to_string()];
    let cold = first_call::in_new_process(&args, cache.path())?;
    let warm = first_call::in_new_process(&args, cache.path())?;
    figures.push(Figure {
        name: "cold compile of add-relu-mul".into(),
        measured: cold.compile_seconds * 1e3,
        unit: "ms",
        bar: Bar::AtMost(300.0),
    });
    for (stage, seconds) in &cold.stages {
        figures.push(Figure { name: format!("  {stage}"), measured: seconds * 1e3, unit: "ms", bar: Bar::None });
    }
    figures.push(Figure {
        name: "  the whole first call (compile, load, run once)".into(),
        measured: cold.seconds * 1e3,
        unit: "ms",
        bar: Bar::None,
    });
    figures.push(Figure {
        name: "warm start from the disk cache, new process".into(),
        measured: warm.compile_seconds * 1e3,
        unit: "ms",
        bar: Bar::AtMost(30.0),
    });
    figures.push(Figure {
        name: "  the whole first call (warm cache)".into(),
        measured: warm.seconds * 1e3,
        unit: "ms",
        bar: Bar::None,
    });

    let mut summary = Table::new(&["figure", "measured", "target", "met"]);
    for f in &figures {
        let target = match f.bar {
            Bar::AtLeast(v) => format!(">= {v}{}", f.unit),
            Bar::AtMost(v) => format!("<= {v}{}", f.unit),
            Bar::None => "-".into(),
        };
        let met = match f.met() {
            Some(true) => "yes",
            Some(false) => "missed",
            None => "-",
        };
        summary.row(vec![f.name.clone(), format!("{:.2}{}", f.measured, f.unit), target, met.into()]);
    }
    if options.json {
        let (rows, figures) = (details.to_json(), summary.to_json());
        println!("{}", serde_json::json!({ "device": device.to_string(), "rows": rows, "figures": figures }));
    } else {
        let legend: Vec<String> = DETAILS.iter().map(|(column, meaning)| format!("  {column}: {meaning}")).collect();
        println!(
            "bench compiled on {device}\n\n{}\n{}\n\n{}\n{TARGETS}",
            details.render(),
            legend.join("\n"),
            summary.render()
        );
    }
    Ok(())
}

/// `bench compiled-first-call`: brings the device up with a plain copy (untimed; no kernel runs,
/// so NVRTC starts inside the timed compile), then compiles add-relu-mul with Inductor through
/// dynamo and prints the first call's time and its compile's stages.
pub fn first_call(options: &Options) -> Result<()> {
    let device = options.device;
    let x = Tensor::randn(&[4096], 0).to(device)?;
    let bias = Tensor::randn(&[4096], 1).to(device)?;
    device.synchronize()?;
    let compiled = dynamo::compile(|(x, b): (Tensor, Tensor)| add_relu_mul(&x, &b)).backend(Inductor::default());
    let start = Instant::now();
    compiled.call((&x, &bias))?.to_vec()?;
    first_call::report(start.elapsed().as_secs_f64(), &compiled.stats());
    Ok(())
}

fn megabytes(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

fn micros(t: &Timing) -> String {
    format!("{:.1} us", t.median() * 1e6)
}
