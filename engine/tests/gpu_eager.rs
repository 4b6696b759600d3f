//! CUDA eager ops against the float64 reference, on random shapes chosen to trip GPU kernels:
//! sizes that are not multiples of 4 (vector tails), long rows (split reductions), broadcasts,
//! transposed, strided, misaligned and stride-0 views, every dim of every reduction.
//!
//! Each test starts by asking whether CUDA can run here; where it cannot, it prints
//! `skipped: <reason>` to the terminal (past the test harness's capture) and passes, so CPU-only
//! CI stays green while showing what it did not check.

mod common;

use common::gpu;
use common::reference::{self, RefTensor};
use common::{Layout, all_layouts, assert_close, make_on};
use engine::backends::{AotEager, Eager};
use engine::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use engine::{DType, Device, Error, SourceLocation, Tensor, dynamo};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Runs a property over `cases` random inputs, shrinking any failure to a small example.
fn check<S: Strategy>(cases: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut runner = TestRunner::new(Config { cases, ..Config::default() });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// Shapes from scalars to rank 4, plus long and wide ones whose sizes are rarely multiples of 4.
fn shapes() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        3 => prop::collection::vec(1usize..8, 0..=4),
        1 => (1usize..5000).prop_map(|n| vec![n]),
        1 => (1usize..80, 1usize..80).prop_map(|(a, b)| vec![a, b]),
    ]
}

/// A shape and one that broadcasts against it (some dims set to 1, some leading dims dropped).
fn broadcast_pairs() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    shapes()
        .prop_flat_map(|shape| {
            let rank = shape.len();
            (Just(shape), prop::collection::vec(any::<bool>(), rank), 0..=rank)
        })
        .prop_map(|(shape, ones, drop)| {
            let partner = shape.iter().zip(&ones).map(|(&s, &one)| if one { 1 } else { s }).skip(drop).collect();
            (shape, partner)
        })
}

/// A tensor of `shape` on `device` in `layout`, with seeded normal values passed through `domain`.
fn operand(shape: &[usize], layout: Layout, seed: u64, device: Device, domain: Domain) -> (Tensor, RefTensor) {
    let data: Vec<f32> = Tensor::randn(shape, seed).to_vec().unwrap().into_iter().map(domain).collect();
    make_on(&data, shape, layout, device)
}

/// Maps a standard normal draw into an op's domain.
type Domain = fn(f32) -> f32;

fn identity(x: f32) -> f32 {
    x
}

fn positive(x: f32) -> f32 {
    x.abs() + 0.1
}

fn away_from_zero(x: f32) -> f32 {
    x.signum() * (x.abs() + 0.5)
}

/// Values on a coarse grid, so that comparisons meet equal elements.
fn coarse(x: f32) -> f32 {
    (x * 2.0).round() / 2.0
}

fn fail(e: Error) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

fn apply(op: Op, operands: &[engine::Operand]) -> Result<Tensor, TestCaseError> {
    op.apply(operands, SourceLocation::caller()).map_err(fail)
}

#[test]
fn gpu_unary_ops_match_the_reference() {
    let Some(gpu) = gpu() else { return };
    check(32, (shapes(), all_layouts(), any::<u64>()), |(shape, layout, seed)| {
        for op in UnaryOp::ALL {
            let domain = if matches!(op, UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt) { positive } else { identity };
            let (x, rx) = operand(&shape, layout, seed, gpu, domain);
            let y = apply(Op::Unary(op), &[(&x).into()])?;
            prop_assert_eq!(y.device(), gpu);
            assert_close(&y, &rx.map(|v| reference::unary(op, v)), None, 2e-6, 1e-6);
        }
        Ok(())
    });
}

#[test]
fn gpu_binary_ops_broadcast_like_the_reference() {
    let Some(gpu) = gpu() else { return };
    let cases = (broadcast_pairs(), any::<bool>(), all_layouts(), all_layouts(), any::<u64>(), any::<bool>());
    check(32, cases, |((a_shape, b_shape), swap, a_layout, b_layout, seed, scalar)| {
        let (a_shape, b_shape) = if swap { (b_shape, a_shape) } else { (a_shape, b_shape) };
        for op in BinaryOp::ALL {
            let (a_domain, b_domain): (Domain, Domain) = match op {
                BinaryOp::Pow => (positive, identity),
                BinaryOp::Div => (identity, away_from_zero),
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum => {
                    (identity, identity)
                }
                _ => (coarse, coarse),
            };
            let (a, ra) = operand(&a_shape, a_layout, seed, gpu, a_domain);
            let (y, want) = if scalar {
                let s = b_domain(0.75);
                (apply(Op::Binary(op), &[(&a).into(), s.into()])?, ra.map(|v| reference::binary(op, v, s as f64)))
            } else {
                let (b, rb) = operand(&b_shape, b_layout, seed ^ 1, gpu, b_domain);
                let want = RefTensor::zip(&[&ra, &rb], |v| reference::binary(op, v[0], v[1]));
                (apply(Op::Binary(op), &[(&a).into(), (&b).into()])?, want)
            };
            assert_close(&y, &want, None, 4e-6, 1e-6);
        }
        Ok(())
    });
}

#[test]
fn gpu_where_selects_like_the_reference() {
    let Some(gpu) = gpu() else { return };
    check(32, (broadcast_pairs(), all_layouts(), any::<u64>()), |((shape, partner), layout, seed)| {
        let (c, rc) = operand(&partner, Layout::Contiguous, seed, gpu, identity);
        let (a, ra) = operand(&shape, layout, seed ^ 2, gpu, identity);
        let y = c.gt(0.0).map_err(fail)?.where_(&a, -1.5).map_err(fail)?;
        assert_close(&y, &RefTensor::zip(&[&rc, &ra], |v| if v[0] > 0.0 { v[1] } else { -1.5 }), None, 0.0, 0.0);
        Ok(())
    });
}

/// `kind` over `dim` of `x`, checked against the reference with the sum of magnitudes as scale.
fn check_reduction(x: &Tensor, rx: &RefTensor, kind: ReduceOp, dim: usize, keepdim: bool) -> Result<(), TestCaseError> {
    let y = match kind {
        ReduceOp::Sum => x.sum(dim as isize, keepdim),
        ReduceOp::Mean => x.mean(dim as isize, keepdim),
        ReduceOp::Max => x.amax(dim as isize, keepdim),
    }
    .map_err(fail)?;
    assert_close(&y, &rx.reduce(kind, dim, keepdim), Some(&rx.abs().reduce(kind, dim, keepdim)), 1e-5, 1e-6);
    Ok(())
}

#[test]
fn gpu_reductions_match_the_reference_on_every_dim() {
    let Some(gpu) = gpu() else { return };
    let cases = (shapes().prop_filter("rank >= 1", |s| !s.is_empty()), all_layouts(), any::<u64>(), any::<bool>());
    check(32, cases, |(shape, layout, seed, keepdim)| {
        let (x, rx) = operand(&shape, layout, seed, gpu, identity);
        for dim in 0..shape.len() {
            for kind in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
                check_reduction(&x, &rx, kind, dim, keepdim)?;
            }
        }
        Ok(())
    });
}

/// Large reductions take the split path (partial results, then a second launch) and the widest
/// launch configurations; each is checked once.
#[test]
fn gpu_large_reductions_split_and_stay_exact() {
    let Some(gpu) = gpu() else { return };
    for (shape, dim) in [(vec![3, 1_000_003], 1), (vec![1_000_003, 3], 0), (vec![1024, 3001], 0), (vec![1024, 3001], 1)]
    {
        let (x, rx) = operand(&shape, Layout::Contiguous, 7, gpu, identity);
        for kind in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
            check_reduction(&x, &rx, kind, dim, true).unwrap();
        }
    }
    let (x, rx) = operand(&[5_000_001], Layout::Misaligned, 3, gpu, identity);
    let scale = rx.abs().reduce(ReduceOp::Sum, 0, false);
    assert_close(&x.sum_all().unwrap(), &rx.reduce(ReduceOp::Sum, 0, false), Some(&scale), 1e-5, 1e-6);
}

#[test]
fn gpu_amax_propagates_nan_like_the_cpu() {
    let Some(gpu) = gpu() else { return };
    for device in [Device::Cpu, gpu] {
        let x = Tensor::from_vec(vec![1.0, f32::NAN, 3.0, 0.0, -1.0, 2.0], &[2, 3]).unwrap().to(device).unwrap();
        let rows = x.amax(1, false).unwrap().to_vec().unwrap();
        assert!(rows[0].is_nan() && rows[1] == 2.0, "{device}: {rows:?}");
        let columns = x.amax(0, false).unwrap().to_vec().unwrap();
        assert!(columns[1].is_nan() && columns[0] == 1.0 && columns[2] == 3.0, "{device}: {columns:?}");
    }
}

#[test]
fn gpu_softmax_and_layer_norm_match_the_reference() {
    let Some(gpu) = gpu() else { return };
    let cases = (shapes().prop_filter("rank >= 1", |s| !s.is_empty()), all_layouts(), any::<u64>());
    check(32, cases, |(shape, layout, seed)| {
        let (x, rx) = operand(&shape, layout, seed, gpu, |v| 3.0 * v);
        for dim in 0..shape.len() {
            assert_close(&x.softmax(dim as isize).map_err(fail)?, &rx.softmax(dim, false), None, 1e-5, 1e-6);
            assert_close(&x.log_softmax(dim as isize).map_err(fail)?, &rx.softmax(dim, true), None, 1e-5, 1e-5);
        }
        let d = *shape.last().unwrap();
        let (w, rw) = operand(&[d], Layout::Contiguous, seed ^ 3, gpu, identity);
        let (b, rb) = operand(&[d], Layout::Misaligned, seed ^ 4, gpu, identity);
        let y = x.layer_norm(&w, &b, 1e-5).map_err(fail)?;
        // Rounding x and its mean moves the result by (|x| + |mean|) / std * |w|: large for
        // nearly constant rows, such as broadcast ones.
        let last = shape.len() - 1;
        let mean = rx.reduce(ReduceOp::Mean, last, true);
        let var = RefTensor::zip(&[&rx, &mean], |v| (v[0] - v[1]).powi(2)).reduce(ReduceOp::Mean, last, true);
        let scale = RefTensor::zip(&[&rx, &mean, &var, &rw, &rb], |v| {
            (v[0].abs() + v[1].abs()) / (v[2] + 1e-5).sqrt() * v[3].abs() + v[4].abs() + 1.0
        });
        assert_close(&y, &rx.layer_norm(&rw, &rb, 1e-5), Some(&scale), 1e-4, 0.0);
        Ok(())
    });
}

#[test]
fn gpu_softmax_of_masked_rows_matches_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let inf = f32::NEG_INFINITY;
    let x = Tensor::from_vec(vec![inf, 0.0, inf, 0.0, inf, inf, inf, inf], &[2, 4]).unwrap();
    let cpu = x.softmax(-1).unwrap().to_vec().unwrap();
    let on_gpu = x.to(gpu).unwrap().softmax(-1).unwrap().to_vec().unwrap();
    assert_eq!(&on_gpu[..4], &[0.0, 0.5, 0.0, 0.5]);
    assert!(on_gpu[4..].iter().all(|v| v.is_nan()) && cpu[4..].iter().all(|v| v.is_nan()), "{on_gpu:?}");
}

/// Matrix shapes with broadcast batch dims (on either side), each operand in any layout.
fn matmul_cases() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Layout, Layout)> {
    let batch = prop::collection::vec(1usize..4, 0..=2);
    (batch, 1usize..40, 1usize..70, 1usize..40, all_layouts(), all_layouts(), any::<bool>())
        .prop_flat_map(|(batch, m, k, n, la, lb, swap)| {
            let rank = batch.len();
            (Just(batch), prop::collection::vec(any::<bool>(), rank), 0..=rank, Just((m, k, n, la, lb, swap)))
        })
        .prop_map(|(batch, ones, drop, (m, k, n, la, lb, swap))| {
            let other: Vec<usize> =
                batch.iter().zip(&ones).map(|(&s, &one)| if one { 1 } else { s }).skip(drop).collect();
            let (ba, bb) = if swap { (other, batch) } else { (batch, other) };
            ([ba, vec![m, k]].concat(), [bb, vec![k, n]].concat(), la, lb)
        })
}

#[test]
fn gpu_matmul_matches_the_reference() {
    let Some(gpu) = gpu() else { return };
    check(48, (matmul_cases(), any::<u64>()), |((a_shape, b_shape, a_layout, b_layout), seed)| {
        let (a, ra) = operand(&a_shape, a_layout, seed, gpu, identity);
        let (b, rb) = operand(&b_shape, b_layout, seed ^ 5, gpu, identity);
        assert_close(&a.matmul(&b).map_err(fail)?, &ra.matmul(&rb), Some(&ra.abs().matmul(&rb.abs())), 1e-5, 1e-6);
        Ok(())
    });
}

#[test]
fn gpu_matmul_with_an_empty_inner_dim_is_zero() {
    let Some(gpu) = gpu() else { return };
    let a = Tensor::zeros(&[3, 0]).to(gpu).unwrap();
    let b = Tensor::zeros(&[0, 2]).to(gpu).unwrap();
    assert_eq!(a.matmul(&b).unwrap().to_vec().unwrap(), vec![0.0; 6]);
}

#[test]
fn gpu_transfers_and_views_round_trip() {
    let Some(gpu) = gpu() else { return };
    let x = Tensor::randn(&[5, 7, 3], 11);
    let on_gpu = x.to(gpu).unwrap();
    assert_eq!(on_gpu.device(), gpu);
    assert_eq!(on_gpu.to(Device::Cpu).unwrap().to_vec().unwrap(), x.to_vec().unwrap());
    let view = |t: &Tensor| t.permute(&[2, 0, 1]).unwrap().slice(1, 1, 5, 2).unwrap();
    assert_eq!(view(&on_gpu).to_vec().unwrap(), view(&x).to_vec().unwrap());
    assert_eq!(view(&on_gpu).contiguous().unwrap().to_vec().unwrap(), view(&x).to_vec().unwrap());
    assert_eq!(view(&on_gpu).to(Device::Cpu).unwrap().to_vec().unwrap(), view(&x).to_vec().unwrap());
    assert_eq!(Tensor::scalar(2.5).to(gpu).unwrap().item().unwrap(), 2.5);
    assert!(format!("{}", Tensor::arange(3).to(gpu).unwrap()).starts_with("tensor([0.0000, 1.0000, 2.0000"));
    let empty = Tensor::zeros(&[0, 4]).to(gpu).unwrap();
    assert_eq!(empty.exp().unwrap().sum(0, false).unwrap().to_vec().unwrap(), vec![0.0; 4]);
}

#[test]
fn gpu_errors_name_the_devices() {
    let Some(gpu) = gpu() else { return };
    let err = Tensor::ones(&[2]).add(&Tensor::ones(&[2]).to(gpu).unwrap()).unwrap_err();
    assert!(matches!(err, Error::DeviceMismatch { .. }) && err.to_string().contains("cpu and cuda:0"), "{err}");
    let missing = Tensor::ones(&[2]).to(Device::Cuda(1000)).unwrap_err();
    assert!(
        matches!(missing, Error::DeviceUnavailable { .. }) && missing.to_string().contains("cuda:1000"),
        "{missing}"
    );
}

#[test]
fn gpu_backends_agree_with_cpu_eager() {
    let Some(gpu) = gpu() else { return };
    let (w1, b1, w2) = (Tensor::randn(&[32, 16], 1), Tensor::randn(&[32], 2), Tensor::randn(&[8, 32], 3));
    let forward = |x: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor| -> engine::Result<Tensor> {
        x.linear(w1, Some(b1))?.gelu()?.linear(w2, None)?.log_softmax(-1)
    };
    let x = Tensor::randn(&[4, 16], 4);
    let want = forward(&x, &w1, &b1, &w2).unwrap().to_vec().unwrap();
    let want = RefTensor::new(vec![4, 8], want.iter().map(|&v| v as f64).collect());
    let on = |t: &Tensor| t.to(gpu).unwrap();
    let (gx, gw1, gb1, gw2) = (on(&x), on(&w1), on(&b1), on(&w2));
    let eager = dynamo::compile(|x: Tensor| forward(&x, &gw1, &gb1, &gw2)).backend(Eager);
    let aot = dynamo::compile(|x: Tensor| forward(&x, &gw1, &gb1, &gw2)).backend(AotEager);
    for y in [eager.call(&gx).unwrap(), aot.call(&gx).unwrap()] {
        assert_eq!(y.device(), gpu);
        assert_close(&y, &want, None, 1e-4, 1e-4);
    }
}

#[test]
fn gpu_custom_ops_run_their_cuda_source() {
    let Some(gpu) = gpu() else { return };
    let blend = engine::dynamo::CustomOp::elementwise("gpu_test::blend", 2)
        .c_source("float blend(float a, float b) { return a > b ? a - 0.5f * b : 0.25f * a * b; }")
        .cuda_source("__device__ float blend(float a, float b) { return a > b ? a - 0.5f * b : 0.25f * a * b; }")
        .register()
        .unwrap();
    let (a, b) = (Tensor::randn(&[37, 1], 1), Tensor::randn(&[6], 2));
    let cpu = blend.call(&[&a, &b]).unwrap().to_vec().unwrap();
    let on_gpu = blend.call(&[&a.to(gpu).unwrap(), &b.to(gpu).unwrap()]).unwrap();
    assert_eq!((on_gpu.device(), on_gpu.shape()), (gpu, &[37usize, 6][..]));
    let want = RefTensor::new(vec![37, 6], cpu.iter().map(|&v| v as f64).collect());
    assert_close(&on_gpu, &want, None, 1e-6, 1e-6);
    let c_only = engine::dynamo::CustomOp::elementwise("gpu_test::twice", 1)
        .c_source("float twice(float x) { return 2.0f * x; }")
        .register()
        .unwrap();
    let err = c_only.call(&[&a.to(gpu).unwrap()]).unwrap_err();
    assert!(matches!(err, Error::Cuda { .. }) && err.to_string().contains("has no CUDA source"), "{err}");
}

#[test]
fn gpu_kernel_modules_are_cached_on_disk() {
    let Some(gpu) = gpu() else { return };
    let Device::Cuda(ordinal) = gpu else { unreachable!() };
    let device = engine::device::cuda::CudaDevice::get(ordinal).unwrap();
    // A source no earlier run compiled: NVRTC runs now, then the in-process cache answers.
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let source = format!("// {stamp}\nextern \"C\" __global__ void twice(float* x) {{ x[threadIdx.x] *= 2.0f; }}\n");
    let module = device.load(&source).unwrap();
    assert!(module.compiled_now() && module.cubin_path().exists());
    module.function("twice").unwrap();
    assert!(std::sync::Arc::ptr_eq(&module, &device.load(&source).unwrap()));
    let arch = device.facts().arch();
    assert!(
        !engine::device::cuda::nvrtc::compile_cubin(&source, &arch).unwrap().compiled,
        "second build hits the disk cache"
    );
    let err = device.load("extern \"C\" __global__ void broken( {}").unwrap_err();
    assert!(matches!(err, Error::Compile { .. }) && err.to_string().contains("error"), "{err}");
}

/// Seeding copies every eager family from another cache into the global one, compiling into the
/// other cache only what it lacks: afterwards each family is a disk-cache hit here.
#[test]
fn eager_families_are_seeded_from_another_cache() {
    let Some(gpu) = gpu() else { return };
    let Device::Cuda(ordinal) = gpu else { unreachable!() };
    let arch = engine::device::cuda::CudaDevice::get(ordinal).unwrap().facts().arch();
    let families = engine::device::cuda::eager_families();
    let other = std::env::temp_dir().join(format!("seeded-from-{}", std::process::id()));
    let from = engine::codecache::DiskCache::at(other.clone());
    let first = engine::device::cuda::nvrtc::seed_eager_families(&from, &arch).unwrap();
    assert_eq!((first.compiled, first.cached), (families.len(), 0), "the other cache started empty");
    let again = engine::device::cuda::nvrtc::seed_eager_families(&from, &arch).unwrap();
    assert_eq!((again.compiled, again.cached), (0, families.len()), "the second seeding compiles nothing");
    for family in &families {
        let source = engine::device::cuda::eager_source(family).unwrap();
        let hit = !engine::device::cuda::nvrtc::compile_cubin(&source, &arch).unwrap().compiled;
        assert!(hit, "eager family {family} is in the global cache after seeding");
    }
    let _ = std::fs::remove_dir_all(other);
}

/// Runs everywhere: without a GPU the engine explains itself and stays on the CPU; with one, the
/// probe describes it.
#[test]
fn without_a_gpu_the_engine_says_why_and_stays_on_the_cpu() {
    let probe = engine::device::cuda::probe();
    match probe.usable() {
        Err(reason) => {
            assert!(!reason.contains('\n') && !reason.is_empty());
            assert_eq!(Device::cuda_if_available(), Device::Cpu);
            let err = Tensor::ones(&[2]).to(Device::Cuda(0)).unwrap_err();
            assert!(matches!(&err, Error::DeviceUnavailable { reason: r, .. } if r == reason), "{err}");
            assert_eq!(Tensor::ones(&[2]).add(1.0).unwrap().to_vec().unwrap(), vec![2.0, 2.0]);
        }
        Ok(()) => {
            let facts = probe.device(0).expect("a usable probe has a device");
            assert!(facts.compute_capability.0 >= 5 && facts.total_memory > 0, "{facts:?}");
            assert_eq!(Device::cuda_if_available(), Device::Cuda(0));
        }
    }
}

/// The half-precision dtypes.
const HALF: [engine::DType; 2] = [engine::DType::F16, engine::DType::BF16];

/// The same op on the GPU and on the CPU, from the same rounded inputs: both widen, compute in
/// float32 and round once, so they agree to within a unit or two of the dtype's last place (the
/// GPU's `expf` is not the CPU's vector math). In float32 those differences, not the result's
/// rounding, set the bound, and they scale with the operands (of order one in these tests) where
/// a result cancels to near zero: 1e-5, the float32 tests' tolerance, of the result or of one.
fn gpu_matches_cpu(gpu: &Tensor, cpu: &Tensor, what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(gpu.dtype(), cpu.dtype(), "{}", what);
    let (g, c) = (gpu.to_vec().map_err(fail)?, cpu.to_vec().map_err(fail)?);
    let (eps, floor) = if cpu.dtype() == DType::F32 { (1e-5, 1.0) } else { (2.0 * cpu.dtype().epsilon(), 1e-3) };
    for (i, (x, y)) in g.iter().zip(&c).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= eps * (y.abs() + floor);
        prop_assert!(ok, "{}: element {} is {} on the GPU, {} on the CPU", what, i, x, y);
    }
    Ok(())
}

#[test]
fn gpu_every_eager_kernel_matches_the_cpu_in_half_precision() {
    let Some(gpu) = gpu() else { return };
    check(24, (broadcast_pairs(), all_layouts(), any::<u64>(), 0usize..2), |((shape, partner), layout, seed, d)| {
        let dtype = HALF[d];
        let on = |t: &Tensor| t.to(gpu).unwrap();
        let (x, _) =
            common::make_typed(&Tensor::randn(&shape, seed).to_vec().unwrap(), &shape, layout, Device::Cpu, dtype);
        let (y, _) = common::make_typed(
            &Tensor::randn(&partner, seed ^ 1).to_vec().unwrap(),
            &partner,
            Layout::Contiguous,
            Device::Cpu,
            dtype,
        );
        let (gx, gy) = (on(&x), on(&y));
        for op in UnaryOp::ALL {
            let (g, c) = (apply(Op::Unary(op), &[(&gx).into()])?, apply(Op::Unary(op), &[(&x).into()])?);
            gpu_matches_cpu(&g, &c, op.name())?;
        }
        for op in BinaryOp::ALL {
            let (g, c) = (
                apply(Op::Binary(op), &[(&gx).into(), (&gy).into()])?,
                apply(Op::Binary(op), &[(&x).into(), (&y).into()])?,
            );
            gpu_matches_cpu(&g, &c, op.name())?;
        }
        // Mixed dtypes promote to f32 on both devices.
        let wide = y.to_dtype(engine::DType::F32).map_err(fail)?;
        gpu_matches_cpu(&gx.add(&on(&wide)).map_err(fail)?, &x.add(&wide).map_err(fail)?, "add bf16 + f32")?;
        gpu_matches_cpu(
            &gx.gt(0.0).map_err(fail)?.where_(&gx, &gy).map_err(fail)?,
            &x.gt(0.0).map_err(fail)?.where_(&x, &y).map_err(fail)?,
            "where",
        )?;
        for dim in 0..shape.len() as isize {
            gpu_matches_cpu(&gx.sum(dim, true).map_err(fail)?, &x.sum(dim, true).map_err(fail)?, "sum")?;
            gpu_matches_cpu(&gx.mean(dim, false).map_err(fail)?, &x.mean(dim, false).map_err(fail)?, "mean")?;
            gpu_matches_cpu(&gx.amax(dim, true).map_err(fail)?, &x.amax(dim, true).map_err(fail)?, "amax")?;
            gpu_matches_cpu(&gx.softmax(dim).map_err(fail)?, &x.softmax(dim).map_err(fail)?, "softmax")?;
            gpu_matches_cpu(&gx.log_softmax(dim).map_err(fail)?, &x.log_softmax(dim).map_err(fail)?, "log_softmax")?;
            gpu_matches_cpu(
                &engine::Tensor::cat(&[&gx, &gx], dim).map_err(fail)?,
                &engine::Tensor::cat(&[&x, &x], dim).map_err(fail)?,
                "cat",
            )?;
        }
        if let Some(&d) = shape.last() {
            let (w, b) = (Tensor::uniform_dtype(&[d], 0.5, 1.5, seed, dtype), Tensor::uniform(&[d], -1.0, 1.0, seed));
            gpu_matches_cpu(
                &gx.layer_norm(&on(&w), &on(&b), 1e-5).map_err(fail)?,
                &x.layer_norm(&w, &b, 1e-5).map_err(fail)?,
                "layer_norm",
            )?;
        }
        for to in
            [engine::DType::F32, engine::DType::F16, engine::DType::BF16, engine::DType::F8E4M3, engine::DType::F8E5M2]
        {
            gpu_matches_cpu(&gx.to_dtype(to).map_err(fail)?, &x.to_dtype(to).map_err(fail)?, "to_dtype")?;
        }
        gpu_matches_cpu(&gx.contiguous().map_err(fail)?, &x.contiguous().map_err(fail)?, "contiguous")?;
        Ok(())
    });
}

/// Each family of `kernels/eager.cu` in each compute dtype, which runs the kernels instantiated
/// for that dtype (`binary_add_bf16`), and with mixed dtypes, which runs the instance reading each
/// operand's dtype at run time (`binary_add`), against the CPU: dense, scalar and broadcast
/// operands, transposed views, rows whose length is not a multiple of 4, reductions over rows,
/// columns and split rows, softmax over rows and columns. Values on a grid of halves keep sums
/// exact in any order.
#[test]
fn gpu_every_dtype_instance_and_mixed_dtypes_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let Device::Cuda(ordinal) = gpu else { unreachable!("gpu() names a CUDA device") };
    let device = engine::device::cuda::CudaDevice::get(ordinal).unwrap();
    let grid = |shape: &[usize], seed: u64, dtype: DType| {
        let data = Tensor::randn(shape, seed).to_vec().unwrap().into_iter().map(coarse).collect();
        Tensor::from_vec(data, shape).unwrap().to_dtype(dtype).unwrap()
    };
    // `f` of CPU tensors, and of the same tensors moved to the GPU.
    let same = |what: &str, inputs: &[&Tensor], f: &dyn Fn(&[Tensor]) -> engine::Result<Tensor>| {
        let cpu: Vec<Tensor> = inputs.iter().map(|&t| t.clone()).collect();
        let on_gpu: Vec<Tensor> = inputs.iter().map(|t| t.to(gpu).unwrap()).collect();
        let (g, c) = (f(&on_gpu).unwrap(), f(&cpu).unwrap());
        gpu_matches_cpu(&g, &c, &format!("{what} in {:?}", inputs.iter().map(|t| t.dtype()).collect::<Vec<_>>()))
            .unwrap();
    };
    let loaded = |families: &[String]| {
        let loaded = device.loaded_eager_families();
        for family in families {
            assert!(loaded.contains(family), "{family} ran, so it is loaded: {loaded:?}");
        }
    };
    for dtype in DType::COMPUTE {
        let (x, odd, long) = (grid(&[37, 64], 1, dtype), grid(&[37, 63], 2, dtype), grid(&[2, 30_001], 3, dtype));
        let (row, odd_row) = (grid(&[64], 4, dtype), grid(&[63], 5, dtype));
        let (w, odd_w) =
            (Tensor::uniform_dtype(&[64], 0.5, 1.5, 6, dtype), Tensor::uniform_dtype(&[63], 0.5, 1.5, 7, dtype));
        same("exp", &[&x], &|t| t[0].exp());
        same("exp, with a tail", &[&odd], &|t| t[0].exp());
        same("add, broadcast", &[&x, &row], &|t| t[0].add(&t[1]));
        same("add, broadcast with a tail", &[&odd, &odd_row], &|t| t[0].add(&t[1]));
        same("mul, transposed", &[&x], &|t| t[0].t()?.mul(&t[0].t()?));
        same("mul by a scalar", &[&x], &|t| t[0].mul(0.5));
        same("where", &[&x, &row], &|t| t[0].gt(0.0)?.where_(&t[0], &t[1]));
        same("contiguous", &[&x], &|t| t[0].t()?.contiguous());
        for dim in [0, 1] {
            same("sum", &[&x], &|t| t[0].sum(dim, false));
            same("sum with a tail", &[&odd], &|t| t[0].sum(dim, true));
            same("mean", &[&x], &|t| t[0].mean(dim, false));
            same("amax", &[&odd], &|t| t[0].amax(dim, false));
            same("softmax", &[&x], &|t| t[0].softmax(dim));
            same("log_softmax with a tail", &[&odd], &|t| t[0].log_softmax(dim));
        }
        same("sum of long rows, split", &[&long], &|t| t[0].sum(1, false));
        same("layer_norm", &[&x, &w, &row], &|t| t[0].layer_norm(&t[1], &t[2], 1e-5));
        same("layer_norm with a tail", &[&odd, &odd_w, &odd_row], &|t| t[0].layer_norm(&t[1], &t[2], 1e-5));
        let families = ["unary_exp", "binary_add", "binary_mul", "where", "copy", "reduce", "softmax", "layer_norm"];
        loaded(&families.map(|family| format!("{family}_{}", dtype.name())));
    }
    for half in HALF {
        let (x, row, wide, wide_row) = (
            grid(&[37, 64], 8, half),
            grid(&[64], 9, half),
            grid(&[37, 64], 10, DType::F32),
            grid(&[64], 11, DType::F32),
        );
        let w = Tensor::uniform_dtype(&[64], 0.5, 1.5, 12, half);
        same("add", &[&x, &wide], &|t| t[0].add(&t[1]));
        same("add, broadcast", &[&x, &wide_row], &|t| t[0].add(&t[1]));
        same("where, a float32 condition", &[&wide, &x, &row], &|t| t[0].gt(0.0)?.where_(&t[1], &t[2]));
        same("to_dtype", &[&x], &|t| t[0].to_dtype(DType::F32));
        same("to_dtype", &[&wide], &|t| t[0].t()?.to_dtype(half));
        same("layer_norm, a float32 bias", &[&x, &w, &wide_row], &|t| t[0].layer_norm(&t[1], &t[2], 1e-5));
        loaded(&["binary_add", "where", "copy", "layer_norm"].map(String::from));
    }
}

#[test]
fn gpu_half_precision_matmul_runs_on_tensor_cores_within_tolerance() {
    let Some(gpu) = gpu() else { return };
    check(24, (matmul_cases(), any::<u64>(), 0usize..2), |((a_shape, b_shape, a_layout, b_layout), seed, d)| {
        let dtype = HALF[d];
        let (a, ra) = common::make_typed(
            &Tensor::uniform(&a_shape, -1.0, 1.0, seed).to_vec().unwrap(),
            &a_shape,
            a_layout,
            gpu,
            dtype,
        );
        let (b, rb) = common::make_typed(
            &Tensor::uniform(&b_shape, -1.0, 1.0, seed ^ 1).to_vec().unwrap(),
            &b_shape,
            b_layout,
            gpu,
            dtype,
        );
        let y = a.matmul(&b).map_err(fail)?;
        prop_assert_eq!(y.dtype(), dtype);
        let (rtol, atol) = common::tolerance(dtype);
        assert_close(&y, &ra.matmul(&rb), Some(&ra.abs().matmul(&rb.abs())), rtol, atol);
        Ok(())
    });
}

#[test]
fn gpu_fp8_scaled_mm_matches_the_float32_product_of_its_scaled_inputs() {
    use engine::DType;
    let Some(gpu) = gpu() else { return };
    let (m, k, n) = (64, 128, 96);
    let a = Tensor::randn(&[m, k], 1);
    let w = Tensor::randn(&[n, k], 2);
    // Per-tensor scales that map each matrix's largest magnitude near e4m3's largest value.
    let amax = |t: &Tensor| t.abs().unwrap().reshape(&[t.numel()]).unwrap().amax(0, false).unwrap().item().unwrap();
    let (sa, sw) = (amax(&a) / 448.0, amax(&w) / 448.0);
    let a8 = a.div(sa).unwrap().to_dtype(DType::F8E4M3).unwrap();
    let w8 = w.div(sw).unwrap().to_dtype(DType::F8E4M3).unwrap();
    // The float32 reference of what FP8 can represent: the rounded values, scaled back.
    let reference = a8
        .to_dtype(DType::F32)
        .unwrap()
        .mul(sa)
        .unwrap()
        .matmul(&w8.to_dtype(DType::F32).unwrap().mul(sw).unwrap().t().unwrap())
        .unwrap();
    let (scale_a, scale_w) = (Tensor::scalar(sa).to(gpu).unwrap(), Tensor::scalar(sw).to(gpu).unwrap());
    let result = a8.to(gpu).unwrap().scaled_mm(&w8.to(gpu).unwrap().t().unwrap(), &scale_a, &scale_w, DType::BF16);
    let facts = engine::device::cuda::probe().devices.as_ref().unwrap()[0].clone();
    if facts.compute_capability < (8, 9) {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        return;
    }
    let y = result.unwrap();
    assert_eq!((y.dtype(), y.shape()), (DType::BF16, &[m, n][..]));
    let (got, want) = (y.to_vec().unwrap(), reference.to_vec().unwrap());
    let scale = want.iter().fold(0.0f32, |s, v| s.max(v.abs()));
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-2 * scale, "scaled_mm {g}, float32 {w} (scale {scale})");
    }
    // A row-major right operand is transposed into the layout cuBLASLt takes; f32 output too.
    let row_major = w8.t().unwrap().contiguous().unwrap().to(gpu).unwrap();
    let y32 = a8.to(gpu).unwrap().scaled_mm(&row_major, &scale_a, &scale_w, DType::F32).unwrap().to_vec().unwrap();
    for (g, w) in y32.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-3 * scale, "scaled_mm {g}, float32 {w}");
    }
}

/// Flash attention of bf16 or f16 `q`, `k` and `v` ([2, heads, len, dim] on the GPU) against the
/// float32 math path on the same rounded inputs, under the mask that `mask` draws (0 none, 1 causal
/// where q_len <= kv_len, 2 boolean, 3 additive, random from `seed`).
fn half_attention_matches_the_math_path(
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    mask: usize,
    scale: Option<f32>,
    seed: u64,
    what: &str,
) -> Result<(), TestCaseError> {
    use engine::AttnMask;
    use engine::device::{Kernels, with_kernels};
    let (q_len, kv_len, dtype) = (q.shape()[2], k.shape()[2], q.dtype());
    let keep = Tensor::uniform(&[q_len, kv_len], 0.0, 1.0, seed ^ 3).gt(0.2).unwrap().to(q.device()).unwrap();
    let bias = Tensor::randn(&[q_len, kv_len], seed ^ 4).to(q.device()).unwrap();
    let (mask, causal) = match mask {
        0 => (None, false),
        1 => (None, q_len <= kv_len),
        2 => (Some(AttnMask::Boolean(&keep)), false),
        _ => (Some(AttnMask::Additive(&bias)), false),
    };
    let y = q.scaled_dot_product_attention(k, v, mask, causal, scale).map_err(fail)?;
    prop_assert_eq!((y.dtype(), y.shape()), (dtype, &[2, q.shape()[1], q_len, v.shape()[3]][..]));
    let wide = |t: &Tensor| t.to_dtype(engine::DType::F32).unwrap();
    let want =
        with_kernels(Kernels::Plain, || wide(q).scaled_dot_product_attention(&wide(k), &wide(v), mask, causal, scale))
            .map_err(fail)?;
    let (got, want) = (y.to_vec().map_err(fail)?, want.to_vec().map_err(fail)?);
    let (rtol, _) = common::tolerance(dtype);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        // Probabilities rounded to the dtype for the product with v: the dtype's tolerance,
        // relative to the values' scale (about 1).
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() as f64 <= rtol * (w.abs() as f64 + 1.0);
        prop_assert!(ok, "element {}: {} against float32 {} ({:?}, {})", i, g, w, dtype, what);
    }
    Ok(())
}

#[test]
fn gpu_half_precision_flash_attention_matches_the_float32_math_path() {
    let Some(gpu) = gpu() else { return };
    let cases = (
        1usize..4,
        1usize..200,
        1usize..200,
        prop_oneof![Just(16usize), Just(32), Just(64), Just(80), Just(128)],
        0usize..2,
        0usize..4,
        any::<u64>(),
    );
    check(32, cases, |(heads, q_len, kv_len, head_dim, d, mask, seed)| {
        let make = |len: usize, s: u64| Tensor::randn_dtype(&[2, heads, len, head_dim], s, HALF[d]).to(gpu).unwrap();
        let (q, k, v) = (make(q_len, seed), make(kv_len, seed ^ 1), make(kv_len, seed ^ 2));
        half_attention_matches_the_math_path((&q, &k, &v), mask, None, seed, &format!("head dim {head_dim}"))
    });
}

#[test]
fn gpu_half_precision_flash_attention_reads_any_layout_and_long_sequences() {
    // The bf16 and f16 kernel copies its tiles 16 bytes at a time where a head's rows are
    // contiguous and aligned (zero filling a last piece when the head dim is not a multiple of 8)
    // and element by element otherwise (a transposed head, a start one element off); it takes 128
    // queries a block and double buffers 64-key tiles, so lengths run past several of each and
    // are rarely multiples of either; causal blocks have tiles on and below the diagonal; the
    // value dim may differ from the head dim; an explicit scale may be negative.
    let Some(gpu) = gpu() else { return };
    let cases = (
        (1usize..4, prop_oneof![1usize..200, 200usize..700], prop_oneof![1usize..200, 200usize..700]),
        prop_oneof![Just(20usize), Just(32), Just(64), Just(100), Just(128)],
        prop_oneof![Just(None), Just(Some(24usize)), Just(Some(64))],
        0usize..4,
        0usize..2,
        0usize..4,
        prop_oneof![Just(None), Just(Some(0.3f32)), Just(Some(-0.2f32))],
        any::<u64>(),
    );
    check(32, cases, |((heads, q_len, kv_len), head_dim, value_dim, layout, d, mask, scale, seed)| {
        let dtype = HALF[d];
        let on = |t: Tensor| t.to(gpu).unwrap();
        // [2, heads, len, width] in the drawn layout, made on the GPU so the view stays a view.
        let make = |len: usize, width: usize, s: u64| match layout {
            0 => on(Tensor::randn_dtype(&[2, heads, len, width], s, dtype)),
            // Heads split from a projection's output: rows `heads * width` apart.
            1 => on(Tensor::randn_dtype(&[2, len, heads, width], s, dtype)).transpose(1, 2).unwrap(),
            // The same, starting one element into each row: not 16-byte aligned.
            2 => on(Tensor::randn_dtype(&[2, len, heads, width + 1], s, dtype))
                .slice(3, 1, width + 1, 1)
                .unwrap()
                .transpose(1, 2)
                .unwrap(),
            // A transposed head: neighbouring head-dim elements are `len` apart.
            _ => on(Tensor::randn_dtype(&[2, heads, width, len], s, dtype)).transpose(2, 3).unwrap(),
        };
        let value_dim = value_dim.unwrap_or(head_dim);
        let (q, k, v) =
            (make(q_len, head_dim, seed), make(kv_len, head_dim, seed ^ 1), make(kv_len, value_dim, seed ^ 2));
        let what = format!("layout {layout}, head dim {head_dim}, value dim {value_dim}, scale {scale:?}");
        half_attention_matches_the_math_path((&q, &k, &v), mask, scale, seed, &what)
    });
}

/// On compute capability 9.0 (an H100 or H200), bf16 and f16 attention with head dim 64 whose
/// rows the Hopper kernel can copy in 16-byte pieces (contiguous heads, heads split from a
/// projection) runs on `flash_attention_wgmma_*`, and matches the math path under every mask, at
/// lengths past several 64-query blocks and 64-key tiles and rarely multiples of either, with a
/// negative scale too; a head one element off its 16-byte boundary still takes the `mma.sync`
/// kernel.
#[test]
fn gpu_hopper_attention_runs_on_wgmma_and_matches_the_math_path() {
    let Some(gpu) = gpu() else { return };
    let Device::Cuda(ordinal) = gpu else { unreachable!("gpu() names a CUDA device") };
    let device = engine::device::cuda::CudaDevice::get(ordinal).unwrap();
    if device.facts().compute_capability != (9, 0) {
        return;
    }
    let cases = (
        (1usize..4, prop_oneof![1usize..70, 70usize..700], prop_oneof![1usize..70, 70usize..700]),
        0usize..3,
        0usize..2,
        0usize..4,
        prop_oneof![Just(None), Just(Some(-0.2f32))],
        any::<u64>(),
    );
    check(40, cases, |((heads, q_len, kv_len), layout, d, mask, scale, seed)| {
        let on = |t: Tensor| t.to(gpu).unwrap();
        let make = |len: usize, s: u64| match layout {
            0 => on(Tensor::randn_dtype(&[2, heads, len, 64], s, HALF[d])),
            1 => on(Tensor::randn_dtype(&[2, len, heads, 64], s, HALF[d])).transpose(1, 2).unwrap(),
            _ => on(Tensor::randn_dtype(&[2, len, heads, 65], s, HALF[d]))
                .slice(3, 1, 65, 1)
                .unwrap()
                .transpose(1, 2)
                .unwrap(),
        };
        let (q, k, v) = (make(q_len, seed), make(kv_len, seed ^ 1), make(kv_len, seed ^ 2));
        half_attention_matches_the_math_path((&q, &k, &v), mask, scale, seed, &format!("layout {layout}"))
    });
    let used = device.eager_module("attention").unwrap().loaded_functions();
    for name in ["flash_attention_wgmma_bf16_hd64", "flash_attention_wgmma_f16_hd64", "flash_attention_bf16_hd64"] {
        assert!(used.contains(&name.to_string()), "{name} ran: {used:?}");
    }
}

/// The gradients of `sum(f(inputs) * w)` with respect to every input, on `device`.
fn gradients_on(device: Device, inputs: &[Tensor], f: &dyn Fn(&[Tensor]) -> engine::Result<Tensor>) -> Vec<Vec<f32>> {
    let leaves: Vec<Tensor> = inputs.iter().map(|t| t.to(device).unwrap().requires_grad_(true)).collect();
    let out = f(&leaves).unwrap();
    let w = Tensor::uniform(out.shape(), -1.0, 1.0, 77).to(device).unwrap();
    out.mul(&w).unwrap().reshape(&[out.numel()]).unwrap().sum(0, false).unwrap().backward().unwrap();
    leaves.iter().map(|l| l.grad().map_or_else(|| vec![0.0; l.numel()], |g| g.to_vec().unwrap())).collect()
}

/// Gradients on the GPU equal the CPU's within f32 tolerance.
fn gradients_agree(
    device: Device,
    inputs: &[Tensor],
    f: &dyn Fn(&[Tensor]) -> engine::Result<Tensor>,
) -> Result<(), TestCaseError> {
    let (gpu_grads, cpu_grads) = (gradients_on(device, inputs, f), gradients_on(Device::Cpu, inputs, f));
    for (i, (g, c)) in gpu_grads.iter().zip(&cpu_grads).enumerate() {
        for (k, (a, b)) in g.iter().zip(c).enumerate() {
            prop_assert!((a - b).abs() <= 1e-4 + 1e-3 * b.abs(), "input {i} element {k}: gpu {a}, cpu {b}");
        }
    }
    Ok(())
}

#[test]
fn gpu_gradients_match_the_cpu() {
    // Every family of derivative formulas, run by the GPU's eager kernels.
    let Some(device) = gpu() else { return };
    let positive = |shape: &[usize], seed| Tensor::uniform(shape, 0.5, 2.0, seed);
    check(24, (1usize..6, 1usize..40, any::<u64>()), |(rows, cols, seed)| {
        let (x, y) = (positive(&[rows, cols], seed), positive(&[cols], seed + 1));
        for op in UnaryOp::ALL {
            gradients_agree(device, std::slice::from_ref(&x), &|t| {
                Op::Unary(op).apply(&[(&t[0]).into()], SourceLocation::caller())
            })?;
        }
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Pow] {
            gradients_agree(device, &[x.clone(), y.clone()], &|t| {
                Op::Binary(op).apply(&[(&t[0]).into(), (&t[1]).into()], SourceLocation::caller())
            })?;
        }
        gradients_agree(device, std::slice::from_ref(&x), &|t| {
            t[0].amax(1, false)?.add(&t[0].mean(0, true)?.sum(1, false)?)
        })?;
        gradients_agree(device, std::slice::from_ref(&x), &|t| t[0].softmax(-1)?.add(&t[0].log_softmax(0)?))?;
        gradients_agree(device, &[x.clone(), y.clone(), y.clone()], &|t| t[0].layer_norm(&t[1], &t[2], 1e-5))?;
        gradients_agree(device, std::slice::from_ref(&x), &|t| {
            t[0].t()?.slice(0, 1.min(cols - 1), cols, 2)?.contiguous()
        })?;
        let w = Tensor::uniform(&[7, cols], -1.0, 1.0, seed + 2);
        gradients_agree(device, &[x.clone(), w, Tensor::uniform(&[7], -1.0, 1.0, seed + 3)], &|t| {
            t[0].linear(&t[1], Some(&t[2]))?.gelu()
        })?;
        gradients_agree(device, std::slice::from_ref(&x), &|t| {
            t[0].cross_entropy(&Tensor::zeros(&[rows]).to(t[0].device())?)
        })?;
        Ok(())
    });
}

#[test]
fn gpu_attention_backward_matches_the_cpu() {
    // The flash-style backward kernels against the CPU's, on head dims up to 128, lengths that are
    // not multiples of 32, causal and masked attention, and heads split from a projection (q, k
    // and v read in place through their strides).
    let Some(device) = gpu() else { return };
    let cases = (
        1usize..70,
        1usize..70,
        prop_oneof![Just(8usize), Just(33), Just(64), Just(128)],
        0u8..4,
        any::<bool>(),
        any::<u64>(),
    );
    check(24, cases, |(l, s, e, masking, split, seed)| {
        let causal = masking == 1 && l <= s;
        let qkv = |len: usize, seed| {
            if split {
                // [2, len, 3 heads * e] viewed as [2, 3, len, e]: a transposed view.
                Tensor::uniform(&[2, len, 3 * e], -1.0, 1.0, seed)
                    .reshape(&[2, len, 3, e])
                    .unwrap()
                    .transpose(1, 2)
                    .unwrap()
            } else {
                Tensor::uniform(&[2, 3, len, e], -1.0, 1.0, seed)
            }
        };
        let (q, k, v) = (qkv(l, seed), qkv(s, seed + 1), qkv(s, seed + 2));
        let mask = Tensor::uniform(&[l, s], -1.0, 1.0, seed + 3);
        gradients_agree(device, &[q, k, v, mask], &|t| {
            // The mask is a constant: attention gives it no gradient.
            let (boolean, additive) = (t[3].detach().gt(-0.5)?, t[3].detach());
            let mask = match masking {
                2 => Some(engine::AttnMask::Boolean(&boolean)),
                3 => Some(engine::AttnMask::Additive(&additive)),
                _ => None,
            };
            t[0].scaled_dot_product_attention(&t[1], &t[2], mask, causal, None)
        })
    });
}

#[test]
fn gpu_parameters_update_in_place() {
    let Some(device) = gpu() else { return };
    let w = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap().to(device).unwrap().requires_grad_(true);
    let view = w.detach();
    let sgd = engine::optim::Sgd::new(std::slice::from_ref(&w), 0.5);
    engine::optim::Optimizer::zero_grad(&sgd);
    w.mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
    engine::optim::Optimizer::step(&sgd).unwrap();
    assert_eq!(view.to_vec().unwrap(), vec![0.0, 0.0, 0.0], "every handle sees w - 0.5 * 2w");
}

#[test]
fn gpu_moves_are_differentiable() {
    // `to(device)` is on the tape: the gradient of a CPU leaf used on the GPU comes back to it.
    let Some(device) = gpu() else { return };
    let w = Tensor::from_vec(vec![1.0, -2.0], &[2]).unwrap().requires_grad_(true);
    let on_gpu = w.to(device).unwrap();
    assert_eq!(on_gpu.grad_fn().as_deref(), Some("ToCopyBackward"));
    on_gpu.mul(&on_gpu).unwrap().sum_all().unwrap().backward().unwrap();
    let grad = w.grad().unwrap();
    assert_eq!(grad.device(), Device::Cpu);
    assert_eq!(grad.to_vec().unwrap(), vec![2.0, -4.0]);
}

#[test]
fn gpu_half_precision_gradients_match_the_cpu() {
    // Gradients of half-precision leaves come back in their dtype on both devices (the engine casts
    // each gradient to its input's dtype); attention's backward widens to float32 (the composed
    // path) on both, so they agree to the dtype's rounding.
    let Some(device) = gpu() else { return };
    check(8, (1usize..40, prop_oneof![Just(16usize), Just(64)], 0usize..2, any::<u64>()), |(l, e, d, seed)| {
        let dtype = HALF[d];
        let make = |seed| Tensor::uniform_dtype(&[2, 2, l, e], -1.0, 1.0, seed, dtype);
        let inputs = [make(seed), make(seed + 1), make(seed + 2)];
        let f = |t: &[Tensor]| t[0].scaled_dot_product_attention(&t[1], &t[2], None, true, None)?.gelu();
        let (g, c) = (gradients_on(device, &inputs, &f), gradients_on(Device::Cpu, &inputs, &f));
        let (rtol, _) = common::tolerance(dtype);
        for (i, (g, c)) in g.iter().zip(&c).enumerate() {
            let scale = c.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-3) as f64;
            for (a, b) in g.iter().zip(c) {
                prop_assert!(((a - b).abs() as f64) <= 4.0 * rtol * scale, "input {i}: gpu {a}, cpu {b} ({dtype})");
            }
        }
        Ok(())
    });
}

#[test]
fn gpu_wake_raises_the_clock_and_returns_at_once_when_it_is_up() {
    // The first wake may find an idle GPU; the second follows it at once, so the clock is up and
    // one 2 ms measurement says so. Both read back a clock no higher than the device's highest.
    let Some(device) = gpu() else { return };
    let limit = std::time::Duration::from_millis(300);
    let first = engine::bench::wake(device, limit).unwrap().expect("a GPU has a clock to wake");
    let second = engine::bench::wake(device, limit).unwrap().unwrap();
    let max = second.max_mhz.expect("the H100's driver reports its highest clock");
    for w in [first, second] {
        assert!(w.mhz > 100.0 && w.mhz <= 1.05 * max, "{w:?}");
    }
    assert!(first.raised() || first.took >= limit, "{first:?}");
    assert!(second.raised() && second.took < std::time::Duration::from_millis(50), "{second:?}");
}
