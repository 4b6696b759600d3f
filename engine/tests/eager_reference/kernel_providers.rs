//! The two kernel providers of each device agree: every op family run on the plain kernels (the
//! loops a reader follows) and on the tuned ones (the fast paths eager runs by default), on random
//! shapes, values and layouts; and the plain kernels alone against the float64 reference.

use crate::common::reference::{self, RefTensor};
use crate::common::{Layout, assert_close, gpu, layouts, make, make_typed};
use engine::device::{Kernels, kernels, with_kernels};
use engine::op::{BinaryOp, ReduceOp, UnaryOp};
use engine::{AttnMask, DType, Device, Result, Tensor};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};

/// One op family on random inputs.
#[derive(Clone, Debug)]
enum Case {
    Unary(UnaryOp, Vec<usize>, Layout),
    Binary(BinaryOp, Vec<usize>, Layout),
    Where(Vec<usize>, Layout),
    Reduce(ReduceOp, Vec<usize>, usize, Layout),
    Softmax { shape: Vec<usize>, dim: usize, log: bool, layout: Layout },
    LayerNorm(Vec<usize>, Layout),
    Matmul { batch: Vec<usize>, m: usize, k: usize, n: usize, transpose_b: bool, layout: Layout },
    Attention { heads: usize, q_len: usize, kv_len: usize, head_dim: usize, mask: u8, layout: Layout },
    Cat(Vec<usize>, usize, Layout),
}

fn shape(ranks: std::ops::RangeInclusive<usize>, max: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1..=max, ranks)
}

fn cases() -> impl Strategy<Value = Case> {
    prop_oneof![
        (proptest::sample::select(UnaryOp::ALL.to_vec()), shape(1..=3, 9), layouts())
            .prop_map(|(op, s, l)| Case::Unary(op, s, l)),
        (proptest::sample::select(BinaryOp::ALL.to_vec()), shape(1..=3, 9), layouts())
            .prop_map(|(op, s, l)| Case::Binary(op, s, l)),
        (shape(1..=3, 9), layouts()).prop_map(|(s, l)| Case::Where(s, l)),
        (
            proptest::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max]),
            shape(1..=3, 12),
            any::<usize>(),
            layouts()
        )
            .prop_map(|(op, s, d, l)| {
                let dim = d % s.len();
                Case::Reduce(op, s, dim, l)
            }),
        (shape(1..=3, 40), any::<usize>(), any::<bool>(), layouts()).prop_map(|(s, d, log, layout)| {
            let dim = d % s.len();
            Case::Softmax { shape: s, dim, log, layout }
        }),
        (shape(1..=3, 40), layouts()).prop_map(|(s, l)| Case::LayerNorm(s, l)),
        (shape(0..=2, 3), 1usize..=9, 1usize..=40, 1usize..=9, any::<bool>(), layouts())
            .prop_map(|(batch, m, k, n, transpose_b, layout)| Case::Matmul { batch, m, k, n, transpose_b, layout }),
        (1usize..=3, 1usize..=20, 1usize..=20, 1usize..=24, 0u8..4, layouts()).prop_map(
            |(heads, q_len, kv_len, head_dim, mask, layout)| Case::Attention {
                heads,
                q_len,
                kv_len,
                head_dim,
                mask,
                layout
            }
        ),
        (shape(1..=3, 6), any::<usize>(), layouts()).prop_map(|(s, d, l)| {
            let dim = d % s.len();
            Case::Cat(s, dim, l)
        }),
    ]
}

/// The case's result on `device`, its inputs of `dtype`, with the kernels this thread runs on now.
fn run(case: &Case, device: Device, dtype: DType) -> Result<Tensor> {
    // A random tensor of `shape` on `device` in `layout`.
    let input = |shape: &[usize], layout: Layout, seed: u64, device: Device| {
        make_typed(&Tensor::uniform(shape, -2.0, 2.0, seed).to_vec().unwrap(), shape, layout, device, dtype)
    };
    match case {
        Case::Unary(op, shape, layout) => {
            let x = input(shape, *layout, 1, device).0;
            let x = if *op == UnaryOp::Log || *op == UnaryOp::Sqrt || *op == UnaryOp::Rsqrt { x.abs()? } else { x };
            engine::op::Op::Unary(*op).apply(&[(&x).into()], engine::SourceLocation::caller())
        }
        Case::Binary(op, shape, layout) => {
            let a = input(shape, *layout, 2, device).0;
            let b = input(&shape[1..], Layout::Contiguous, 3, device).0;
            engine::op::Op::Binary(*op).apply(&[(&a).into(), (&b).into()], engine::SourceLocation::caller())
        }
        Case::Where(shape, layout) => {
            let x = input(shape, *layout, 4, device).0;
            x.gt(0.0)?.where_(&x, -1.0)
        }
        Case::Reduce(op, shape, dim, layout) => {
            let x = input(shape, *layout, 5, device).0;
            let dim = *dim as isize;
            match op {
                ReduceOp::Sum => x.sum(dim, false),
                ReduceOp::Mean => x.mean(dim, true),
                ReduceOp::Max => x.amax(dim, false),
            }
        }
        Case::Softmax { shape, dim, log, layout } => {
            let x = input(shape, *layout, 6, device).0;
            if *log { x.log_softmax(*dim as isize) } else { x.softmax(*dim as isize) }
        }
        Case::LayerNorm(shape, layout) => {
            let d = *shape.last().unwrap();
            let x = input(shape, *layout, 7, device).0;
            let (w, b) = (input(&[d], Layout::Contiguous, 8, device).0, input(&[d], Layout::Contiguous, 9, device).0);
            x.layer_norm(&w, &b, 1e-5)
        }
        Case::Matmul { batch, m, k, n, transpose_b, layout } => {
            let a = input(&[batch.clone(), vec![*m, *k]].concat(), *layout, 10, device).0;
            let b_layout = if *transpose_b { Layout::Transposed } else { Layout::Contiguous };
            let b = input(&[*k, *n], b_layout, 11, device).0;
            a.matmul(&b)
        }
        Case::Attention { heads, q_len, kv_len, head_dim, mask, layout } => {
            let q = input(&[*heads, *q_len, *head_dim], *layout, 12, device).0;
            let k = input(&[*heads, *kv_len, *head_dim], Layout::Contiguous, 13, device).0;
            let v = input(&[*heads, *kv_len, *head_dim], *layout, 14, device).0;
            let mask_values = input(&[*q_len, *kv_len], Layout::Contiguous, 15, device).0;
            match mask {
                0 => q.scaled_dot_product_attention(&k, &v, None, false, None),
                1 => q.scaled_dot_product_attention(&k, &v, None, true, None),
                2 => {
                    q.scaled_dot_product_attention(&k, &v, Some(AttnMask::Boolean(&mask_values.gt(-1.0)?)), false, None)
                }
                _ => q.scaled_dot_product_attention(&k, &v, Some(AttnMask::Additive(&mask_values)), false, Some(0.3)),
            }
        }
        Case::Cat(shape, dim, layout) => {
            let a = input(shape, *layout, 16, device).0;
            let b = input(shape, Layout::Contiguous, 17, device).0;
            Tensor::cat(&[&a, &b, &a], *dim as isize)
        }
    }
}

/// `plain` within `rtol * |tuned| + atol` of `tuned` everywhere, NaN where it is NaN.
fn agree(case: &Case, plain: &Tensor, tuned: &Tensor, rtol: f32, atol: f32) -> std::result::Result<(), TestCaseError> {
    prop_assert_eq!(plain.shape(), tuned.shape());
    let (p, t) = (plain.to_vec().unwrap(), tuned.to_vec().unwrap());
    for (i, (p, t)) in p.iter().zip(&t).enumerate() {
        let same = (p.is_nan() && t.is_nan()) || p == t || (p - t).abs() <= atol + rtol * t.abs();
        prop_assert!(same, "{:?}: element {}: plain {}, tuned {}", case, i, p, t);
    }
    Ok(())
}

/// Runs `cases` random cases on `device` with inputs of `dtype`, plain against tuned;
/// `attention_rtol` allows for a tuned attention kernel that multiplies on tensor cores (TF32 on a
/// GPU). In half precision both compute in float32 and round once: they may differ by the
/// rounding of a float32 difference, two units in the dtype's last place.
fn plain_and_tuned_agree(device: Device, cases_count: u32, attention_rtol: f32, dtype: DType) {
    let mut runner = TestRunner::new(RunnerConfig { cases: cases_count, ..RunnerConfig::default() });
    let rounding = if dtype == DType::F32 { 2e-5 } else { 2.0 * dtype.epsilon() };
    runner
        .run(&cases(), |case| {
            assert_eq!(kernels(), Kernels::Tuned, "the tuned kernels are the default");
            let tuned = run(&case, device, dtype).unwrap();
            let plain = with_kernels(Kernels::Plain, || run(&case, device, dtype)).unwrap();
            assert_eq!(kernels(), Kernels::Tuned, "with_kernels restores the choice");
            prop_assert_eq!(plain.dtype(), tuned.dtype());
            let (rtol, atol) = match case {
                Case::Attention { .. } => (attention_rtol.max(rounding), attention_rtol.max(rounding)),
                _ => (rounding, rounding),
            };
            agree(&case, &plain, &tuned, rtol, atol)
        })
        .unwrap();
}

#[test]
fn plain_and_tuned_cpu_kernels_agree() {
    plain_and_tuned_agree(Device::Cpu, 400, 2e-5, DType::F32);
}

#[test]
fn plain_and_tuned_cpu_kernels_agree_in_half_precision() {
    // The tuned kernels convert with F16C and AVX-512 BF16 where the CPU has them, a row or a
    // chunk at a time; the plain ones element by element.
    plain_and_tuned_agree(Device::Cpu, 100, 2e-5, DType::BF16);
    plain_and_tuned_agree(Device::Cpu, 100, 2e-5, DType::F16);
}

#[test]
fn gpu_plain_and_tuned_kernels_agree() {
    let Some(device) = gpu() else { return };
    plain_and_tuned_agree(device, 200, 5e-3, DType::F32);
    // The tuned half-precision attention rounds its probabilities to the dtype for the
    // tensor-core product with v; the plain one computes in float32.
    plain_and_tuned_agree(device, 100, 1.6e-2, DType::BF16);
    plain_and_tuned_agree(device, 100, 2e-3, DType::F16);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The plain attention, composed of the plain kernels, against the float64 reference.
    #[test]
    fn plain_attention_matches_the_reference(heads in 1usize..3, q_len in 1usize..12, kv_len in 1usize..12, head_dim in 1usize..9, causal in any::<bool>(), seed in any::<u64>()) {
        let (q, rq) = make(&Tensor::uniform(&[heads, q_len, head_dim], -1.0, 1.0, seed).to_vec().unwrap(), &[heads, q_len, head_dim], Layout::Contiguous);
        let (k, rk) = make(&Tensor::uniform(&[heads, kv_len, head_dim], -1.0, 1.0, seed + 1).to_vec().unwrap(), &[heads, kv_len, head_dim], Layout::Transposed);
        let (v, rv) = make(&Tensor::uniform(&[heads, kv_len, head_dim], -1.0, 1.0, seed + 2).to_vec().unwrap(), &[heads, kv_len, head_dim], Layout::Contiguous);
        let got = with_kernels(Kernels::Plain, || q.scaled_dot_product_attention(&k, &v, None, causal, None)).unwrap();
        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut scores = rq.matmul(&rk.permute(&[0, 2, 1])).map(|s| s * scale);
        if causal {
            let keys = kv_len;
            scores = RefTensor::new(scores.shape.clone(), scores.data.iter().enumerate().map(|(i, &s)| {
                let (row, col) = ((i / keys) % q_len, i % keys);
                if col <= row { s } else { f64::NEG_INFINITY }
            }).collect());
        }
        let want = scores.softmax(2, false).matmul(&rv);
        assert_close(&got, &want, None, 1e-5, 1e-5);
    }

    /// The plain reductions sum in one running total, which for the short lines here is within
    /// float32 rounding of the float64 reference.
    #[test]
    fn plain_reductions_match_the_reference(kind in proptest::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max]), shape in shape(1..=3, 9), dim in any::<usize>(), seed in any::<u64>()) {
        let dim = dim % shape.len();
        let (x, rx) = make(&Tensor::uniform(&shape, -2.0, 2.0, seed).to_vec().unwrap(), &shape, Layout::Transposed);
        let got = with_kernels(Kernels::Plain, || match kind {
            ReduceOp::Sum => x.sum(dim as isize, false),
            ReduceOp::Mean => x.mean(dim as isize, false),
            ReduceOp::Max => x.amax(dim as isize, false),
        }).unwrap();
        let scale = rx.abs().reduce(if kind == ReduceOp::Max { ReduceOp::Max } else { kind }, dim, false);
        assert_close(&got, &rx.reduce(kind, dim, false), Some(&scale), 1e-5, 1e-6);
        let unary = with_kernels(Kernels::Plain, || x.tanh()).unwrap();
        assert_close(&unary, &rx.map(|v| reference::unary(UnaryOp::Tanh, v)), None, 2e-6, 1e-6);
    }
}
