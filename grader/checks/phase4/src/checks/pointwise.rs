//! Checks of `pointwise_c` and `pointwise_cuda`: the printed kernels, compiled by the system C
//! compiler or NVRTC inside a real Inductor compilation, compute what eager execution computes,
//! on random programs whose sizes are rarely multiples of the vector width (a single element
//! among them), with transposed and broadcast inputs. Every buffer a printed kernel is handed lies
//! between poisoned guard regions, checked after each run (`Config::guard_buffers`): a kernel that
//! writes past an end fails with the element it wrote, one that reads past one computes NaNs.

use std::cell::RefCell;

use engine::Tensor;
use engine::backends::Inductor;
use engine::bench::Bench;
use engine::inductor::kernel::Kernel;
use engine::inductor::{Config, Printers, compile_fx};
use grader_harness::transcript::is_judging;
use grader_harness::{
    CheckResult, Context, Tolerance, check_close, ensure, for_all, gpu, judged_artifact, record_artifact, timed, wires,
};

use super::support::{PointwiseProgram, capture, matches_eager};
use crate::subject::{pointwise_c, pointwise_cuda};

/// The subject's C printer. It runs inside the grader's compilation, which passes the wires (the
/// engine prints the module around the kernel), so the subject's code arms them again.
fn your_c(kernel: &Kernel) -> String {
    wires::learner(|| pointwise_c(kernel))
}

/// The subject's CUDA printer, with the wires armed as in [`your_c`].
fn your_cuda(kernel: &Kernel) -> String {
    wires::learner(|| pointwise_cuda(kernel))
}

/// Inductor with the subject's C printer for pointwise kernels, its buffers guarded.
fn with_c_printer() -> Inductor {
    Inductor::with_config(Config {
        printers: Printers { pointwise_c: Some(your_c), ..Printers::default() },
        guard_buffers: true,
        ..Config::default()
    })
}

/// Random pointwise programs compiled with `pointwise_c` match eager.
pub fn pointwise_c_matches_eager(ctx: &Context) -> CheckResult {
    let cases = 24;
    for_all(ctx, cases, PointwiseProgram::strategy(), |program| {
        let inputs = program.inputs(ctx.seed);
        let run = |t| program.run(t);
        wires::exempt(|| matches_eager("the compiled program's output", with_c_printer(), &run, &inputs)).map(|_| ())
    })?;
    Ok(format!("{cases} random pointwise programs compiled with your C match eager"))
}

/// The subject's CUDA printer for pointwise kernels, its buffers guarded.
fn with_cuda_printer_config() -> Config {
    Config {
        printers: Printers { pointwise_cuda: Some(your_cuda), ..Printers::default() },
        guard_buffers: true,
        ..Config::default()
    }
}

/// Random pointwise programs compiled with `pointwise_cuda` match eager (on a GPU).
pub fn pointwise_cuda_matches_eager(ctx: &Context) -> CheckResult {
    let device = gpu()?;
    let cases = 24;
    for_all(ctx, cases, PointwiseProgram::strategy(), |program| {
        let inputs = program.inputs(ctx.seed).iter().map(|t| t.to(device)).collect::<engine::Result<Vec<_>>>()?;
        let inductor = Inductor::with_config(with_cuda_printer_config());
        let run = |t| program.run(t);
        wires::exempt(|| matches_eager("the compiled program's output", inductor, &run, &inputs)).map(|_| ())
    })?;
    Ok(format!("{cases} random pointwise programs compiled with your CUDA C match eager on the GPU"))
}

/// The label of the kernel source the judge times.
const YOUR_KERNEL: &str = "your kernel's CUDA C";

thread_local! {
    /// The last kernel source printed through [`recording_printer`], or the one
    /// [`replaying_printer`] hands back.
    static SOURCE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The subject's printer, remembering what it printed.
fn recording_printer(kernel: &Kernel) -> String {
    let source = your_cuda(kernel);
    SOURCE.with(|s| s.replace(source.clone()));
    source
}

/// Hands back the source held in [`SOURCE`], whatever the kernel: the learner's kernel, in the
/// judge's process.
fn replaying_printer(_: &Kernel) -> String {
    SOURCE.with(|s| s.borrow().clone())
}

/// The kernel `pointwise_cuda` prints moves memory at 80% or more of the engine's own (on a GPU):
/// add-ReLU-mul over 16 M floats, both timed with CUDA events, interleaved, each run on the next of
/// three input sets. The timing that counts is the judge's: the learner's process records the
/// kernel's source, and the judge (built against the solutions) compiles that source itself,
/// times it against the engine's kernel and checks the output of every timed run, so no code of
/// the learner's runs where the clock is read, and a kernel that skips its work in some runs
/// fails.
pub fn pointwise_cuda_bandwidth(ctx: &Context) -> CheckResult {
    let device = gpu()?;
    let n = 1 << 24;
    let inputs = [Tensor::randn(&[n], ctx.seed).to(device)?, Tensor::randn(&[n], ctx.seed + 1).to(device)?];
    let model = |t: Vec<Tensor>| t[0].add(&t[1])?.relu()?.mul(2.0);
    let graph = capture(&model, &inputs)?;
    let printing = |printer| Config {
        printers: Printers { pointwise_cuda: Some(printer), ..Printers::default() },
        ..Config::default()
    };
    let yours = match judged_artifact(YOUR_KERNEL) {
        Some(learners) => {
            record_artifact(YOUR_KERNEL, learners.clone());
            SOURCE.with(|s| s.replace(learners));
            wires::exempt(|| compile_fx(&graph, &printing(replaying_printer)))?
        }
        None => {
            let compiled = wires::exempt(|| compile_fx(&graph, &printing(recording_printer)))?;
            record_artifact(YOUR_KERNEL, SOURCE.with(|s| s.borrow().clone()));
            compiled
        }
    };
    let reference = wires::exempt(|| compile_fx(&graph, &Config::default()))?;
    // Only the judge's timing counts (it compiles and times the source your printer wrote): the
    // learner's process times nothing, and so never waits for the GPU's lock.
    if !is_judging() {
        return Ok("your kernel compiles; the judge times it".into());
    }
    // Three input sets, made on the device from the seed's, so that consecutive runs read other
    // inputs. Every timed run's output is kept and checked once timing is over, so a kernel that
    // skips its work in some runs (counting its launches in device memory, say) fails.
    let sets: Vec<Vec<Tensor>> = (0..3)
        .map(|k| Ok(vec![inputs[0].mul(1.0 + 0.5 * k as f32)?.add(k as f32)?, inputs[1].sub(0.25 * k as f32)?]))
        .collect::<engine::Result<_>>()?;
    let expected: Vec<Tensor> = sets.iter().map(|set| model(set.clone())).collect::<engine::Result<_>>()?;
    let bench = Bench::new(device).warmup(3).samples(25);
    let mut outputs: Vec<(usize, Tensor)> = Vec::new();
    let t = {
        let (mut yours_next, mut reference_next) = (0, 0);
        let mut run_yours = || {
            let k = yours_next % sets.len();
            yours_next += 1;
            outputs.push((k, yours.run(&sets[k])?.remove(0)));
            Ok(())
        };
        let mut run_reference = || {
            reference_next += 1;
            reference.run(&sets[reference_next % sets.len()]).map(drop)
        };
        // The one part that holds the GPU's lock on a shared machine.
        timed(|| bench.run_interleaved(&mut [&mut run_reference, &mut run_yours]))?
    };
    for (run, (k, output)) in outputs.iter().enumerate() {
        let worst = output.sub(&expected[*k])?.abs()?.amax(0, false)?.item()?;
        let largest = expected[*k].abs()?.amax(0, false)?.item()?;
        ensure(worst <= Tolerance::F32.abs + Tolerance::F32.rel * largest, || {
            format!(
                "the output of your kernel's timed run {run} (input set {k}) is off by up to {worst:e}: every run \
                 must compute every element"
            )
        })?;
    }
    let (k, last) = outputs.last().expect("timed runs");
    check_close("your kernel's output in its last timed run", last, &expected[*k], Tolerance::F32)?;
    let bytes = 12.0 * n as f64;
    let (theirs, mine) = (bytes / t[0].median() / 1e9, bytes / t[1].median() / 1e9);
    let ratio = mine / theirs;
    ensure(ratio >= 0.8, || {
        format!(
            "your kernel moves {mine:.0} GB/s, {:.0}% of the engine's {theirs:.0} GB/s (needs 80%); are consecutive \
             threads reading consecutive elements?",
            100.0 * ratio
        )
    })?;
    Ok(format!("{mine:.0} GB/s, {:.0}% of the engine's kernel ({theirs:.0} GB/s)", 100.0 * ratio))
}
