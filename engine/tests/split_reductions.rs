//! Split reductions (`inductor::split_reductions`): a reduction with too few outputs for the
//! device becomes partial results per chunk, then their total. On the CPU the target never splits
//! by itself, so these tests force it (`SplitReductions::Always`) and check that the generated C
//! and the kernel-IR interpreter compute, in the split form, what eager computes: every reduction
//! kind, reduced dimensions inner, middle and outer, lengths with a divisor and without one (a
//! prime: split with a remainder reduced apart), sizes 1 and 0, f32 and half precision, dense and
//! strided inputs, and a product flattened before its reduction (the MSE loss's shape).

mod common;

use common::tolerance;
use engine::backends::Inductor;
use engine::inductor::split_reductions::{SplitRule, parts};
use engine::inductor::{Config, SplitReductions, TargetKind};
use engine::logs::{self, Artifact};
use engine::op::ReduceOp;
use engine::{DType, Result, Tensor, dynamo};
use proptest::prelude::*;

fn forced(target: TargetKind) -> Config {
    Config { split_reductions: SplitReductions::Always, target, fx_graph_cache: false, ..Config::default() }
}

/// `reduce(x * y)` along `dim` (or over every element, flattened first), then doubled: a
/// pointwise prologue fused into the partials' kernel, and an op on the totals fused into the
/// second kernel.
fn program(kind: ReduceOp, dim: usize, keepdim: bool, flatten: bool) -> impl Fn(Vec<Tensor>) -> Result<Tensor> {
    move |t| {
        let product = t[0].mul(&t[1])?;
        let (product, d) = if flatten { (product.reshape(&[product.numel()])?, 0) } else { (product, dim as isize) };
        let reduced = match kind {
            ReduceOp::Sum => product.sum(d, keepdim)?,
            ReduceOp::Mean => product.mean(d, keepdim)?,
            ReduceOp::Max => product.amax(d, keepdim)?,
        };
        reduced.mul(2.0)
    }
}

/// A random tensor of `shape` and `dtype`, dense or a permuted view of one (every stride differs
/// from the dense ones).
fn input(shape: &[usize], dtype: DType, strided: bool, seed: u64) -> Tensor {
    if !strided {
        return Tensor::randn(shape, seed).to_dtype(dtype).unwrap();
    }
    let reversed: Vec<usize> = shape.iter().rev().copied().collect();
    let dims: Vec<usize> = (0..shape.len()).rev().collect();
    Tensor::randn(&reversed, seed).to_dtype(dtype).unwrap().permute(&dims).unwrap()
}

/// Sizes with many divisors, primes, 1 and 0.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => Just(1usize),
        1 => Just(0usize),
        6 => prop::sample::select(vec![4usize, 6, 12, 16, 30, 64, 100, 256]),
        4 => prop::sample::select(vec![2usize, 3, 7, 13, 97, 251]),
    ]
}

/// A shape, the dimension reduced, keepdim, the reduction, the dtype, whether the product is
/// flattened first, whether the first input is a permuted view.
type Case = (Vec<usize>, usize, bool, ReduceOp, DType, bool, bool);

fn case() -> impl Strategy<Value = Case> {
    prop::collection::vec(size(), 1..=3).prop_flat_map(|shape| {
        let rank = shape.len();
        (
            Just(shape),
            0..rank,
            any::<bool>(),
            prop::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max]),
            prop::sample::select(vec![DType::F32, DType::BF16, DType::F16]),
            any::<bool>(),
            any::<bool>(),
        )
    })
}

/// Where `got` differs from `expected` by more than the dtype's tolerance times `scale` (the same
/// reduction of the terms' magnitudes: what rounding each term and the result can move).
fn mismatch(got: &[f32], expected: &[f32], scale: &[f32], dtype: DType) -> Option<String> {
    let (rtol, atol) = tolerance(dtype);
    let rtol = if dtype == DType::F32 { 1e-5 } else { 4.0 * rtol };
    got.iter().zip(expected).zip(scale).enumerate().find_map(|(i, ((&g, &e), &s))| {
        let near = (g.is_nan() && e.is_nan()) || f64::from((g - e).abs()) <= atol + rtol * f64::from(s.abs() + e.abs());
        (!near).then(|| format!("element {i}: compiled {g}, eager {e} (scale {s})"))
    })
}

fn reduction_kernels(inductor: &Inductor) -> usize {
    let codes = inductor.output_codes();
    codes[0].kernel_names().iter().filter(|n| n.starts_with("per_") || n.starts_with("red_")).count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn split_reductions_match_eager(
        (shape, dim, keepdim, kind, dtype, flatten, strided) in case(),
        seed in any::<u64>(),
    ) {
        let numel: usize = shape.iter().product();
        let (reduced_shape, reduced_dim) = if flatten { (vec![numel], 0) } else { (shape.clone(), dim) };
        // Like PyTorch, eager has no maximum of nothing.
        prop_assume!(kind != ReduceOp::Max || reduced_shape[reduced_dim] > 0);
        let inputs = [input(&shape, dtype, strided, seed), input(&shape, dtype, false, seed ^ 1)];
        let f = program(kind, dim, keepdim, flatten);
        let expected = f(inputs.to_vec()).unwrap();
        // What rounding can move: the same reduction of the terms' magnitudes, in f32.
        let magnitudes = inputs.clone().map(|t| t.to_dtype(DType::F32).unwrap().abs().unwrap());
        let scale = f(magnitudes.to_vec()).unwrap().to_vec().unwrap();
        // Whole: one reduction kernel; split: the partials and the total; with a remainder, also
        // the remainder's.
        let length = reduced_shape[reduced_dim];
        let (kernels, exact) = match parts(SplitRule::Always, &reduced_shape, reduced_dim) {
            None => (1, false),
            Some(p) if length % p == 0 => (2, true),
            Some(_) => (3, false),
        };
        for target in [TargetKind::Native, TargetKind::Interpreter] {
            let inductor = Inductor::with_config(forced(target));
            let compiled = dynamo::compile(|t: Vec<Tensor>| f(t)).backend(inductor.clone());
            let got = compiled.call(&inputs).unwrap();
            let code = &inductor.output_codes()[0];
            prop_assert_eq!(got.shape(), expected.shape());
            prop_assert_eq!(got.dtype(), expected.dtype());
            let why = mismatch(&got.to_vec().unwrap(), &expected.to_vec().unwrap(), &scale, dtype);
            prop_assert!(why.is_none(), "{target:?}: {}\n{code}", why.unwrap());
            if numel > 0 {
                prop_assert_eq!(reduction_kernels(&inductor), kernels, "{}", code);
                // Dense inputs: the product is computed in the partials' kernel, flattened or not.
                if exact && !strided {
                    prop_assert_eq!(code.kernel_names().len(), 2, "{}", code);
                }
            }
        }
    }
}

#[test]
fn a_split_is_logged_and_its_partials_are_f32() {
    let inputs = [Tensor::randn(&[64, 6], 0), Tensor::randn(&[64, 6], 1)].map(|t| t.to_dtype(DType::BF16).unwrap());
    let inductor = Inductor::with_config(forced(TargetKind::Native));
    let f = program(ReduceOp::Sum, 0, false, false);
    let compiled = dynamo::compile(|t: Vec<Tensor>| f(t)).backend(inductor.clone());
    let (got, log) = logs::capture(&[Artifact::Fusion], || compiled.call(&inputs));
    got.unwrap();
    assert!(
        log.contains("split sum: 6 output(s) of 64 elements each → 48 partial results of 8 elements, then 6 of 8"),
        "{log}"
    );
    let code = inductor.output_codes()[0].to_string();
    assert_eq!(inductor.output_codes()[0].kernel_names(), ["red_fused_mul_sum_0", "red_fused_sum_mul_1"], "{code}");
    // The partials are f32 whatever the inputs are; the total is bf16, as eager's.
    assert!(code.contains("let buf1 = empty([8, 6]);  // 48 floats"), "{code}");
    assert!(code.contains("let buf3 = empty([6], bf16);"), "{code}");
}

#[test]
fn without_the_knob_the_cpu_does_not_split() {
    let inputs = [Tensor::randn(&[1 << 16], 0), Tensor::randn(&[1 << 16], 1)];
    let inductor = Inductor::default();
    let f = program(ReduceOp::Mean, 0, false, false);
    dynamo::compile(|t: Vec<Tensor>| f(t)).backend(inductor.clone()).call(&inputs).unwrap();
    assert_eq!(reduction_kernels(&inductor), 1);
}
