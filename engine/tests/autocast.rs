//! Autocast (`torch.autocast`): the op lists, the casts recorded into graphs, and compiled code
//! under autocast against eager under autocast.

mod common;

use engine::backends::Inductor;
use engine::precision::{AutocastGuard, autocast, autocast_state};
use engine::{DType, Device, Tensor, dynamo};

/// Held by the tests that change or depend on process-wide state (the float32 matmul precision).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn block(x: &Tensor, w: &Tensor, b: &Tensor, gamma: &Tensor, beta: &Tensor) -> engine::Result<Tensor> {
    let h = x.linear(w, Some(b))?.gelu()?;
    let scores = h.matmul(&h.t()?)?.mul(0.125)?.softmax(-1)?;
    scores.matmul(&h)?.layer_norm(gamma, beta, 1e-5)?.sum(-1, false)
}

#[test]
fn each_op_runs_in_its_lists_dtype() {
    let x = Tensor::randn(&[4, 8], 0);
    let w = Tensor::randn(&[8, 8], 1);
    autocast(Device::Cpu, Some(DType::BF16), || {
        let y = x.matmul(&w).unwrap();
        assert_eq!(y.dtype(), DType::BF16, "matmul is on the lower-precision list");
        assert_eq!(x.linear(&w, None).unwrap().dtype(), DType::BF16);
        assert_eq!(y.add(&y).unwrap().dtype(), DType::BF16, "pointwise ops keep their operands' dtype");
        assert_eq!(y.add(&x).unwrap().dtype(), DType::F32, "and promote as usual");
        assert_eq!(y.softmax(-1).unwrap().dtype(), DType::F32, "softmax runs in float32");
        assert_eq!(y.sum(-1, false).unwrap().dtype(), DType::F32, "so does sum");
        assert_eq!(y.mean(-1, false).unwrap().dtype(), DType::BF16, "mean is on no list");
        assert_eq!(y.exp().unwrap().dtype(), DType::F32);
        let q = x.reshape(&[1, 4, 8]).unwrap();
        assert_eq!(q.scaled_dot_product_attention(&q, &q, None, true, None).unwrap().dtype(), DType::BF16);
    });
    // Autocast for the GPU leaves CPU ops alone, and the state is restored after.
    autocast(Device::Cuda(0), Some(DType::F16), || assert_eq!(x.matmul(&w).unwrap().dtype(), DType::F32));
    assert!(autocast_state().is_off());
}

#[test]
fn guards_nest_and_restore() {
    let outer = AutocastGuard::enter(Device::Cpu, Some(DType::BF16));
    {
        let _inner = AutocastGuard::enter(Device::Cpu, None);
        assert_eq!(autocast_state().cpu, None, "enabled=False inside");
    }
    assert_eq!(autocast_state().cpu, Some(DType::BF16));
    drop(outer);
    assert!(autocast_state().is_off());
    // f32 is no autocast dtype: it means off.
    autocast(Device::Cpu, Some(DType::F32), || assert!(autocast_state().is_off()));
}

#[test]
fn compiled_code_under_autocast_records_the_casts_and_matches_eager() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (x, w, b) =
        (Tensor::randn(&[16, 32], 0), Tensor::randn(&[32, 32], 1).mul(0.2).unwrap(), Tensor::randn(&[32], 2));
    let (gamma, beta) = (Tensor::ones(&[32]), Tensor::zeros(&[32]));
    let f = |x: Tensor| block(&x, &w, &b, &gamma, &beta);
    let report = autocast(Device::Cpu, Some(DType::BF16), || dynamo::explain(f).call(&x)).unwrap();
    let graph = report.graphs[0].to_string();
    assert!(graph.contains("to_dtype(%arg0, dtype=bf16)") && graph.contains("dtype=f32)"), "{graph}");
    let compiled = dynamo::compile(f).backend(Inductor::default());
    let (got, expected) = autocast(Device::Cpu, Some(DType::BF16), || (compiled.call(&x), f(x.clone())));
    let (got, expected) = (got.unwrap(), expected.unwrap());
    assert_eq!((got.dtype(), expected.dtype()), (DType::F32, DType::F32));
    let (g, e) = (got.to_vec().unwrap(), expected.to_vec().unwrap());
    // Fused kernels round bf16 intermediates once, eager after every op: bf16's tolerance,
    // relative to the row sums' size.
    let scale = e.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1.0);
    for (a, b) in g.iter().zip(&e) {
        assert!((a - b).abs() <= 0.05 * scale, "compiled {a}, eager {b}");
    }
    // Without autocast the same function computes in float32, and differs from the bf16 run.
    let plain = f(x.clone()).unwrap().to_vec().unwrap();
    assert!(plain.iter().zip(&e).any(|(a, b)| a != b));
}

#[test]
fn gradients_come_back_in_each_inputs_dtype() {
    // Under autocast, float32 parameters are cast to bf16 for the product: the gradients flow
    // back through the casts and arrive in float32, as in PyTorch's mixed-precision training.
    let x = Tensor::randn(&[8, 16], 0);
    let w = Tensor::randn(&[4, 16], 1).requires_grad_(true);
    let b = Tensor::randn(&[4], 2).requires_grad_(true);
    let loss = autocast(Device::Cpu, Some(DType::BF16), || {
        let y = x.linear(&w, Some(&b)).unwrap();
        assert_eq!(y.dtype(), DType::BF16);
        y.softmax(-1).unwrap().mul(&Tensor::randn(&[8, 4], 3)).unwrap().sum_all().unwrap()
    });
    assert_eq!(loss.dtype(), DType::F32, "softmax runs in float32");
    loss.backward().unwrap();
    let (gw, gb) = (w.grad().unwrap(), b.grad().unwrap());
    assert_eq!((gw.dtype(), gb.dtype()), (DType::F32, DType::F32));
    // Against the same computation in float32 throughout: bf16's tolerance.
    let (w32, b32) = (w.detach().requires_grad_(true), b.detach().requires_grad_(true));
    let y = x.linear(&w32, Some(&b32)).unwrap();
    y.softmax(-1).unwrap().mul(&Tensor::randn(&[8, 4], 3)).unwrap().sum_all().unwrap().backward().unwrap();
    let (e, g) = (w32.grad().unwrap().to_vec().unwrap(), gw.to_vec().unwrap());
    let scale = e.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(g.iter().zip(&e).all(|(a, b)| (a - b).abs() <= 0.05 * scale), "{g:?}\n{e:?}");

    // A bf16 leaf in a float32 op (type promotion): its gradient is bf16.
    let h = Tensor::randn_dtype(&[6], 4, DType::BF16).requires_grad_(true);
    let z = h.mul(&Tensor::randn(&[6], 5)).unwrap();
    assert_eq!(z.dtype(), DType::F32);
    z.sum_all().unwrap().backward().unwrap();
    assert_eq!(h.grad().unwrap().dtype(), DType::BF16);
    // And through an explicit conversion.
    let k = Tensor::randn(&[6], 6).requires_grad_(true);
    k.to_dtype(DType::F16).unwrap().mul(2.0).unwrap().sum_all().unwrap().backward().unwrap();
    let gk = k.grad().unwrap();
    assert_eq!((gk.dtype(), gk.to_vec().unwrap()), (DType::F32, vec![2.0; 6]));
}

#[test]
fn half_precision_attention_gradients_match_float32() {
    // Attention's backward on bf16 and f16 operands (plain and tuned kernels) widens to float32
    // and rounds the gradients once: float32's gradients of the same rounded inputs, to the
    // dtype's tolerance.
    use engine::device::{Kernels, with_kernels};
    for dtype in [DType::BF16, DType::F16] {
        for kernels in [Kernels::Plain, Kernels::Tuned] {
            let make = |seed| Tensor::uniform_dtype(&[2, 3, 17, 16], -1.0, 1.0, seed, dtype);
            let leaves = [make(1), make(2), make(3)].map(|t| t.requires_grad_(true));
            let wide = leaves.clone().map(|t| t.detach().to_dtype(DType::F32).unwrap().requires_grad_(true));
            let run = |t: &[Tensor; 3]| {
                with_kernels(kernels, || {
                    let y = t[0].scaled_dot_product_attention(&t[1], &t[2], None, true, None).unwrap();
                    y.mul(&Tensor::uniform(y.shape(), -1.0, 1.0, 9)).unwrap().sum_all().unwrap().backward().unwrap();
                })
            };
            run(&leaves);
            run(&wide);
            for (half, wide) in leaves.iter().zip(&wide) {
                let (g, e) = (half.grad().unwrap(), wide.grad().unwrap().to_vec().unwrap());
                assert_eq!(g.dtype(), dtype);
                let scale = e.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let worst = g.to_vec().unwrap().iter().zip(&e).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                assert!(
                    worst <= 4.0 * dtype.epsilon() * scale,
                    "{dtype} {kernels:?}: differs by {worst} (scale {scale})"
                );
            }
        }
    }
}

/// `set_float32_matmul_precision` is process-wide, as in PyTorch: the GPU test that changes it runs
/// here, where no other test multiplies float32 matrices on the GPU, and holds this lock against the
/// test that compiles (whose guards read it).
#[test]
fn gpu_tf32_products_are_opt_in() {
    use engine::{MatmulPrecision, set_float32_matmul_precision};
    let Some(gpu) = common::gpu() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b) = (Tensor::randn(&[256, 512], 1).to(gpu).unwrap(), Tensor::randn(&[512, 256], 2).to(gpu).unwrap());
    let exact = a.matmul(&b).unwrap().to_vec().unwrap();
    set_float32_matmul_precision(MatmulPrecision::High);
    let tf32 = a.matmul(&b).unwrap().to_vec().unwrap();
    set_float32_matmul_precision(MatmulPrecision::Highest);
    let again = a.matmul(&b).unwrap().to_vec().unwrap();
    assert_eq!(exact, again, "highest is float32 again");
    // TF32 keeps 10 mantissa bits of each input: relative errors near 1e-3 of the sums' scale
    // (about sqrt(512) here), never bit-exact.
    let worst = exact.iter().zip(&tf32).map(|(e, t)| (e - t).abs()).fold(0.0f32, f32::max);
    assert!(worst > 0.0 && worst < 0.2, "TF32 differs from float32 by {worst}");
}

#[test]
fn the_float32_matmul_precision_is_a_guard() {
    // `set_float32_matmul_precision` changes what a float32 product computes on a GPU, so a graph
    // compiled under one setting is not reused under another (PyTorch's dynamo guards it too).
    use engine::logs::{self, Artifact};
    use engine::{MatmulPrecision, set_float32_matmul_precision};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = Tensor::randn(&[8, 8], 1);
    let f = dynamo::compile(|x: Tensor| x.matmul(&w)).name("product");
    let x = Tensor::randn(&[4, 8], 2);
    let ((), text) = logs::capture(&[Artifact::Recompiles], || {
        f.call(&x).unwrap();
        set_float32_matmul_precision(MatmulPrecision::High);
        f.call(&x).unwrap();
        set_float32_matmul_precision(MatmulPrecision::Highest);
        f.call(&x).unwrap();
    });
    assert!(text.contains("global state changed: float32 matmul precision was highest, now high"), "{text}");
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.cache_hits), (2, 1), "{text}");
}
