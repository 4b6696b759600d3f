//! Eager ops on each device against a float64 reference, on random shapes: sizes that are not
//! multiples of 4, broadcasts, strided and misaligned views, every dim of every reduction.
//!
//! Every property runs as `<name>::cpu` and `<name>::gpu`. A GPU test starts by asking whether
//! CUDA can run here; where it cannot, it prints `skipped: <reason>` to the terminal (past the
//! test harness's capture) and passes, so CPU-only CI stays green while showing what it did not
//! check.

mod reference;

use std::io::Write;

use engine::backends::{AotEager, Eager};
use engine::op::{BinaryOp, ReduceOp, UnaryOp};
use engine::{Device, Error, Tensor, dynamo};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reference::{Host, abs_sum, assert_close, pointwise_scale};

/// The GPU to test on, or `None` after printing why the test is skipped.
fn gpu() -> Option<Device> {
    match engine::device::cuda::unavailable_reason() {
        None => Some(Device::Cuda(0)),
        Some(reason) => {
            let _ = writeln!(std::io::stderr(), "skipped: {reason}");
            None
        }
    }
}

/// Declares `<name>::cpu` and `<name>::gpu` tests running `name(device)` on each device (the GPU
/// one skipped, saying why, where CUDA is unavailable).
macro_rules! on_each_device {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn cpu() {
                    super::$name(engine::Device::Cpu);
                }

                #[test]
                fn gpu() {
                    if let Some(device) = super::gpu() {
                        super::$name(device);
                    }
                }
            }
        )*
    };
}

on_each_device!(
    unary_ops_match_the_reference,
    binary_ops_broadcast_like_the_reference,
    where_selects_like_the_reference,
    reductions_match_the_reference_on_every_dim,
    large_reductions_split_and_stay_exact,
    softmax_and_layer_norm_match_the_reference,
    softmax_of_a_masked_row,
    matmul_matches_the_reference,
    matmul_with_an_empty_inner_dim_is_zero,
    transfers_and_views_round_trip
);

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

/// How a test operand is laid out in memory.
#[derive(Clone, Copy, Debug)]
enum View {
    /// Dense and aligned.
    Contiguous,
    /// The last two dims swapped: `base.transpose(-1, -2)`.
    Transposed,
    /// Every other element along dim 0.
    Strided,
    /// A dense run that starts one element into its buffer, so 16-byte loads cannot be used.
    Misaligned,
    /// Dim 0 broadcast from size 1 (stride 0).
    Expanded,
}

fn views() -> impl Strategy<Value = View> {
    prop_oneof![
        Just(View::Contiguous),
        Just(View::Transposed),
        Just(View::Strided),
        Just(View::Misaligned),
        Just(View::Expanded)
    ]
}

/// A tensor of `shape` on `device` laid out as `view` (when the shape allows it), and its values.
fn operand(shape: &[usize], view: View, seed: u64, device: Device, transform: fn(f32) -> f32) -> (Tensor, Host) {
    let make = |base_shape: &[usize], f: &dyn Fn(&Tensor) -> engine::Result<Tensor>| {
        let values: Vec<f32> = Tensor::randn(base_shape, seed).to_vec().unwrap().into_iter().map(transform).collect();
        let base = Tensor::from_vec(values, base_shape).unwrap();
        let cpu = f(&base).unwrap();
        let on_device = f(&base.to(device).unwrap()).unwrap();
        assert_eq!(on_device.shape(), shape);
        (on_device, Host::new(&cpu.to_vec().unwrap(), shape))
    };
    let rank = shape.len();
    match view {
        View::Transposed if rank >= 2 => {
            let mut base = shape.to_vec();
            base.swap(rank - 1, rank - 2);
            make(&base, &|t| t.transpose(-1, -2))
        }
        View::Strided if rank >= 1 => {
            let mut base = shape.to_vec();
            base[0] = 2 * shape[0];
            make(&base, &|t| t.slice(0, 0, 2 * shape[0], 2))
        }
        View::Misaligned => {
            let n: usize = shape.iter().product();
            make(&[n + 1], &|t| t.slice(0, 1, n + 1, 1)?.reshape(shape))
        }
        View::Expanded if rank >= 1 => {
            let mut base = shape.to_vec();
            base[0] = 1;
            make(&base, &|t| t.expand(shape))
        }
        _ => make(shape, &|t| Ok(t.clone())),
    }
}

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

fn to_err(e: Error) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

fn unary_ops_match_the_reference(device: Device) {
    check(32, (shapes(), views(), any::<u64>()), |(shape, view, seed)| {
        for op in UnaryOp::ALL {
            let domain: fn(f32) -> f32 = match op {
                UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => positive,
                _ => identity,
            };
            let (x, host) = operand(&shape, view, seed, device, domain);
            let y =
                engine::op::Op::Unary(op).apply(&[(&x).into()], engine::SourceLocation::caller()).map_err(to_err)?;
            prop_assert_eq!(y.device(), device);
            let expected = reference::map(&[&host], |v| reference::unary(op, v[0]));
            assert_close(
                op.name(),
                &y.to_vec().map_err(to_err)?,
                &expected.data,
                &pointwise_scale(&expected.data),
                1e-5,
            );
        }
        Ok(())
    });
}

/// A shape that broadcasts against `shape`: some dims set to 1, some leading dims dropped.
fn broadcast_partner() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
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

fn binary_ops_broadcast_like_the_reference(device: Device) {
    let cases = (broadcast_partner(), any::<bool>(), views(), views(), any::<u64>(), any::<bool>());
    check(32, cases, |((a_shape, b_shape), swap, a_view, b_view, seed, scalar)| {
        let (a_shape, b_shape) = if swap { (b_shape, a_shape) } else { (a_shape, b_shape) };
        for op in BinaryOp::ALL {
            let (a_domain, b_domain): (fn(f32) -> f32, fn(f32) -> f32) = match op {
                BinaryOp::Pow => (positive, identity),
                BinaryOp::Div => (identity, away_from_zero),
                BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                    (coarse, coarse)
                }
                _ => (identity, identity),
            };
            let (a, a_host) = operand(&a_shape, a_view, seed, device, a_domain);
            let (y, expected) = if scalar {
                let s = b_domain(0.75);
                let y = engine::op::Op::Binary(op).apply(&[(&a).into(), s.into()], engine::SourceLocation::caller());
                (y, reference::map(&[&a_host], |v| reference::binary(op, v[0], s as f64)))
            } else {
                let (b, b_host) = operand(&b_shape, b_view, seed ^ 1, device, b_domain);
                let y = engine::op::Op::Binary(op).apply(&[(&a).into(), (&b).into()], engine::SourceLocation::caller());
                (y, reference::map(&[&a_host, &b_host], |v| reference::binary(op, v[0], v[1])))
            };
            let y = y.map_err(to_err)?;
            prop_assert_eq!(y.shape(), &expected.shape[..]);
            assert_close(
                op.name(),
                &y.to_vec().map_err(to_err)?,
                &expected.data,
                &pointwise_scale(&expected.data),
                1e-5,
            );
        }
        Ok(())
    });
}

fn where_selects_like_the_reference(device: Device) {
    check(32, (broadcast_partner(), views(), any::<u64>()), |((shape, partner), view, seed)| {
        let (cond_values, cond_host) = operand(&partner, View::Contiguous, seed, device, identity);
        let cond = cond_values.gt(0.0).map_err(to_err)?;
        let (a, a_host) = operand(&shape, view, seed ^ 2, device, identity);
        let y = cond.where_(&a, -1.5).map_err(to_err)?;
        let expected = reference::map(&[&cond_host, &a_host], |v| if v[0] > 0.0 { v[1] } else { -1.5 });
        assert_close("where", &y.to_vec().map_err(to_err)?, &expected.data, &pointwise_scale(&expected.data), 0.0);
        Ok(())
    });
}

fn reductions_match_the_reference_on_every_dim(device: Device) {
    let cases = (shapes().prop_filter("rank >= 1", |s| !s.is_empty()), views(), any::<u64>(), any::<bool>());
    check(32, cases, |(shape, view, seed, keepdim)| {
        let (x, host) = operand(&shape, view, seed, device, identity);
        for dim in 0..shape.len() {
            for kind in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
                let y = match kind {
                    ReduceOp::Sum => x.sum(dim as isize, keepdim),
                    ReduceOp::Mean => x.mean(dim as isize, keepdim),
                    ReduceOp::Max => x.amax(dim as isize, keepdim),
                }
                .map_err(to_err)?;
                let expected = reference::reduce(kind, &host, dim);
                let scale: Vec<f64> = match kind {
                    ReduceOp::Sum => abs_sum(&host, dim).iter().map(|s| s + 1e-30).collect(),
                    ReduceOp::Mean => abs_sum(&host, dim).iter().map(|s| s / shape[dim] as f64 + 1e-30).collect(),
                    ReduceOp::Max => pointwise_scale(&expected.data),
                };
                assert_close(
                    &format!("{}(dim={dim})", kind.name()),
                    &y.to_vec().map_err(to_err)?,
                    &expected.data,
                    &scale,
                    1e-5,
                );
            }
        }
        Ok(())
    });
}

/// Large reductions take the split path (partial results, then a second launch) and the wide
/// launch configurations; each is checked once against the reference.
fn large_reductions_split_and_stay_exact(device: Device) {
    for (shape, dim) in [(vec![3, 1_000_003], 1), (vec![1_000_003, 3], 0), (vec![1024, 3001], 0), (vec![1024, 3001], 1)]
    {
        let (x, host) = operand(&shape, View::Contiguous, 7, device, identity);
        for kind in [ReduceOp::Sum, ReduceOp::Max] {
            let y = if kind == ReduceOp::Sum { x.sum(dim, true) } else { x.amax(dim, true) }.unwrap();
            let expected = reference::reduce(kind, &host, dim as usize);
            let scale: Vec<f64> =
                if kind == ReduceOp::Sum { abs_sum(&host, dim as usize) } else { pointwise_scale(&expected.data) };
            assert_close(
                &format!("{}{shape:?} dim {dim}", kind.name()),
                &y.to_vec().unwrap(),
                &expected.data,
                &scale,
                1e-5,
            );
        }
    }
    let n = 5_000_001;
    let (x, host) = operand(&[n], View::Misaligned, 3, device, identity);
    let total = x.sum_all().unwrap().item().unwrap() as f64;
    let expected: f64 = host.data.iter().sum();
    let scale: f64 = host.data.iter().map(|v| v.abs()).sum();
    assert!((total - expected).abs() <= 1e-5 * scale, "sum_all: {total} vs {expected}");
}

#[test]
fn gpu_amax_propagates_nan_like_the_reference() {
    let Some(gpu) = gpu() else { return };
    for device in [Device::Cpu, gpu] {
        let x = Tensor::from_vec(vec![1.0, f32::NAN, 3.0, 0.0, -1.0, 2.0], &[2, 3]).unwrap().to(device).unwrap();
        let rows = x.amax(1, false).unwrap().to_vec().unwrap();
        assert!(rows[0].is_nan() && rows[1] == 2.0, "{device}: {rows:?}");
        let columns = x.amax(0, false).unwrap().to_vec().unwrap();
        assert!(columns[1].is_nan() && columns[0] == 1.0 && columns[2] == 3.0, "{device}: {columns:?}");
    }
}

fn softmax_and_layer_norm_match_the_reference(device: Device) {
    let cases = (shapes().prop_filter("rank >= 1", |s| !s.is_empty()), views(), any::<u64>());
    check(32, cases, |(shape, view, seed)| {
        let (x, host) = operand(&shape, view, seed, device, |v| 3.0 * v);
        for dim in 0..shape.len() {
            for log in [false, true] {
                let y = if log { x.log_softmax(dim as isize) } else { x.softmax(dim as isize) }.map_err(to_err)?;
                let expected = reference::softmax(&host, dim, log);
                assert_close(
                    &format!("softmax(dim={dim}, log={log})"),
                    &y.to_vec().map_err(to_err)?,
                    &expected.data,
                    &pointwise_scale(&expected.data),
                    1e-5,
                );
            }
        }
        let d = *shape.last().unwrap();
        let (w, w_host) = operand(&[d], View::Contiguous, seed ^ 3, device, identity);
        let (b, b_host) = operand(&[d], View::Misaligned, seed ^ 4, device, identity);
        let y = x.layer_norm(&w, &b, 1e-5).map_err(to_err)?;
        let (expected, scale) = reference::layer_norm(&host, &w_host, &b_host, 1e-5);
        // The mean of a long row carries up to ~length rounding steps, hence 1e-4.
        assert_close("layer_norm", &y.to_vec().map_err(to_err)?, &expected.data, &scale, 1e-4);
        Ok(())
    });
}

fn softmax_of_a_masked_row(device: Device) {
    let inf = f32::NEG_INFINITY;
    let x = Tensor::from_vec(vec![inf, 0.0, inf, 0.0, inf, inf, inf, inf], &[2, 4]).unwrap();
    let cpu = x.softmax(-1).unwrap().to_vec().unwrap();
    let on_gpu = x.to(device).unwrap().softmax(-1).unwrap().to_vec().unwrap();
    assert_eq!(&on_gpu[..4], &[0.0, 0.5, 0.0, 0.5]);
    assert!(on_gpu[4..].iter().all(|v| v.is_nan()) && cpu[4..].iter().all(|v| v.is_nan()), "{on_gpu:?}");
}

/// Matrix shapes with broadcast batch dims (either side may broadcast), each operand possibly
/// transposed, strided or misaligned.
fn matmul_cases() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, View, View)> {
    let batch = prop::collection::vec(1usize..4, 0..=2);
    (batch, 1usize..40, 1usize..70, 1usize..40, views(), views(), any::<bool>())
        .prop_flat_map(|(batch, m, k, n, va, vb, swap)| {
            let rank = batch.len();
            (Just(batch), prop::collection::vec(any::<bool>(), rank), 0..=rank, Just((m, k, n, va, vb, swap)))
        })
        .prop_map(|(batch, ones, drop, (m, k, n, va, vb, swap))| {
            let other: Vec<usize> =
                batch.iter().zip(&ones).map(|(&s, &one)| if one { 1 } else { s }).skip(drop).collect();
            let (ba, bb) = if swap { (other, batch) } else { (batch, other) };
            ([ba, vec![m, k]].concat(), [bb, vec![k, n]].concat(), va, vb)
        })
}

fn matmul_matches_the_reference(device: Device) {
    check(48, (matmul_cases(), any::<u64>()), |((a_shape, b_shape, a_view, b_view), seed)| {
        let (a, a_host) = operand(&a_shape, a_view, seed, device, identity);
        let (b, b_host) = operand(&b_shape, b_view, seed ^ 5, device, identity);
        let y = a.matmul(&b).map_err(to_err)?;
        let expected = reference::matmul(&a_host, &b_host);
        prop_assert_eq!(y.shape(), &expected.shape[..]);
        let abs = |h: &Host| Host { data: h.data.iter().map(|v| v.abs()).collect(), shape: h.shape.clone() };
        let scale: Vec<f64> = reference::matmul(&abs(&a_host), &abs(&b_host)).data.iter().map(|s| s + 1e-30).collect();
        assert_close("matmul", &y.to_vec().map_err(to_err)?, &expected.data, &scale, 1e-5);
        Ok(())
    });
}

fn matmul_with_an_empty_inner_dim_is_zero(device: Device) {
    let a = Tensor::zeros(&[3, 0]).to(device).unwrap();
    let b = Tensor::zeros(&[0, 2]).to(device).unwrap();
    assert_eq!(a.matmul(&b).unwrap().to_vec().unwrap(), vec![0.0; 6]);
}

fn transfers_and_views_round_trip(device: Device) {
    let x = Tensor::randn(&[5, 7, 3], 11);
    let on_gpu = x.to(device).unwrap();
    assert_eq!(on_gpu.device(), device);
    assert_eq!(on_gpu.to(Device::Cpu).unwrap().to_vec().unwrap(), x.to_vec().unwrap());
    let view = |t: &Tensor| t.permute(&[2, 0, 1]).unwrap().slice(1, 1, 5, 2).unwrap();
    assert_eq!(view(&on_gpu).to_vec().unwrap(), view(&x).to_vec().unwrap());
    assert_eq!(view(&on_gpu).contiguous().unwrap().to_vec().unwrap(), view(&x).to_vec().unwrap());
    assert_eq!(on_gpu.sum_all().unwrap().to(Device::Cpu).unwrap().shape(), &[] as &[usize]);
    assert_eq!(Tensor::scalar(2.5).to(device).unwrap().item().unwrap(), 2.5);
    assert!(format!("{}", Tensor::arange(3).to(device).unwrap()).starts_with("tensor([0.0000, 1.0000, 2.0000"));
    let empty = Tensor::zeros(&[0, 4]).to(device).unwrap();
    assert_eq!(empty.exp().unwrap().sum(0, false).unwrap().to_vec().unwrap(), vec![0.0; 4]);
}

#[test]
fn gpu_errors_name_the_devices() {
    let Some(gpu) = gpu() else { return };
    let err = Tensor::ones(&[2]).add(&Tensor::ones(&[2]).to(gpu).unwrap()).unwrap_err();
    assert!(matches!(err, Error::DeviceMismatch { .. }), "{err}");
    assert!(err.to_string().contains("cpu and cuda:0"), "{err}");
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
    let expected = forward(&x, &w1, &b1, &w2).unwrap().to_vec().unwrap();
    let on = |t: &Tensor| t.to(gpu).unwrap();
    let (gx, gw1, gb1, gw2) = (on(&x), on(&w1), on(&b1), on(&w2));
    let eager = dynamo::compile(|x: Tensor| forward(&x, &gw1, &gb1, &gw2)).backend(Eager);
    let aot = dynamo::compile(|x: Tensor| forward(&x, &gw1, &gb1, &gw2)).backend(AotEager);
    for y in [eager.call(&gx).unwrap(), aot.call(&gx).unwrap()] {
        assert_eq!(y.device(), gpu);
        let got = y.to_vec().unwrap();
        let scale = vec![1.0; got.len()];
        assert_close(
            "compiled on the GPU",
            &got,
            &expected.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            &scale,
            1e-4,
        );
    }
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
