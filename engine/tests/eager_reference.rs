//! Every eager CPU op against the float64 reference, on random shapes, values and memory layouts
//! (dense, transposed, strided), including sizes that are not multiples of the vector width.

mod common;
#[path = "eager_reference/kernel_providers.rs"]
mod kernel_providers;

use common::reference::{self, RefTensor};
use common::{Layout, assert_close, half_dtypes, layouts, make, make_typed, shapes, tolerance, values};
use engine::op::{BinaryOp, ReduceOp, UnaryOp};
use engine::{DType, Device, Tensor};
use proptest::prelude::*;

/// A shape together with values for it.
fn tensor_data(ranks: std::ops::RangeInclusive<usize>, max: usize) -> impl Strategy<Value = (Vec<usize>, Vec<f32>)> {
    shapes(ranks, max).prop_flat_map(|shape| {
        let n = shape.iter().product();
        (Just(shape), values(n))
    })
}

/// A shape that broadcasts against `shape`: some leading dims dropped, some sizes set to 1.
fn broadcast_partner(shape: Vec<usize>) -> impl Strategy<Value = Vec<usize>> {
    let rank = shape.len();
    (0..=rank, proptest::collection::vec(any::<bool>(), rank)).prop_map(move |(drop, ones)| {
        shape[drop..].iter().zip(&ones[drop..]).map(|(&s, &one)| if one { 1 } else { s }).collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn unary_ops_match(op in proptest::sample::select(UnaryOp::ALL.to_vec()), (shape, data) in tensor_data(0..=4, 7), layout in layouts()) {
        let (x, rx) = make(&data, &shape, layout);
        let got = engine::op::Op::Unary(op).apply(&[(&x).into()], engine::SourceLocation::caller()).unwrap();
        assert_close(&got, &rx.map(|v| reference::unary(op, v)), None, 2e-6, 1e-6);
    }

    #[test]
    fn binary_ops_broadcast_and_match(
        op in proptest::sample::select(BinaryOp::ALL.to_vec()),
        (shape, other_shape) in shapes(0..=4, 6).prop_flat_map(|s| (Just(s.clone()), broadcast_partner(s))),
        seed in any::<u64>(),
        swap in any::<bool>(),
        layout in layouts(),
    ) {
        let data = Tensor::uniform(&shape, -3.0, 3.0, seed).to_vec().unwrap();
        let other_data = Tensor::uniform(&other_shape, -3.0, 3.0, seed + 1).to_vec().unwrap();
        let (a, ra) = make(&data, &shape, layout);
        let (b, rb) = make(&other_data, &other_shape, Layout::Contiguous);
        let (a, b, ra, rb) = if swap { (b, a, rb, ra) } else { (a, b, ra, rb) };
        let got = engine::op::Op::Binary(op).apply(&[(&a).into(), (&b).into()], engine::SourceLocation::caller()).unwrap();
        let want = RefTensor::zip(&[&ra, &rb], |v| reference::binary(op, v[0], v[1]));
        assert_close(&got, &want, None, 4e-6, 1e-6);
    }

    #[test]
    fn scalar_operands_match(op in proptest::sample::select(BinaryOp::ALL.to_vec()), (shape, data) in tensor_data(0..=3, 9), s in -2.0f32..2.0) {
        let (x, rx) = make(&data, &shape, Layout::Contiguous);
        let got = engine::op::Op::Binary(op).apply(&[(&x).into(), s.into()], engine::SourceLocation::caller()).unwrap();
        assert_close(&got, &rx.map(|v| reference::binary(op, v, s as f64)), None, 4e-6, 1e-6);
    }

    #[test]
    fn where_selects_elementwise((shape, data) in tensor_data(1..=3, 6), layout in layouts()) {
        let (x, rx) = make(&data, &shape, layout);
        let got = x.gt(0.0).unwrap().where_(&x, -1.0).unwrap();
        assert_close(&got, &rx.map(|v| if v > 0.0 { v } else { -1.0 }), None, 0.0, 0.0);
    }

    #[test]
    fn reductions_match(
        kind in proptest::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max]),
        (shape, data) in tensor_data(1..=4, 9),
        dim_seed in any::<usize>(),
        keepdim in any::<bool>(),
        layout in layouts(),
    ) {
        let dim = dim_seed % shape.len();
        let (x, rx) = make(&data, &shape, layout);
        let got = match kind {
            ReduceOp::Sum => x.sum(dim as isize, keepdim),
            ReduceOp::Mean => x.mean(dim as isize, keepdim),
            ReduceOp::Max => x.amax(dim as isize, keepdim),
        }.unwrap();
        let scale = rx.abs().reduce(if kind == ReduceOp::Max { ReduceOp::Max } else { kind }, dim, keepdim);
        assert_close(&got, &rx.reduce(kind, dim, keepdim), Some(&scale), 1e-5, 1e-6);
    }

    #[test]
    fn matmul_matches((batch, m, k, n) in (shapes(0..=2, 3), 1usize..=9, 1usize..=33, 1usize..=9), transpose_b in any::<bool>(), a_layout in layouts(), seed in any::<u64>()) {
        let a_shape = [batch.clone(), vec![m, k]].concat();
        let b_shape = [batch.iter().map(|_| 1).collect::<Vec<_>>(), vec![k, n]].concat();
        let a_data = Tensor::uniform(&a_shape, -1.0, 1.0, seed).to_vec().unwrap();
        let b_data = Tensor::uniform(&b_shape, -1.0, 1.0, seed + 1).to_vec().unwrap();
        // Contiguous `a` takes the batch folded into rows; the other layouts do not fold.
        let (a, ra) = make(&a_data, &a_shape, a_layout);
        let (b, rb) = make(&b_data, &b_shape, if transpose_b { Layout::Transposed } else { Layout::Contiguous });
        let got = a.matmul(&b).unwrap();
        assert_close(&got, &ra.matmul(&rb), Some(&ra.abs().matmul(&rb.abs())), 1e-5, 1e-6);
    }

    #[test]
    fn softmax_and_log_softmax_match((shape, data) in tensor_data(1..=3, 40), dim_seed in any::<usize>(), layout in layouts()) {
        let dim = dim_seed % shape.len();
        let (x, rx) = make(&data, &shape, layout);
        assert_close(&x.softmax(dim as isize).unwrap(), &rx.softmax(dim, false), None, 1e-5, 1e-6);
        assert_close(&x.log_softmax(dim as isize).unwrap(), &rx.softmax(dim, true), None, 1e-5, 1e-5);
    }

    #[test]
    fn layer_norm_matches((shape, data) in tensor_data(1..=3, 40), seed in any::<u64>(), layout in layouts()) {
        let d = *shape.last().unwrap();
        let (x, rx) = make(&data, &shape, layout);
        let (w, rw) = make(&Tensor::uniform(&[d], 0.5, 1.5, seed).to_vec().unwrap(), &[d], Layout::Contiguous);
        let (b, rb) = make(&Tensor::uniform(&[d], -1.0, 1.0, seed + 1).to_vec().unwrap(), &[d], Layout::Contiguous);
        assert_close(&x.layer_norm(&w, &b, 1e-5).unwrap(), &rx.layer_norm(&rw, &rb, 1e-5), None, 1e-4, 1e-4);
    }

    #[test]
    fn long_rows_normalize_as_float64_does(rows in 1usize..4, row_len in 2_000usize..20_000, seed in any::<u64>()) {
        // A row's statistics are sums of thousands of terms: kept in one running float32 total,
        // the sum of a 16 K-element softmax row is off in the fifth digit, and so is every
        // log-probability near zero.
        let data = Tensor::randn(&[rows, row_len], seed).mul(3.0).unwrap().to_vec().unwrap();
        let (x, rx) = make(&data, &[rows, row_len], Layout::Contiguous);
        assert_close(&x.softmax(-1).unwrap(), &rx.softmax(1, false), None, 1e-5, 1e-7);
        assert_close(&x.log_softmax(-1).unwrap(), &rx.softmax(1, true), None, 1e-6, 1e-5);
        let (w, rw) = make(&vec![1.0; row_len], &[row_len], Layout::Contiguous);
        let (b, rb) = make(&vec![0.0; row_len], &[row_len], Layout::Contiguous);
        assert_close(&x.layer_norm(&w, &b, 1e-5).unwrap(), &rx.layer_norm(&rw, &rb, 1e-5), None, 1e-5, 1e-5);
    }

    #[test]
    fn views_read_the_right_elements((shape, data) in tensor_data(2..=4, 6), layout in layouts()) {
        let (x, rx) = make(&data, &shape, layout);
        let rank = shape.len();
        let perm: Vec<usize> = (0..rank).rev().collect();
        assert_close(&x.permute(&perm).unwrap(), &rx.permute(&perm), None, 0.0, 0.0);
        let flat = x.reshape(&[x.numel()]).unwrap();
        assert_eq!(flat.to_vec().unwrap(), rx.to_f32());
        let end = shape[rank - 1];
        let sliced = x.slice(-1, end / 2, end, 1).unwrap();
        let want: Vec<f32> = rx.data.chunks(end).flat_map(|row| row[end / 2..].iter().map(|&v| v as f32)).collect();
        assert_eq!(sliced.to_vec().unwrap(), want);
        let expanded = x.unsqueeze(0).unwrap().expand(&[[2].as_slice(), &shape].concat()).unwrap();
        assert_eq!(expanded.to_vec().unwrap(), [rx.to_f32(), rx.to_f32()].concat());
    }
}

/// `op` applied to `x`, as the catalogue's op.
fn unary(op: UnaryOp, x: &Tensor) -> Tensor {
    engine::op::Op::Unary(op).apply(&[x.into()], engine::SourceLocation::caller()).unwrap()
}

// Half precision: each op's inputs are rounded to the dtype, and its result, computed in float32
// and rounded once, must lie within `torch.testing.assert_close`'s tolerance for the dtype of
// the float64 result on the same rounded inputs.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn half_precision_unary_ops_match(
        op in proptest::sample::select(UnaryOp::ALL.to_vec()),
        (shape, data) in tensor_data(0..=3, 9),
        layout in layouts(),
        dtype in half_dtypes(),
    ) {
        let (x, rx) = make_typed(&data, &shape, layout, Device::Cpu, dtype);
        let got = unary(op, &x);
        prop_assert_eq!(got.dtype(), dtype);
        let (rtol, atol) = tolerance(dtype);
        assert_close(&got, &rx.map(|v| reference::unary(op, v)), None, rtol, atol);
    }

    #[test]
    fn half_precision_binary_ops_promote_and_match(
        op in proptest::sample::select(BinaryOp::ALL.to_vec()),
        (shape, other_shape) in shapes(1..=3, 6).prop_flat_map(|s| (Just(s.clone()), broadcast_partner(s))),
        dtypes in (half_dtypes(), prop_oneof![Just(DType::F32), Just(DType::F16), Just(DType::BF16)]),
        seed in any::<u64>(),
        layout in layouts(),
    ) {
        let data = Tensor::uniform(&shape, -3.0, 3.0, seed).to_vec().unwrap();
        let other_data = Tensor::uniform(&other_shape, -3.0, 3.0, seed + 1).to_vec().unwrap();
        let (a, ra) = make_typed(&data, &shape, layout, Device::Cpu, dtypes.0);
        let (b, rb) = make_typed(&other_data, &other_shape, Layout::Contiguous, Device::Cpu, dtypes.1);
        let got = engine::op::Op::Binary(op).apply(&[(&a).into(), (&b).into()], engine::SourceLocation::caller()).unwrap();
        // PyTorch's promotion: two tensors with dimensions of different dtypes meet at f32,
        // unless one of them is 0-d.
        let promoted = if b.rank() == 0 { dtypes.0 } else { dtypes.0.promote(dtypes.1).unwrap() };
        prop_assert_eq!(got.dtype(), promoted);
        let (rtol, atol) = tolerance(promoted);
        let want = RefTensor::zip(&[&ra, &rb], |v| reference::binary(op, v[0], v[1]));
        // `pow` of a negative base is NaN in both; comparisons of equal values round alike.
        assert_close(&got, &want, None, rtol.max(1.3e-6), atol);
    }

    #[test]
    fn half_precision_reductions_accumulate_in_f32(
        kind in proptest::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max]),
        (shape, data) in tensor_data(1..=3, 40),
        dim_seed in any::<usize>(),
        layout in layouts(),
        dtype in half_dtypes(),
    ) {
        let dim = dim_seed % shape.len();
        let (x, rx) = make_typed(&data, &shape, layout, Device::Cpu, dtype);
        let got = match kind {
            ReduceOp::Sum => x.sum(dim as isize, true),
            ReduceOp::Mean => x.mean(dim as isize, true),
            ReduceOp::Max => x.amax(dim as isize, true),
        }.unwrap();
        prop_assert_eq!(got.dtype(), dtype);
        let scale = rx.abs().reduce(kind, dim, true);
        let (rtol, atol) = tolerance(dtype);
        assert_close(&got, &rx.reduce(kind, dim, true), Some(&scale), rtol, atol);
    }

    #[test]
    fn half_precision_softmax_and_layer_norm_match(
        (shape, data) in (1usize..=5, 1usize..=300).prop_flat_map(|(r, c)| (Just(vec![r, c]), values(r * c))),
        dim_seed in any::<usize>(),
        layout in layouts(),
        dtype in half_dtypes(),
        seed in any::<u64>(),
    ) {
        let dim = dim_seed % shape.len();
        let (rtol, atol) = tolerance(dtype);
        let (x, rx) = make_typed(&data, &shape, layout, Device::Cpu, dtype);
        assert_close(&x.softmax(dim as isize).unwrap(), &rx.softmax(dim, false), None, rtol, atol);
        // log-probabilities near zero: their rounding is relative to the terms they came from.
        let log = x.log_softmax(dim as isize).unwrap();
        assert_close(&log, &rx.softmax(dim, true), Some(&rx.softmax(dim, true).map(|v| v.abs() + 1.0)), rtol, atol);
        let d = *shape.last().unwrap();
        let (w, rw) = make_typed(&Tensor::uniform(&[d], 0.5, 1.5, seed).to_vec().unwrap(), &[d], Layout::Contiguous, Device::Cpu, dtype);
        let (b, rb) = make_typed(&Tensor::uniform(&[d], -1.0, 1.0, seed + 1).to_vec().unwrap(), &[d], Layout::Contiguous, Device::Cpu, dtype);
        let normed = x.layer_norm(&w, &b, 1e-5).unwrap();
        prop_assert_eq!(normed.dtype(), dtype);
        // Normalized values are O(1); their error is the output's rounding.
        let want = rx.layer_norm(&rw, &rb, 1e-5);
        assert_close(&normed, &want, Some(&want.map(|v| v.abs() + 1.0)), rtol, atol.max(1e-4));
    }

    #[test]
    fn half_precision_matmul_and_attention_match(
        (m, k, n) in (1usize..=9, 1usize..=40, 1usize..=9),
        dtype in half_dtypes(),
        causal in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let (rtol, atol) = tolerance(dtype);
        let a_data = Tensor::uniform(&[m, k], -1.0, 1.0, seed).to_vec().unwrap();
        let b_data = Tensor::uniform(&[k, n], -1.0, 1.0, seed + 1).to_vec().unwrap();
        let (a, ra) = make_typed(&a_data, &[m, k], Layout::Contiguous, Device::Cpu, dtype);
        let (b, rb) = make_typed(&b_data, &[k, n], Layout::Transposed, Device::Cpu, dtype);
        let got = a.matmul(&b).unwrap();
        prop_assert_eq!(got.dtype(), dtype);
        assert_close(&got, &ra.matmul(&rb), Some(&ra.abs().matmul(&rb.abs())), rtol, atol);
        // Attention in half precision against its float32 math path on the same rounded inputs.
        let (q, kk, v) = (a.reshape(&[1, m, k]).unwrap(), a.reshape(&[1, m, k]).unwrap(), a.reshape(&[1, m, k]).unwrap());
        let got = q.scaled_dot_product_attention(&kk, &v, None, causal, None).unwrap();
        prop_assert_eq!(got.dtype(), dtype);
        let wide = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
        let want = engine::device::with_kernels(engine::device::Kernels::Plain, || {
            wide(&q).scaled_dot_product_attention(&wide(&kk), &wide(&v), None, causal, None)
        }).unwrap();
        let want = RefTensor::new(want.shape().to_vec(), want.to_vec().unwrap().iter().map(|&x| x as f64).collect());
        assert_close(&got, &want, Some(&want.map(|x| x.abs() + 1.0)), rtol, atol);
    }
}

#[test]
fn conversions_round_to_nearest_even_and_print_their_dtype() {
    let x = Tensor::from_vec(vec![1.0, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, 70000.0, f32::NAN], &[5]).unwrap();
    let b = x.to_dtype(DType::BF16).unwrap();
    let values = b.to_vec().unwrap();
    assert_eq!(&values[..4], &[1.0, 1.0, 1.0 + 4.0 / 256.0, 70144.0]);
    assert!(values[4].is_nan());
    let h = x.to_dtype(DType::F16).unwrap().to_vec().unwrap();
    assert_eq!(h[3], f32::INFINITY, "70000 overflows f16 (largest 65504)");
    assert_eq!(b.to_dtype(DType::F32).unwrap().dtype(), DType::F32);
    let printed = Tensor::from_vec(vec![0.5, 2.0], &[2]).unwrap().to_dtype(DType::BF16).unwrap().to_string();
    assert_eq!(printed, "tensor([0.5000, 2.0000], dtype=bf16)");
    // A strided view converts element by element; FP8 stores what PyTorch's casts store.
    let t = Tensor::arange(6).reshape(&[2, 3]).unwrap().t().unwrap();
    assert_eq!(t.to_dtype(DType::F16).unwrap().to_vec().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let f8 = Tensor::from_vec(vec![1.0, 300.0, 500.0], &[3]).unwrap().to_dtype(DType::F8E4M3).unwrap();
    let f8 = f8.to_vec().unwrap();
    assert_eq!(&f8[..2], &[1.0, 288.0]);
    assert!(f8[2].is_nan(), "past 448 an e4m3 cast gives NaN, as PyTorch's does");
}

#[test]
fn dtype_rules_are_typed_errors() {
    let a = Tensor::ones_dtype(&[2, 3], DType::BF16);
    let b = Tensor::ones(&[3, 2]);
    let err = a.matmul(&b).unwrap_err();
    assert!(matches!(err, engine::Error::DType { .. }), "{err}");
    assert!(err.to_string().contains("bf16 and f32"), "{err}");
    let f8 = a.to_dtype(DType::F8E4M3).unwrap();
    let err = f8.exp().unwrap_err().to_string();
    assert!(err.contains("8-bit floats are matrix-product inputs only"), "{err}");
    let err = f8.add(&a).unwrap_err().to_string();
    assert!(err.contains("8-bit"), "{err}");
    // A scalar does not promote a half-precision tensor; a 0-d tensor does not either.
    assert_eq!(a.mul(2.5).unwrap().dtype(), DType::BF16);
    assert_eq!(a.add(&Tensor::scalar(1.0)).unwrap().dtype(), DType::BF16);
    assert_eq!(a.add(&Tensor::ones_dtype(&[3], DType::F16)).unwrap().dtype(), DType::F32);
    let scale = Tensor::scalar(2.0);
    let b = f8.t().unwrap().contiguous().unwrap();
    let err = f8.scaled_mm(&b, &scale, &scale, DType::BF16).unwrap_err();
    assert!(matches!(err, engine::Error::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("compute capability 8.9"), "{err}");
}

#[test]
fn linear_is_matmul_with_transposed_weight_plus_bias() {
    let x = Tensor::randn(&[3, 5], 1);
    let w = Tensor::randn(&[4, 5], 2);
    let b = Tensor::randn(&[4], 3);
    let direct = x.matmul(&w.t().unwrap()).unwrap().add(&b).unwrap();
    assert_eq!(x.linear(&w, Some(&b)).unwrap().to_vec().unwrap(), direct.to_vec().unwrap());
}

#[test]
fn large_pointwise_ops_take_the_parallel_path_and_stay_exact() {
    let n = (1 << 16) + 3;
    let x = Tensor::uniform(&[n], -1.0, 1.0, 5);
    let y = x.add(&x).unwrap().to_vec().unwrap();
    assert!(x.to_vec().unwrap().iter().zip(&y).all(|(a, b)| 2.0 * a == *b));
}

#[test]
fn bad_shapes_are_errors_that_name_op_shapes_and_line() {
    let err = Tensor::ones(&[2, 3]).matmul(&Tensor::ones(&[4, 5])).unwrap_err().to_string();
    assert!(
        err.starts_with("matmul:") && err.contains("[2, 3] and [4, 5]") && err.contains("eager_reference.rs"),
        "{err}"
    );
    let err = Tensor::ones(&[2, 3]).sum(2, false).unwrap_err().to_string();
    assert!(err.contains("dim 2 is out of range for a tensor of rank 2"), "{err}");
    let err = Tensor::ones(&[2, 3]).reshape(&[4]).unwrap_err().to_string();
    assert!(err.contains("cannot view 6 elements as [4]"), "{err}");
}
