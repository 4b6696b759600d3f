//! Inductor on a GPU: generated CUDA C, compiled by NVRTC and launched on the device's stream,
//! against eager execution on the same GPU, on random programs and on the shapes that trip
//! generated kernels: sizes that are not multiples of 4 (vector tails), misaligned inputs (scalar
//! fallbacks), rows too long to keep in registers (looped reductions), reductions over the outer
//! dimension (one thread per row), dynamic batch sizes, custom ops and `cond`.
//!
//! Each test starts by asking whether CUDA can run here; where it cannot, it prints
//! `skipped: <reason>` and passes, so CPU-only CI stays green while showing what it did not check.

mod common;

use common::programs::programs;
use common::{close_to_eager as close, gpu};
use engine::backends::Inductor;
use engine::{DType, Device, Result, Tensor, dynamo};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Compiles `f` with Inductor, runs it on `inputs` and compares with eager execution.
fn agrees(f: impl Fn(Vec<Tensor>) -> Result<Tensor>, inputs: &[Tensor]) -> Inductor {
    let inductor = Inductor::default();
    let compiled = dynamo::compile(|t: Vec<Tensor>| f(t)).backend(inductor.clone());
    let got = compiled.call(inputs).unwrap();
    if let Err(why) = close(&got, &f(inputs.to_vec()).unwrap()) {
        panic!("{why}\n{}", inductor.output_codes()[0]);
    }
    inductor
}

fn on(device: Device, shape: &[usize], seed: u64) -> Tensor {
    Tensor::uniform(shape, -2.0, 2.0, seed).to(device).unwrap()
}

#[test]
fn gpu_compiled_equals_eager_on_random_programs() {
    let Some(device) = gpu() else { return };
    let mut runner = TestRunner::new(Config { cases: 48, ..Config::default() });
    let result = runner.run(&(programs(12), any::<u64>()), |(program, seed)| {
        let inputs: Vec<Tensor> = program.inputs(seed).iter().map(|t| t.to(device).unwrap()).collect();
        let expected = program.run(&inputs).unwrap();
        let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).backend(Inductor::default());
        for (g, e) in compiled.call(&inputs).unwrap().iter().zip(&expected) {
            prop_assert!(close(g, e).is_ok(), "{program:?}: {:?}", close(g, e));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn gpu_pointwise_tails_and_misaligned_inputs() {
    let Some(device) = gpu() else { return };
    for n in [1, 3, 4, 5, 1023, 4099, 1 << 20] {
        let inductor = agrees(|t| t[0].add(&t[1])?.relu()?.mul(2.0), &[on(device, &[n], 1), on(device, &[n], 2)]);
        assert_eq!(inductor.output_codes()[0].kernel_names(), ["poi_fused_add_relu_mul_0"]);
        // An input that starts one float into its buffer cannot use 16-byte loads.
        let base = on(device, &[n + 1], 3);
        let shifted = base.slice(0, 1, n + 1, 1).unwrap();
        agrees(|t| t[0].mul(&t[1])?.sub(1.0), &[shifted, on(device, &[n], 4)]);
    }
    agrees(|t| t[0].add(&t[1])?.tanh(), &[on(device, &[37, 53], 5), on(device, &[53], 6)]);
    agrees(|t| t[0].add(&t[1].t()?), &[on(device, &[37, 53], 7), on(device, &[53, 37], 8)]);
}

#[test]
fn gpu_reductions_persistent_looped_and_outer() {
    let Some(device) = gpu() else { return };
    for (rows, cols) in [(1, 1), (3, 7), (64, 4096), (7, 1000), (5, 8193), (2, 30000)] {
        let w = on(device, &[cols], 9);
        let b = on(device, &[cols], 10);
        agrees(|t| t[0].softmax(-1), &[on(device, &[rows, cols], 11)]);
        agrees(|t| t[0].log_softmax(-1), &[on(device, &[rows, cols], 12)]);
        agrees(|t| t[0].layer_norm(&t[1], &t[2], 1e-5), &[on(device, &[rows, cols], 13), w, b]);
        agrees(|t| t[0].mul(&t[0])?.sum(0, false)?.sqrt(), &[on(device, &[rows, cols], 14)]);
        agrees(|t| t[0].amax(1, true)?.add(1.0), &[on(device, &[rows, cols], 15)]);
    }
}

/// Layer norm and softmax compiled against eager in f32, bf16 and f16, at row lengths on both
/// sides of the persistent reductions' limits (a warp per row up to 1024, four rows a block; a
/// block per row beyond): a few rows and row counts that fill no whole block (3, 37), lengths
/// that take no vector loads (1, 7, 33, 777, 1025), the block's 768, and an input that starts one
/// element into its buffer (the scalar fallback of the 16-byte loads).
#[test]
fn gpu_row_reductions_in_each_dtype() {
    use common::{Layout, make_typed};
    type Model = fn(Vec<Tensor>) -> Result<Tensor>;
    let Some(device) = gpu() else { return };
    let layer_norm: Model = |t| t[0].layer_norm(&t[1], &t[2], 1e-5);
    let softmax: Model = |t| t[0].softmax(-1);
    let values = |n: usize, seed: u64| Tensor::uniform(&[n], -2.0, 2.0, seed).to_vec().unwrap();
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        // Eager's kernels round once, as the fused one does: the results differ by the order of
        // the float32 sums, then by at most one rounding to the dtype.
        let rtol = (2.0 * dtype.epsilon()).max(1e-3);
        for cols in [1, 7, 33, 256, 768, 777, 1000, 1024, 1025, 4096] {
            let weights = |seed| make_typed(&values(cols, seed), &[cols], Layout::Contiguous, device, dtype).0;
            for (rows, layout) in [(3, Layout::Contiguous), (37, Layout::Contiguous), (6, Layout::Misaligned)] {
                let x = make_typed(&values(rows * cols, cols as u64), &[rows, cols], layout, device, dtype).0;
                let cases = [
                    ("layer norm", layer_norm, vec![x.clone(), weights(1), weights(2)]),
                    ("softmax", softmax, vec![x]),
                ];
                for (name, f, inputs) in cases {
                    let inductor = Inductor::default();
                    let got = dynamo::compile(|t: Vec<Tensor>| f(t)).backend(inductor.clone()).call(&inputs).unwrap();
                    assert_eq!(got.dtype(), dtype);
                    let (got, want) = (got.to_vec().unwrap(), f(inputs.clone()).unwrap().to_vec().unwrap());
                    let near =
                        |(g, e): (&f32, &f32)| (g.is_nan() && e.is_nan()) || (g - e).abs() <= 1e-4 + rtol * e.abs();
                    if let Some((i, (g, e))) = got.iter().zip(&want).enumerate().find(|(_, pair)| !near(*pair)) {
                        let code = &inductor.output_codes()[0];
                        panic!(
                            "{name}, {dtype}, [{rows}, {cols}], {layout:?}: element {i}: compiled {g}, eager {e}\n{code}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn gpu_mlp_runs_matmul_through_cublas_between_kernels() {
    let Some(device) = gpu() else { return };
    let inputs: Vec<Tensor> = [&[8usize, 16][..], &[32, 16], &[32], &[8, 32], &[8]]
        .iter()
        .enumerate()
        .map(|(i, s)| on(device, s, i as u64))
        .collect();
    let inductor =
        agrees(|t| t[0].linear(&t[1], Some(&t[2]))?.gelu()?.linear(&t[3], Some(&t[4]))?.softmax(-1), &inputs);
    let code = &inductor.output_codes()[0];
    assert_eq!(code.kernel_names(), ["poi_fused_add_mul_erf_0", "per_fused_add_amax_sub_exp_sum_div_1"]);
    assert_eq!(code.extern_calls.len(), 2);
}

#[test]
fn gpu_dynamic_batch_sizes_share_one_module() {
    let Some(device) = gpu() else { return };
    let w = on(device, &[96], 1);
    let f = |x: Tensor| x.add(&w)?.relu()?.softmax(-1);
    let compiled = dynamo::compile(f).dynamic(true).backend(Inductor::default());
    for batch in [3, 17, 64, 5] {
        let x = on(device, &[batch, 96], batch as u64);
        close(&compiled.call(&x).unwrap(), &f(x.clone()).unwrap()).unwrap();
    }
    assert_eq!(compiled.stats().compiles, 1);
}

#[test]
fn gpu_custom_ops_and_cond() {
    let Some(device) = gpu() else { return };
    let soft_clip = engine::dynamo::CustomOp::elementwise("gpu_inductor::soft_clip", 1)
        .c_source("float soft_clip(float x) { return x / (1.0f + fabsf(x)); }")
        .cuda_source("__device__ float soft_clip(float x) { return x / (1.0f + fabsf(x)); }")
        .register()
        .unwrap();
    let inductor = agrees(|t| soft_clip.call(&[&t[0].mul(3.0)?])?.add(&t[0]), &[on(device, &[999], 1)]);
    assert_eq!(inductor.output_codes()[0].kernel_names(), ["poi_fused_mul_softclip_add_0"]);
    let f = |t: Vec<Tensor>| {
        let h = t[0].mul(2.0)?;
        let positive = h.sum_all()?.gt(0.0)?;
        dynamo::cond(&positive, |hs| hs[0].exp(), |hs| hs[0].neg(), &[&h])?.add(1.0)
    };
    for seed in 0..4 {
        agrees(f, &[on(device, &[4, 5], seed)]);
    }
}

#[test]
fn gpu_compiled_equals_eager_in_half_precision() {
    use common::programs::programs_in;
    let Some(device) = gpu() else { return };
    let mut runner = TestRunner::new(Config { cases: 32, ..Config::default() });
    let strategy = (prop_oneof![Just(engine::DType::F16), Just(engine::DType::BF16)], any::<u64>())
        .prop_flat_map(|(dtype, seed)| (Just(dtype), programs_in(dtype, 8), Just(seed)));
    let result = runner.run(&strategy, |(dtype, program, seed)| {
        let inputs: Vec<Tensor> = program.inputs(seed).iter().map(|t| t.to(device).unwrap()).collect();
        let expected = program.run(&inputs).unwrap();
        let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).backend(Inductor::default());
        // As on the CPU: eager rounds after each op, the fused kernels once at the end.
        let tol = 16.0 * dtype.epsilon();
        for (g, e) in compiled.call(&inputs).unwrap().iter().zip(&expected) {
            prop_assert_eq!(g.dtype(), dtype);
            let (g, e) = (g.to_vec().unwrap(), e.to_vec().unwrap());
            let near =
                g.iter().zip(&e).all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + y.abs()));
            prop_assert!(near, "{dtype}: {program:?}\ngot      {g:?}\nexpected {e:?}");
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn gpu_half_precision_kernels_load_eight_elements_at_a_time() {
    let Some(device) = gpu() else { return };
    for dtype in [engine::DType::BF16, engine::DType::F16] {
        for n in [1, 7, 8, 9, 1000, 4099, 1 << 20] {
            let x = |seed| Tensor::uniform_dtype(&[n], -2.0, 2.0, seed, dtype).to(device).unwrap();
            let f = |t: Vec<Tensor>| t[0].add(&t[1])?.relu()?.mul(2.0);
            let compiled = dynamo::compile(f).backend(Inductor::default());
            let inputs = [x(1), x(2)];
            // Exactly eager's values: one op's rounding, whether fused or not, for add and relu
            // (exact in float32 from half-precision inputs) then one rounding of the product.
            let (got, want) = (compiled.call(&inputs).unwrap(), f(inputs.to_vec()).unwrap());
            assert_eq!(got.to_vec().unwrap(), want.to_vec().unwrap(), "{dtype}, {n} elements");
            // A view one element in cannot take 16-byte loads: the scalar path, eager's values
            // to within one rounding of the GPU's `expf`.
            if n > 1 {
                let shifted = vec![x(3).slice(0, 1, n, 1).unwrap()];
                let g = |t: Vec<Tensor>| t[0].exp();
                let compiled = dynamo::compile(g).backend(Inductor::default());
                let (got, want) = (compiled.call(&shifted).unwrap(), g(shifted.clone()).unwrap());
                let (got, want) = (got.to_vec().unwrap(), want.to_vec().unwrap());
                let ulp = 2.0 * dtype.epsilon();
                assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= ulp * b.abs()), "{dtype}, {n} elements");
            }
        }
    }
}

#[test]
fn gpu_compiled_training_matches_eager_gradients() {
    // The MLP 512-2048-512 and a small naive block, compiled with their backward on the GPU
    // (fused backward kernels, the attention backward when the pattern matcher finds attention):
    // gradients equal eager ones on the same GPU, and a few SGD steps lower the loss.
    use engine::optim::{Optimizer, Sgd};
    use workbook_models::phase5::{Block, BlockShape, MLP_FEATURES, Mlp};
    let Some(device) = gpu() else { return };
    let grads =
        |params: &[Tensor]| -> Vec<Vec<f32>> { params.iter().map(|p| p.grad().unwrap().to_vec().unwrap()).collect() };
    let compare = |got: Vec<Vec<f32>>, expected: Vec<Vec<f32>>, what: &str| {
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            let scale = e.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let worst = g.iter().zip(e).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst <= 1e-4 + 1e-3 * scale, "{what}: parameter {i} differs by {worst} (largest {scale})");
        }
    };
    let mlp = Mlp::new(0, device).unwrap().requires_grad_();
    let x = on(device, &[64, MLP_FEATURES], 1);
    let target = on(device, &[64, MLP_FEATURES], 2);
    mlp.forward(&x).unwrap().mse_loss(&target).unwrap().backward().unwrap();
    let eager = grads(&mlp.parameters());
    mlp.parameters().iter().for_each(Tensor::zero_grad);
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(Inductor::default());
    compiled.call(&x).unwrap().mse_loss(&target).unwrap().backward().unwrap();
    compare(grads(&mlp.parameters()), eager, "MLP");
    let sgd = Sgd::new(&mlp.parameters(), 0.05).momentum(0.9);
    let losses: Vec<f32> = (0..5)
        .map(|_| {
            sgd.zero_grad();
            let loss = compiled.call(&x).unwrap().mse_loss(&target).unwrap();
            loss.backward().unwrap();
            sgd.step().unwrap();
            loss.item().unwrap()
        })
        .collect();
    assert!(losses[4] < losses[0], "losses {losses:?}");

    let shape = BlockShape { batch: 2, seq: 64, d_model: 64, heads: 4 };
    let block = Block::new(shape, 3, device).unwrap().requires_grad_();
    let x = on(device, &[2, 64, 64], 4);
    block.naive_forward(&x).unwrap().sum_all().unwrap().backward().unwrap();
    let eager = grads(&block.parameters());
    block.parameters().iter().for_each(Tensor::zero_grad);
    let compiled = dynamo::compile(|x: Tensor| block.naive_forward(&x)).backend(Inductor::default());
    compiled.call(&x).unwrap().sum_all().unwrap().backward().unwrap();
    compare(grads(&block.parameters()), eager, "block");
}

/// The generated reduction kernels (`per_` and `red_`) in an output code.
fn reduction_kernels(code: &engine::inductor::OutputCode) -> usize {
    code.kernel_names().iter().filter(|n| n.starts_with("per_") || n.starts_with("red_")).count()
}

#[test]
fn gpu_split_reductions_match_eager() {
    // Reductions with too few outputs for the GPU run as partial results, then their total (the
    // target splits them by itself).
    let Some(device) = gpu() else { return };
    let cases = common::split_cases::split_reduction_cases();
    for (f, shapes, expected) in cases {
        let inputs: Vec<Tensor> = shapes.iter().enumerate().map(|(i, s)| on(device, s, 20 + i as u64)).collect();
        let inductor = agrees(f, &inputs);
        let code = &inductor.output_codes()[0];
        assert_eq!(reduction_kernels(code), expected, "{code}");
    }
    // In bf16 the partials stay f32 and only the total rounds: within bf16's rounding of eager.
    let inputs: Vec<Tensor> = (0..2).map(|i| on(device, &[4096, 512], 30 + i).to_dtype(DType::BF16).unwrap()).collect();
    let inductor = Inductor::default();
    let f = |t: Vec<Tensor>| t[0].mse_loss(&t[1]);
    let got = dynamo::compile(f).backend(inductor.clone()).call(&inputs).unwrap().item().unwrap();
    let expected = f(inputs.clone()).unwrap().item().unwrap();
    assert!((got - expected).abs() <= 1e-2 * expected.abs(), "compiled {got}, eager {expected}");
    assert_eq!(reduction_kernels(&inductor.output_codes()[0]), 2, "{}", inductor.output_codes()[0]);
}

#[test]
fn gpu_whole_mlp_step_at_batch_4096_splits_its_reductions() {
    // The step issue 26 times: forward, MSE loss, backward and SGD compiled into one graph. Its
    // loss's mean and both bias gradients are split; two steps leave the parameters eager leaves.
    use engine::logs::{self, Artifact};
    use engine::optim::{Optimizer, Sgd};
    use workbook_models::phase5::{MLP_FEATURES, Mlp};
    let Some(device) = gpu() else { return };
    let x = on(device, &[4096, MLP_FEATURES], 1);
    let target = on(device, &[4096, MLP_FEATURES], 2);
    let train = |compiled: bool| -> Vec<Vec<f32>> {
        let mlp = Mlp::new(0, device).unwrap().requires_grad_();
        let sgd = Sgd::new(&mlp.parameters(), 0.05).momentum(0.9);
        let step_of = |x: &Tensor, t: &Tensor| -> Result<Tensor> {
            let loss = mlp.forward(x)?.mse_loss(t)?;
            loss.backward()?;
            sgd.step()?;
            sgd.zero_grad();
            Ok(loss)
        };
        let step = dynamo::compile(|(x, t): (Tensor, Tensor)| step_of(&x, &t)).compiled_autograd(true).fullgraph(true);
        for _ in 0..2 {
            if compiled { step.call((&x, &target)) } else { step_of(&x, &target) }.unwrap();
        }
        mlp.parameters().iter().map(|p| p.to_vec().unwrap()).collect()
    };
    let eager = train(false);
    let (compiled, log) = logs::capture(&[Artifact::Fusion], || train(true));
    for (i, (g, e)) in compiled.iter().zip(&eager).enumerate() {
        let worst = g.iter().zip(e).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0f32, f32::max);
        assert!(worst <= 1e-4, "parameter {i} differs by {worst} (relative)");
    }
    for split in [
        "split mean: 1 output(s) of 2097152 elements each → 256 partial results",
        "split sum: 512 output(s)",
        "split sum_1: 2048 output(s)",
    ] {
        assert!(log.contains(split), "{split} missing from:\n{log}");
    }
}

#[test]
fn gpu_compiled_attention_backward_runs_as_an_extern_kernel() {
    // Attention called directly: the compiled backward calls the flash-style backward kernels
    // into its planned buffer (`extern_into`); gradients equal eager ones on the same GPU.
    let Some(device) = gpu() else { return };
    let make = |seed| on(device, &[2, 4, 100, 64], seed).requires_grad_(true);
    let (q, k, v) = (make(1), make(2), make(3));
    let f = |q: &Tensor, k: &Tensor, v: &Tensor| q.scaled_dot_product_attention(k, v, None, true, None)?.tanh();
    f(&q, &k, &v).unwrap().sum_all().unwrap().backward().unwrap();
    let eager: Vec<Vec<f32>> = [&q, &k, &v].iter().map(|t| t.grad().unwrap().to_vec().unwrap()).collect();
    [&q, &k, &v].iter().for_each(|t| t.zero_grad());
    let compiled = dynamo::compile(|(q, k, v): (Tensor, Tensor, Tensor)| f(&q, &k, &v)).backend(Inductor::default());
    compiled.call((&q, &k, &v)).unwrap().sum_all().unwrap().backward().unwrap();
    for (t, e) in [&q, &k, &v].iter().zip(&eager) {
        let g = t.grad().unwrap().to_vec().unwrap();
        let worst = g.iter().zip(e).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "compiled attention gradient differs by {worst}");
    }
}

#[test]
fn gpu_first_run_compiles_nothing_outside_the_compile() {
    // Naive attention (rewritten into the flash-attention extern kernel) and a product on cuBLAS:
    // building the program compiles its kernels and the attention family and creates cuBLAS's
    // handle, so the first run adds no NVRTC compile and no load of its own. Every compile and load
    // of the first call is therefore inside the compile dynamo recorded, and in `CompileStats`.
    let Some(device) = gpu() else { return };
    let (q, k, v, w) = (
        on(device, &[2, 4, 96, 32], 1),
        on(device, &[2, 4, 96, 32], 2),
        on(device, &[2, 4, 96, 32], 3),
        on(device, &[32, 48], 4),
    );
    let f = |(q, k, v, w): (Tensor, Tensor, Tensor, Tensor)| {
        let scores = q.matmul(&k.transpose(-2, -1)?)?.div(32f32.sqrt())?;
        let shifted = scores.sub(&scores.amax(-1, true)?)?.exp()?;
        shifted.div(&shifted.sum(-1, true)?)?.matmul(&v)?.matmul(&w)
    };
    let compiled = dynamo::compile(f).backend(Inductor::default());
    let (out, whole_call) = engine::compile_time::record(|| compiled.call((&q, &k, &v, &w)));
    out.unwrap().to_vec().unwrap();
    let stats = compiled.stats();
    let call = whole_call.stages();
    assert_eq!((call.compiler_runs, call.cache_hits), (stats.stages.compiler_runs, stats.stages.cache_hits));
    for stage in [engine::compile_time::Stage::Nvrtc, engine::compile_time::Stage::Loading] {
        assert_eq!(call.get(stage), stats.stages.get(stage), "{stage}: the first run did some outside the compile");
    }
}

/// The engine's own CUDA printer with every tail loop running one element too far.
fn one_past_the_end(kernel: &engine::inductor::kernel::Kernel) -> String {
    engine::inductor::codegen::cuda::kernel(kernel)
        .source
        .replace("x < xnumel && x < x0 + 4", "x <= xnumel && x < x0 + 4")
}

/// A model as the guarded-buffer test runs it.
type Model = fn(Vec<Tensor>) -> Result<Tensor>;

/// Guarded buffers on a GPU (`Config::guard_buffers`): the engine's kernels on guarded copies give
/// exactly what they give unguarded (ties, tails, transposed reads, row reductions, bf16 and
/// f16), and a kernel that writes one element past its output's end is an error naming the element, not a
/// silent corruption.
#[test]
fn gpu_guarded_buffers_catch_a_write_past_the_end() {
    let Some(device) = gpu() else { return };
    let compiled = |guard_buffers: bool, f: Model, inputs: &[Tensor]| {
        let inductor = Inductor::with_config(engine::inductor::Config { guard_buffers, ..Default::default() });
        dynamo::compile(|t: Vec<Tensor>| f(t)).backend(inductor).call(inputs).unwrap().to_vec().unwrap()
    };
    let bf16 = |t: Tensor| t.to_dtype(engine::DType::BF16).unwrap();
    let f16 = |t: Tensor| t.to_dtype(engine::DType::F16).unwrap();
    let cases: [(Model, Vec<Tensor>); 7] = [
        (|t| t[0].add(&t[1])?.relu()?.mul(2.0), vec![on(device, &[91], 1), on(device, &[91], 2)]),
        (|t| t[0].add(&t[1].t()?), vec![on(device, &[37, 53], 3), on(device, &[53, 37], 4)]),
        (|t| t[0].softmax(-1), vec![on(device, &[7, 1000], 5)]),
        (|t| t[0].softmax(-1), vec![bf16(on(device, &[7, 1000], 6))]),
        // Rows in registers, and a row with no vector loads.
        (
            |t| t[0].layer_norm(&t[1], &t[2], 1e-5),
            vec![bf16(on(device, &[37, 1024], 7)), bf16(on(device, &[1024], 8)), bf16(on(device, &[1024], 9))],
        ),
        (|t| t[0].softmax(-1), vec![f16(on(device, &[5, 33], 10))]),
        // A row just past 1024.
        (|t| t[0].softmax(-1), vec![on(device, &[3, 1025], 11)]),
    ];
    for (i, (f, inputs)) in cases.iter().enumerate() {
        let (guarded, unguarded) = (compiled(true, *f, inputs), compiled(false, *f, inputs));
        let same = guarded.iter().zip(&unguarded).all(|(g, u)| g.to_bits() == u.to_bits());
        assert!(same && guarded.len() == unguarded.len(), "case {i}: guarded runs differ from unguarded ones");
    }
    let printers = engine::inductor::Printers { pointwise_cuda: Some(one_past_the_end), ..Default::default() };
    let broken =
        Inductor::with_config(engine::inductor::Config { printers, guard_buffers: true, ..Default::default() });
    let (f, inputs) = &cases[0];
    let error = dynamo::compile(|t: Vec<Tensor>| f(t)).backend(broken).call(inputs).unwrap_err().to_string();
    assert!(error.contains("wrote outside a buffer, past its end") && error.contains("wrote element 91 "), "{error}");
}

/// Floats that test every rounding decision of e4m3 and e5m2: the ties between neighbours of
/// each binade, subnormals, the largest finite values and what lies past them (e4m3's NaN from
/// 464, e5m2's infinity from 61440), infinities, NaN, signed zeros, and random magnitudes. An odd
/// count, so a compiled kernel's scalar tail runs too.
fn fp8_edge_values() -> Tensor {
    let mut values = vec![0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN, 1e30, -1e30];
    values.extend([448.0, 449.0, 463.99, 464.0, 464.01, 479.0, 480.0, 1e6, 57344.0, 61439.0, 61440.0, 61441.0]);
    for e in -24..17 {
        for m in 0..32 {
            let v = (1.0 + m as f32 / 32.0) * 2f32.powi(e);
            values.extend([v, -v]);
        }
    }
    values.extend(Tensor::randn(&[4096], 7).mul(100.0).unwrap().to_vec().unwrap());
    if values.len() % 2 == 0 {
        values.push(0.3);
    }
    let n = values.len();
    Tensor::from_vec(values, &[n]).unwrap()
}

/// The 8-bit values' bit patterns, through the CPU's widening (exact, one float per pattern).
fn fp8_bits(t: &Tensor) -> Vec<u32> {
    let widened = t.to(Device::Cpu).unwrap().to_dtype(DType::F32).unwrap().to_vec().unwrap();
    widened.iter().map(|v| if v.is_nan() { 0x7fc0_0000 | (v.to_bits() & 0x8000_0000) } else { v.to_bits() }).collect()
}

/// Rounding to e4m3 and e5m2 on the GPU (eager kernels, and a generated kernel's 32-bit vector
/// stores and scalar tail) gives the CPU's bits: on GPUs with FP8 conversions (compute capability
/// 8.9 on) that is `cvt.rn.satfinite` with the NaN and infinity the software rounding makes
/// patched in; elsewhere the software rounding itself.
#[test]
fn gpu_fp8_rounding_matches_the_cpu_bit_for_bit() {
    let Some(device) = gpu() else { return };
    let x = fp8_edge_values();
    let on_gpu = x.to(device).unwrap();
    for dtype in [DType::F8E4M3, DType::F8E5M2] {
        let cpu = fp8_bits(&x.to_dtype(dtype).unwrap());
        assert_eq!(fp8_bits(&on_gpu.to_dtype(dtype).unwrap()), cpu, "eager {dtype}");
        let inductor = Inductor::default();
        let compiled = dynamo::compile(|x: Tensor| x.mul(1.0)?.to_dtype(dtype)).backend(inductor.clone());
        let got = fp8_bits(&compiled.call(&on_gpu).unwrap());
        let source = inductor.output_codes()[0].to_string();
        assert!(source.contains("vstore4(out_ptr0"), "{source}");
        for (i, (g, c)) in got.iter().zip(&cpu).enumerate() {
            assert_eq!(
                g,
                c,
                "compiled {dtype}: element {i} ({}) rounds to {g:#x}, {c:#x} on the CPU",
                x.to_vec().unwrap()[i]
            );
        }
    }
}

/// An MLP with both products in FP8 and static activation scales, as `bench fp8` runs it: the
/// compiled graph (one kernel for bias, GELU and the e4m3 store between the products, each
/// product written by cuBLASLt straight into its planned buffer, the last bias added in the
/// second product's epilogue) against eager, both within FP8's error of the float32 model.
/// Needs FP8 tensor cores (compute capability 8.9 on).
#[test]
fn gpu_fp8_mlp_with_static_scales_compiles_to_one_kernel_between_the_products() {
    let Some(device) = gpu() else { return };
    let facts = engine::device::cuda::probe().devices.as_ref().unwrap()[0].clone();
    if facts.compute_capability < (8, 9) {
        eprintln!("skipped: FP8 products need compute capability 8.9, this GPU has {:?}", facts.compute_capability);
        return;
    }
    let (batch, features, hidden) = (256, 128, 512);
    let x = Tensor::randn(&[batch, features], 1).to(device).unwrap();
    let w1 = Tensor::randn(&[hidden, features], 2).mul(0.1).unwrap().to(device).unwrap();
    let b1 = Tensor::randn(&[hidden], 3).mul(0.1).unwrap().to(device).unwrap();
    let w2 = Tensor::randn(&[features, hidden], 4).mul(0.05).unwrap().to(device).unwrap();
    let b2 = Tensor::randn(&[features], 5).mul(0.1).unwrap().to(device).unwrap();
    let reference = x.linear(&w1, Some(&b1)).unwrap().gelu().unwrap().linear(&w2, Some(&b2)).unwrap();
    let amax = |t: &Tensor| t.abs().unwrap().amax(-1, true).unwrap().amax(-2, true).unwrap().item().unwrap();
    let scale = |v: f32| Tensor::scalar(v).to(device).unwrap();
    let quantize = |t: &Tensor, s: &Tensor| t.div(s)?.minimum(448.0)?.maximum(-448.0)?.to_dtype(DType::F8E4M3);
    let (s1, s2) = (scale(amax(&w1) / 448.0), scale(amax(&w2) / 448.0));
    let (q1, q2) = (quantize(&w1, &s1).unwrap().t().unwrap(), quantize(&w2, &s2).unwrap().t().unwrap());
    let hidden_amax = amax(&x.linear(&w1, Some(&b1)).unwrap().gelu().unwrap());
    let (sx, sh) = (scale(2.0 * amax(&x) / 448.0), scale(2.0 * hidden_amax / 448.0));
    let (b1, b2) = (b1.to_dtype(DType::BF16).unwrap(), b2.to_dtype(DType::BF16).unwrap());
    let forward = |x: &Tensor| -> Result<Tensor> {
        let h = quantize(x, &sx)?.scaled_mm(&q1, &sx, &s1, DType::BF16)?.add(&b1)?.gelu()?;
        quantize(&h, &sh)?.scaled_mm(&q2, &sh, &s2, DType::BF16)?.add(&b2)
    };
    let x16 = x.to_dtype(DType::BF16).unwrap();
    let inductor = Inductor::default();
    let compiled = dynamo::compile(|x: Tensor| forward(&x)).backend(inductor.clone());
    let (eager, got) = (forward(&x16).unwrap(), compiled.call(&x16).unwrap());
    let code = &inductor.output_codes()[0];
    // x's quantization, then bias + GELU + quantization; the second bias is in the second GEMM.
    assert_eq!(code.kernel_names().len(), 2, "{code}");
    assert_eq!(code.extern_calls.len(), 2, "{code}");
    assert!(code.call.contains("bias = ") && code.call.contains("(bias added in the GEMM's epilogue)"), "{code}");
    let want = reference.to_vec().unwrap();
    let largest = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    for (form, y) in [("eager", &eager), ("compiled", &got)] {
        let y = y.to_dtype(DType::F32).unwrap().to_vec().unwrap();
        let worst = y.iter().zip(&want).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(worst <= 0.1 * largest, "{form}: FP8 error {worst} against float32's largest {largest}\n{code}");
    }
    // A second call reuses the planned buffers: the same result.
    let again = compiled.call(&x16).unwrap();
    assert_eq!(
        again.to_dtype(DType::F32).unwrap().to_vec().unwrap(),
        got.to_dtype(DType::F32).unwrap().to_vec().unwrap()
    );
}

/// The transformer block's GEMM epilogues against eager in f32, bf16 and f16: the residual add
/// after a half-precision linear layer runs as cuBLASLt's `beta * C` (no kernel left), a residual
/// that cannot be `C` (transposed) leaves its add in a kernel. Float32 products fold none outside
/// max-autotune. Rows and widths that are no multiple of a vector or a tile (5 x 37 rows, 33
/// columns, 37 inner) take the tails.
#[test]
fn gpu_residual_adds_fold_into_half_precision_gemms() {
    let Some(device) = gpu() else { return };
    let t = |shape: &[usize], seed, dtype| {
        Tensor::uniform(shape, -1.0, 1.0, seed).to_dtype(dtype).unwrap().to(device).unwrap()
    };
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        // Eager rounds after the product, the bias and the residual; the GEMM once at the end.
        let tol = (16.0 * dtype.epsilon()).max(1e-3);
        let agrees = |f: &dyn Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], what: &str| {
            let inductor = Inductor::default();
            let compiled = dynamo::compile(|xs: Vec<Tensor>| f(&xs)).backend(inductor.clone());
            let got = compiled.call(inputs).unwrap();
            assert_eq!(got.dtype(), dtype, "{what}");
            let (g, e) = (got.to_vec().unwrap(), f(inputs).unwrap().to_vec().unwrap());
            let code = inductor.output_codes()[0].clone();
            let bad = g
                .iter()
                .zip(&e)
                .position(|(x, y)| !((x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + y.abs())));
            if let Some(i) = bad {
                panic!("{what}, {dtype}: element {i}: compiled {}, eager {}\n{code}", g[i], e[i]);
            }
            code
        };
        let half = dtype.is_half();
        for (batch, seq, k, n) in [(2, 64, 64, 96), (5, 37, 40, 24), (1, 3, 37, 33)] {
            let (x, w, b, h) =
                (t(&[batch, seq, k], 1, dtype), t(&[n, k], 2, dtype), t(&[n], 3, dtype), t(&[batch, seq, n], 4, dtype));
            let what = format!("h + linear(x), x [{batch}, {seq}, {k}], w [{n}, {k}]");
            let code =
                agrees(&|t| t[3].add(&t[0].linear(&t[1], Some(&t[2]))?), &[x.clone(), w.clone(), b.clone(), h], &what);
            assert_eq!(code.call.contains("residual = "), half, "{what}, {dtype}:\n{code}");
            if half {
                assert!(code.kernel_names().is_empty(), "{what}, {dtype}: bias and residual in the GEMM:\n{code}");
            }
            // A transposed residual is not laid out as the product: its add stays in a kernel.
            let ht = t(&[n, batch * seq], 5, dtype);
            let what = format!("h.t() + linear(x), x [{}, {k}], w [{n}, {k}]", batch * seq);
            let x2 = x.reshape(&[batch * seq, k]).unwrap();
            let code = agrees(&|t| t[3].t()?.add(&t[0].linear(&t[1], Some(&t[2]))?), &[x2, w, b, ht], &what);
            assert!(!code.call.contains("residual = ") && code.kernel_names().len() == 1, "{what}, {dtype}:\n{code}");
        }
    }
}
