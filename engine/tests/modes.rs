//! Compile modes (`Mode::Default`, `ReduceOverhead`, `MaxAutotune`): each equal to eager within
//! rounding on random programs, on the CPU here and on a GPU where there is one (GPU tests print
//! `skipped: <reason>` and pass elsewhere); reduce-overhead's fallbacks said once, and its outputs
//! never overwritten by a later call.

mod common;

use common::programs::{Program, programs};
use common::{close_to_eager as close, gpu};
use engine::dynamo::{self, Mode};
use engine::inductor::codegen::cuda;
use engine::inductor::launch::{Grid, Launch};
use engine::logs::{self, Artifact};
use engine::{Device, Tensor, backends::Eager, inductor};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::sync::{Mutex, MutexGuard};

/// The GPU, held by one test at a time: a CUDA-graph recording captures the device's one stream,
/// and another test thread launching on that stream meanwhile breaks the capture
/// (`CUDA_ERROR_STREAM_CAPTURE_UNJOINED`), so `cargo test` on a GPU machine runs these one by one.
fn gpu_alone() -> Option<(Device, MutexGuard<'static, ()>)> {
    static GPU: Mutex<()> = Mutex::new(());
    let device = gpu()?;
    Some((device, GPU.lock().unwrap_or_else(|e| e.into_inner())))
}

/// `program` compiled in `mode` and called three times (warm-up, recording, replay) gives what
/// it gives eagerly each time.
fn agrees_in_mode(program: &Program, inputs: &[Tensor], mode: Mode) -> Result<(), TestCaseError> {
    let expected = program.run(inputs).unwrap();
    let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).mode(mode);
    for call in 0..3 {
        for (g, e) in compiled.call(inputs).unwrap().iter().zip(&expected) {
            prop_assert!(close(g, e).is_ok(), "{mode}, call {call}, {program:?}: {:?}", close(g, e));
        }
    }
    Ok(())
}

/// Every mode equals eager on `cases` random programs on `device`.
fn modes_equal_eager(device: Device, cases: u32) {
    let strategy = (programs(10), any::<u64>(), 0..Mode::ALL.len());
    let outcome = TestRunner::new(Config { cases, ..Config::default() }).run(&strategy, |(program, seed, m)| {
        let inputs: Vec<Tensor> = program.inputs(seed).iter().map(|t| t.to(device).unwrap()).collect();
        agrees_in_mode(&program, &inputs, Mode::ALL[m])
    });
    outcome.unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn every_mode_equals_eager_on_random_programs_on_cpu() {
    modes_equal_eager(Device::Cpu, 24);
}

#[test]
fn gpu_every_mode_equals_eager_on_random_programs() {
    let Some((device, _alone)) = gpu_alone() else { return };
    modes_equal_eager(device, 48);
}

#[test]
fn reduce_overhead_on_cpu_says_once_that_it_runs_the_default_plan() {
    let f = dynamo::compile(|x: Tensor| x.mul(2.0)?.relu()).mode(Mode::ReduceOverhead);
    let x = Tensor::randn(&[64], 0);
    let ((), text) = logs::capture(&[Artifact::Cudagraphs], || {
        for _ in 0..3 {
            f.call(&x).unwrap();
        }
    });
    assert_eq!(text.matches("skipping cudagraphs due to cpu device").count(), 1, "{text}");
}

#[test]
fn a_mode_needs_the_inductor_backend() {
    let f = dynamo::compile(|x: Tensor| x.relu()).backend(Eager).mode(Mode::MaxAutotune);
    let error = f.call(&Tensor::randn(&[4], 0)).unwrap_err().to_string();
    assert!(error.contains("mode `max-autotune` needs the inductor backend"), "{error}");
}

#[test]
fn modes_parse_from_pytorch_names() {
    for mode in Mode::ALL {
        assert_eq!(mode.name().parse::<Mode>(), Ok(mode));
    }
    assert!("fast".parse::<Mode>().unwrap_err().contains("reduce-overhead"));
}

#[test]
fn gpu_reduce_overhead_records_once_while_outputs_are_dropped() {
    let Some((device, _alone)) = gpu_alone() else { return };
    let f = dynamo::compile(|x: Tensor| x.exp()?.mul(3.0)).mode(Mode::ReduceOverhead);
    let x = Tensor::randn(&[1000], 1).to(device).unwrap();
    let ((), text) = logs::capture(&[Artifact::Cudagraphs], || {
        for _ in 0..10 {
            close(&f.call(&x).unwrap(), &x.exp().unwrap().mul(3.0).unwrap()).unwrap();
        }
    });
    assert_eq!(text.matches("recorded CUDA graph").count(), 1, "{text}");
}

#[test]
fn gpu_reduce_overhead_records_once_and_keeps_every_output() {
    let Some((device, _alone)) = gpu_alone() else { return };
    let w = Tensor::randn(&[64, 32], 1).to(device).unwrap();
    let f = dynamo::compile(|x: Tensor| x.matmul(&w)?.relu()?.mul(2.0)).mode(Mode::ReduceOverhead);
    let xs: Vec<Tensor> = (0..5).map(|s| Tensor::randn(&[8, 64], 10 + s).to(device).unwrap()).collect();
    let ((outputs, again), text) = logs::capture(&[Artifact::Cudagraphs], || {
        // Warm-up, then a recording; every output is kept, so each later call needs a recording
        // of its own, up to four, after which calls run the default plan.
        let outputs: Vec<Tensor> =
            [&xs[0], &xs[0], &xs[1], &xs[2], &xs[3], &xs[4]].iter().map(|x| f.call(x).unwrap()).collect();
        (outputs, f.call(&xs[1]).unwrap())
    });
    assert_eq!(text.matches("recorded CUDA graph").count(), 4, "{text}");
    assert_eq!(text.matches("skipping cudagraphs due to live outputs").count(), 1, "{text}");
    // Every output still holds its own call's result: no replay overwrote an earlier one.
    for (out, x) in outputs.iter().zip([&xs[0], &xs[0], &xs[1], &xs[2], &xs[3], &xs[4]]) {
        close(out, &x.matmul(&w).unwrap().relu().unwrap().mul(2.0).unwrap()).unwrap();
    }
    close(&again, &outputs[2]).unwrap();
}

#[test]
fn gpu_reduce_overhead_copies_inputs_that_change_between_calls() {
    let Some((device, _alone)) = gpu_alone() else { return };
    let f = dynamo::compile(|x: Tensor| x.tanh()?.add(1.0)).mode(Mode::ReduceOverhead);
    let ((), text) = logs::capture(&[Artifact::Cudagraphs], || {
        for seed in 0..6 {
            let x = Tensor::randn(&[333], seed).to(device).unwrap();
            close(&f.call(&x).unwrap(), &x.tanh().unwrap().add(1.0).unwrap()).unwrap();
        }
    });
    // A new tensor each call: input 0 is copied into the recording's static buffer from the
    // first recording on, and one recording serves every call.
    assert_eq!(text.matches("recorded CUDA graph").count(), 1, "{text}");
    assert!(text.contains("static buffers before each replay: [0]"), "{text}");
}

#[test]
fn gpu_reduce_overhead_records_one_graph_per_shape() {
    let Some((device, _alone)) = gpu_alone() else { return };
    let f = dynamo::compile(|x: Tensor| x.exp()?.sum(-1, false)).mode(Mode::ReduceOverhead);
    let ((), text) = logs::capture(&[Artifact::Cudagraphs], || {
        for rows in [4, 4, 4, 8, 8, 8, 4] {
            let x = Tensor::randn(&[rows, 16], rows as u64).to(device).unwrap();
            close(&f.call(&x).unwrap(), &x.exp().unwrap().sum(-1, false).unwrap()).unwrap();
        }
    });
    assert_eq!(text.matches("recorded CUDA graph").count(), 2, "{text}");
}

proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(24))]

    /// Max-autotune's launch candidates for every kernel of random programs: the default first,
    /// no two alike, whole warps up to 1024 threads, the elements per thread of the default, and
    /// each printed exactly as the default but for its name and `__launch_bounds__`.
    #[test]
    fn launch_candidates_are_printable_variants_of_the_default(program in programs(10), seed in any::<u64>()) {
        let report = dynamo::explain(|xs: Vec<Tensor>| program.run(&xs)).call(&program.inputs(seed)).unwrap();
        for graph in &report.graphs {
            for k in inductor::kernels(graph, &inductor::Config::default()).unwrap() {
                let candidates = cuda::launch_candidates(&k);
                let default = cuda::kernel(&k);
                prop_assert_eq!(candidates[0], default.launch);
                let per_thread = |l: Launch| match l.grid { Grid::Elements { per_block } => per_block / l.block, Grid::Rows => 0 };
                for (i, &c) in candidates.iter().enumerate() {
                    prop_assert!(!candidates[..i].contains(&c), "{candidates:?}");
                    prop_assert!(c.block % 32 == 0 && c.block <= 1024, "{c:?}");
                    prop_assert_eq!(per_thread(c), per_thread(default.launch));
                    let printed = cuda::kernel_for(&k, "tuned", c).source;
                    let expected = default.source
                        .replace(&format!("__launch_bounds__({})", default.launch.block), &format!("__launch_bounds__({})", c.block))
                        .replace(&format!(" {}(", k.name), " tuned(");
                    prop_assert_eq!(printed, expected);
                }
            }
        }
    }
}

/// Inductor with the FX graph cache off: these tests read max-autotune's own disk cache of
/// choices, which a hit of the whole graph would skip.
fn without_fx_graph_cache() -> engine::backends::Inductor {
    engine::backends::Inductor::with_config(inductor::Config { fx_graph_cache: false, ..Default::default() })
}

#[test]
fn gpu_max_autotune_fuses_bias_and_relu_into_one_gemm() {
    let Some((device, _alone)) = gpu_alone() else { return };
    let w = Tensor::randn(&[256, 128], 1).to(device).unwrap();
    let b = Tensor::randn(&[256], 2).to(device).unwrap();
    let x = Tensor::randn(&[64, 128], 3).to(device).unwrap();
    let inductor = without_fx_graph_cache();
    let f =
        dynamo::compile(|x: Tensor| x.linear(&w, Some(&b))?.relu()).backend(inductor.clone()).mode(Mode::MaxAutotune);
    let (y, text) = logs::capture(&[Artifact::Autotuning], || f.call(&x).unwrap());
    close(&y, &x.linear(&w, Some(&b)).unwrap().relu().unwrap()).unwrap();
    let code = &inductor.output_codes()[0];
    assert!(code.kernel_names().is_empty(), "bias and ReLU run in the GEMM's epilogue:\n{code}");
    assert!(code.to_string().contains("cuBLASLt, bias+relu epilogue"), "{code}");
    assert!(text.contains("AUTOTUNE") || text.contains("cached on disk"), "{text}");
    // A second compile of the same problem reads the choice from the disk cache.
    let again = dynamo::compile(|x: Tensor| x.linear(&w, Some(&b))?.relu())
        .backend(without_fx_graph_cache())
        .mode(Mode::MaxAutotune);
    let (_, text) = logs::capture(&[Artifact::Autotuning], || again.call(&x).unwrap());
    assert!(text.contains("cached on disk") && !text.contains("AUTOTUNE"), "{text}");
}

#[test]
fn gpu_a_misaligned_input_runs_cublaslt_with_an_algorithm_for_any_alignment() {
    let Some((device, _alone)) = gpu_alone() else { return };
    // The input starts one float into its buffer, so cuBLASLt must run an algorithm that takes
    // any alignment (asked of its heuristics on this first unaligned call) rather than the timed
    // one; the libraries only, so that bias and ReLU fold into cuBLASLt's epilogue.
    let x = Tensor::randn(&[64, 129], 3).to(device).unwrap().slice(1, 1, 129, 1).unwrap();
    let (w, b) = (Tensor::randn(&[256, 128], 1).to(device).unwrap(), Tensor::randn(&[256], 2).to(device).unwrap());
    let backends = inductor::GemmBackends { libraries: true, engine: false };
    let inductor =
        engine::backends::Inductor::with_config(inductor::Config { gemm_backends: backends, ..Default::default() });
    let f =
        dynamo::compile(|x: Tensor| x.linear(&w, Some(&b))?.relu()).backend(inductor.clone()).mode(Mode::MaxAutotune);
    let expected = x.linear(&w, Some(&b)).unwrap().relu().unwrap();
    for _ in 0..3 {
        close(&f.call(&x).unwrap(), &expected).unwrap();
    }
    let code = inductor.output_codes()[0].to_string();
    assert!(code.contains("cuBLASLt, bias+relu epilogue"), "{code}");
}

#[test]
fn gpu_max_autotune_times_each_kernels_launches_and_caches_the_choice() {
    let Some((device, _alone)) = gpu_alone() else { return };
    // A looped row reduction (rows too long for registers), on a size no other test uses.
    let x = Tensor::randn(&[3, 70001], 11).to(device).unwrap();
    let f = |x: &Tensor| x.mul(3.0)?.tanh()?.sum(1, false);
    let inductor = without_fx_graph_cache();
    let tuned = dynamo::compile(|x: Tensor| f(&x)).backend(inductor.clone()).mode(Mode::MaxAutotune);
    let (y, text) = logs::capture(&[Artifact::Autotuning], || tuned.call(&x).unwrap());
    close(&y, &f(&x).unwrap()).unwrap();
    let code = inductor.output_codes()[0].to_string();
    assert!(code.matches("threads per block (fastest of").count() >= 1, "{code}\n{text}");
    assert!(text.contains("AUTOTUNE") || text.contains("launch cached on disk"), "{text}");
    let again = dynamo::compile(|x: Tensor| f(&x)).backend(without_fx_graph_cache()).mode(Mode::MaxAutotune);
    let (y, text) = logs::capture(&[Artifact::Autotuning], || again.call(&x).unwrap());
    close(&y, &f(&x).unwrap()).unwrap();
    assert!(text.contains("launch cached on disk") && !text.contains("AUTOTUNE"), "{text}");
}

#[test]
fn gpu_max_autotune_keeps_an_exact_gelu_out_of_the_gemm() {
    let Some((device, _alone)) = gpu_alone() else { return };
    // The phase 5 MLP's shape: linear, exact GELU, linear.
    let t = |shape: &[usize], seed| Tensor::uniform(shape, -0.05, 0.05, seed).to(device).unwrap();
    let (w1, b1, w2, b2) = (t(&[2048, 512], 5), t(&[2048], 6), t(&[512, 2048], 7), t(&[512], 8));
    let mlp = |x: &Tensor| x.linear(&w1, Some(&b1))?.gelu()?.linear(&w2, Some(&b2));
    let x = Tensor::randn(&[16, 512], 4).to(device).unwrap();
    let inductor = engine::backends::Inductor::default();
    let f = dynamo::compile(|x: Tensor| mlp(&x)).backend(inductor.clone()).mode(Mode::MaxAutotune);
    close(&f.call(&x).unwrap(), &mlp(&x).unwrap()).unwrap();
    let code = &inductor.output_codes()[0];
    // The first bias stays fused with the GELU's kernel (folding it would split that kernel's
    // reads of the product); the second, returned, is folded into its GEMM.
    assert_eq!(code.kernel_names().len(), 1, "one kernel, the first bias and the GELU:\n{code}");
    assert_eq!(code.to_string().matches("bias epilogue").count(), 1, "{code}");
}

/// `linear(x)` (then a ReLU, when `relu`) of `rows` rows compiled in `mode` equals eager (cuBLAS)
/// over three calls; returns the output code.
fn few_row_linear_agrees(x: &Tensor, w: &Tensor, b: &Tensor, relu: bool, mode: Mode) -> Result<String, TestCaseError> {
    let f = |x: &Tensor| {
        let y = x.linear(w, Some(b))?;
        if relu { y.relu() } else { Ok(y) }
    };
    let inductor = engine::backends::Inductor::default();
    let compiled = dynamo::compile(|x: Tensor| f(&x)).backend(inductor.clone()).mode(mode);
    let expected = f(x).unwrap();
    for call in 0..3 {
        let got = compiled.call(x).unwrap();
        prop_assert!(close(&got, &expected).is_ok(), "{mode}, call {call}: {:?}", close(&got, &expected));
    }
    Ok(inductor.output_codes()[0].to_string())
}

#[test]
fn gpu_few_row_linears_run_on_the_skinny_kernel_and_equal_eager() {
    let Some((device, _alone)) = gpu_alone() else { return };
    // Sizes on both sides of the float4 path's conditions (k a multiple of 4 or not), one to
    // sixteen rows (a batch dim or not), with and without a ReLU to fold.
    let strategy =
        (1usize..=16, any::<bool>(), 1usize..400, 1usize..300, any::<bool>(), 0..Mode::ALL.len(), any::<u64>());
    let outcome = TestRunner::new(Config { cases: 32, ..Config::default() }).run(
        &strategy,
        |(rows, batched, k, n, relu, m, seed)| {
            let t =
                |shape: &[usize], s: u64| Tensor::uniform(shape, -1.0, 1.0, seed.wrapping_add(s)).to(device).unwrap();
            let x = if batched && rows % 2 == 0 { t(&[2, rows / 2, k], 0) } else { t(&[rows, k], 0) };
            let (w, b) = (t(&[n, k], 1), t(&[n], 2));
            let mode = Mode::ALL[m];
            let code = few_row_linear_agrees(&x, &w, &b, relu, mode)?;
            if mode != Mode::MaxAutotune {
                prop_assert!(code.contains("skinny_gemm ("), "{rows} rows by rule:\n{code}");
            }
            Ok(())
        },
    );
    outcome.unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn gpu_a_misaligned_few_row_input_takes_the_scalar_skinny_kernel() {
    let Some((device, _alone)) = gpu_alone() else { return };
    // The input starts one float into its buffer: no float4 loads, the same result.
    let x = Tensor::uniform(&[1, 513], -1.0, 1.0, 1).to(device).unwrap().slice(1, 1, 513, 1).unwrap();
    let w = Tensor::uniform(&[256, 512], -1.0, 1.0, 2).to(device).unwrap();
    let b = Tensor::uniform(&[256], -1.0, 1.0, 3).to(device).unwrap();
    few_row_linear_agrees(&x, &w, &b, true, Mode::Default).unwrap();
}

#[test]
fn gpu_seventeen_rows_leave_the_skinny_kernel_and_long_few_tile_products_stay_on_cublas() {
    let Some((device, _alone)) = gpu_alone() else { return };
    let t = |shape: &[usize], s| Tensor::uniform(shape, -1.0, 1.0, s).to(device).unwrap();
    let hopper = engine::device::cuda::probe().devices.as_ref().is_ok_and(|d| d[0].compute_capability.0 == 9);
    let code = few_row_linear_agrees(&t(&[17, 64], 1), &t(&[32, 64], 2), &t(&[32], 3), false, Mode::Default).unwrap();
    assert!(!code.contains("skinny_gemm"), "{code}");
    // The note the book's compile-modes page quotes.
    let note = "tf32x3_gemm 64x64x32 (float32 on Hopper's tensor cores as three TF32 products, faster than cuBLAS's \
                float32 GEMM)";
    assert_eq!(code.contains(note), hopper, "the tensor cores by rule on Hopper only:\n{code}");
    // 64 output tiles and a long `k`: cuBLAS measured faster there.
    let code =
        few_row_linear_agrees(&t(&[512, 2048], 4), &t(&[512, 2048], 5), &t(&[512], 6), false, Mode::Default).unwrap();
    assert!(!code.contains("tf32x3_gemm"), "{code}");
}

/// `steps` MLP training steps (SGD with momentum) on `device`: eagerly (`None`), or compiled
/// whole with compiled autograd in `mode`. The losses, the parameters after, and the
/// `cudagraphs` log.
fn mlp_steps(device: Device, mode: Option<Mode>, steps: usize) -> (Vec<f32>, Vec<Vec<f32>>, String) {
    use engine::optim::{Optimizer, Sgd};
    use workbook_models::phase5::{MLP_FEATURES, Mlp};
    let model = Mlp::new(3, device).unwrap().requires_grad_();
    let sgd = Sgd::new(&model.parameters(), 0.05).momentum(0.9);
    let x = Tensor::randn(&[64, MLP_FEATURES], 1).to(device).unwrap();
    let target = Tensor::randn(&[64, MLP_FEATURES], 2).to(device).unwrap();
    let step_of = |x: &Tensor, t: &Tensor| -> engine::Result<Tensor> {
        let loss = model.forward(x)?.mse_loss(t)?;
        loss.backward()?;
        sgd.step()?;
        sgd.zero_grad();
        Ok(loss)
    };
    let compiled = dynamo::compile(|(x, t): (Tensor, Tensor)| step_of(&x, &t))
        .mode(mode.unwrap_or(Mode::Default))
        .compiled_autograd(true)
        .fullgraph(true);
    let (losses, log) = logs::capture(&[Artifact::Cudagraphs], || {
        (0..steps)
            .map(|_| match mode {
                None => step_of(&x, &target),
                Some(_) => compiled.call((&x, &target)),
            })
            .map(|loss| loss.unwrap().item().unwrap())
            .collect::<Vec<f32>>()
    });
    let params = model.parameters().iter().map(|p| p.to_vec().unwrap()).collect();
    (losses, params, log)
}

#[test]
fn a_whole_training_step_in_reduce_overhead_runs_the_default_plan_on_cpu() {
    let (_, eager, _) = mlp_steps(Device::Cpu, None, 3);
    let (_, compiled, log) = mlp_steps(Device::Cpu, Some(Mode::ReduceOverhead), 3);
    for (c, e) in compiled.iter().zip(&eager) {
        let worst = c.iter().zip(e).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "the parameters differ by {worst}");
    }
    assert_eq!(log.matches("skipping cudagraphs due to cpu device").count(), 1, "{log}");
}

#[test]
fn gpu_a_whole_training_step_is_one_cuda_graph_replay() {
    let Some((device, _alone)) = gpu_alone() else { return };
    let (eager_losses, eager, _) = mlp_steps(device, None, 6);
    for mode in Mode::ALL {
        let (losses, params, log) = mlp_steps(device, Some(mode), 6);
        assert!(losses[5] < losses[0], "{mode}: {losses:?}");
        for (what, got, expected) in
            [("losses", &vec![losses.clone()], &vec![eager_losses.clone()]), ("params", &params, &eager)]
        {
            for (c, e) in got.iter().zip(expected) {
                let worst = c.iter().zip(e).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0f32, f32::max);
                assert!(worst < 1e-3, "{mode}: the {what} differ from eager by {worst}");
            }
        }
        if mode == Mode::ReduceOverhead {
            // Warm-up, one recording, then replays: the parameters are written in place by the
            // graph itself, so every step replays the one recording.
            assert_eq!(log.matches("recorded CUDA graph").count(), 1, "{log}");
        }
    }
}
