//! Every derivative formula against central finite differences of a float64 reference (PyTorch's
//! `gradcheck`, with the engine computing in f32): for random shapes and values, the gradient
//! autograd gives for `sum(f(x) * w)` (a random `w`, so that every output element matters
//! differently) must match `(L(x + h) - L(x - h)) / 2h` of the float64 reference of `f`.

use crate::common::reference::{self, RefTensor};
use engine::device::{Kernels, with_kernels};
use engine::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use engine::{AttnMask, Result, SourceLocation, Tensor};
use proptest::prelude::*;

/// Values in `[low, high)` for a shape, drawn from `seed`, as both an f32 tensor and the float64
/// reference of the same (rounded) numbers.
fn input(shape: &[usize], low: f32, high: f32, seed: u64) -> (Tensor, RefTensor) {
    let t = Tensor::uniform(shape, low, high, seed);
    let data = t.to_vec().unwrap().into_iter().map(f64::from).collect();
    (t, RefTensor::new(shape.to_vec(), data))
}

/// Checks autograd's gradients of `engine` at `inputs` against finite differences of
/// `reference`; `wants[i]` says whether input `i` requires grad (the others are constants).
fn check(
    inputs: &[(Tensor, RefTensor)],
    wants: &[bool],
    engine: impl Fn(&[Tensor]) -> Result<Tensor>,
    reference: impl Fn(&[RefTensor]) -> RefTensor,
) -> std::result::Result<(), TestCaseError> {
    let fail = |m: String| TestCaseError::fail(m);
    let leaves: Vec<Tensor> = inputs.iter().zip(wants).map(|((t, _), &w)| t.requires_grad_(w)).collect();
    let out = engine(&leaves).map_err(|e| fail(e.to_string()))?;
    let (w, w_ref) = input(out.shape(), -1.0, 1.0, 99);
    let loss = out.mul(&w).unwrap().reshape(&[out.numel()]).unwrap().sum(0, false).unwrap();
    loss.backward().map_err(|e| fail(e.to_string()))?;
    let refs: Vec<RefTensor> = inputs.iter().map(|(_, r)| r.clone()).collect();
    let value = |xs: &[RefTensor]| -> f64 {
        let y = reference(xs);
        assert_eq!(y.shape, w_ref.shape, "the reference's output shape");
        y.data.iter().zip(&w_ref.data).map(|(a, b)| a * b).sum()
    };
    for (i, leaf) in leaves.iter().enumerate() {
        if !wants[i] {
            if leaf.grad().is_some() {
                return Err(fail(format!("input {i} requires no grad but got one")));
            }
            continue;
        }
        let got = match leaf.grad() {
            Some(g) => g.to_vec().unwrap(),
            // No gradient reached it: the output does not depend on it (all zeros).
            None => vec![0.0; leaf.numel()],
        };
        for (e, &g) in got.iter().enumerate() {
            let h = 1e-6 * refs[i].data[e].abs().max(1.0);
            let mut plus = refs.clone();
            plus[i].data[e] += h;
            let mut minus = refs.clone();
            minus[i].data[e] -= h;
            let expected = (value(&plus) - value(&minus)) / (2.0 * h);
            let g = f64::from(g);
            if (g - expected).abs() > 2e-3 + 2e-3 * expected.abs() || g.is_nan() != expected.is_nan() {
                return Err(fail(format!("input {i} element {e}: autograd {g}, finite differences {expected}")));
            }
        }
    }
    Ok(())
}

fn shapes(ranks: std::ops::RangeInclusive<usize>, max: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1..=max, ranks)
}

/// The unary ops whose inputs must be positive (or above -1) in the reference's domain.
fn domain(op: UnaryOp) -> (f32, f32) {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Log1p => (0.3, 3.0),
        _ => (-3.0, 3.0),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn unary_formulas(op in proptest::sample::select(UnaryOp::ALL.to_vec()), shape in shapes(0..=3, 4), seed in any::<u64>()) {
        let (low, high) = domain(op);
        let x = input(&shape, low, high, seed);
        let here = SourceLocation::caller();
        check(&[x], &[true], |t| Op::Unary(op).apply(&[(&t[0]).into()], here), |r| r[0].map(|v| reference::unary(op, v)))?;
    }

    #[test]
    fn binary_formulas(
        op in proptest::sample::select(vec![BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Pow]),
        rows in 1usize..4, cols in 1usize..5, broadcast in 0u8..3, which in 0u8..3, seed in any::<u64>(),
    ) {
        // b is [rows, cols], [cols] or [rows, 1]: its gradient is the broadcast's sum.
        let b_shape = match broadcast { 0 => vec![rows, cols], 1 => vec![cols], _ => vec![rows, 1] };
        let (low, high) = if op == BinaryOp::Pow { (0.5, 2.0) } else if op == BinaryOp::Div { (0.5, 3.0) } else { (-3.0, 3.0) };
        let a = input(&[rows, cols], low, high, seed);
        let b = input(&b_shape, low, high, seed + 1);
        let wants = [which != 1, which != 2];
        let here = SourceLocation::caller();
        check(&[a, b], &wants, |t| Op::Binary(op).apply(&[(&t[0]).into(), (&t[1]).into()], here),
            |r| RefTensor::zip(&[&r[0], &r[1]], |v| reference::binary(op, v[0], v[1])))?;
    }

    #[test]
    fn scalar_operand_formulas(op in proptest::sample::select(vec![BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow, BinaryOp::Sub]), scalar in 0.5f32..2.0, seed in any::<u64>()) {
        let a = input(&[3, 2], 0.5, 2.0, seed);
        let here = SourceLocation::caller();
        check(std::slice::from_ref(&a), &[true], |t| Op::Binary(op).apply(&[(&t[0]).into(), scalar.into()], here),
            |r| r[0].map(|v| reference::binary(op, v, f64::from(scalar))))?;
        // The scalar first: `scalar op a`.
        check(&[a], &[true], |t| Op::Binary(op).apply(&[scalar.into(), (&t[0]).into()], here),
            |r| r[0].map(|v| reference::binary(op, f64::from(scalar), v)))?;
    }

    #[test]
    fn where_formula(rows in 1usize..4, cols in 1usize..5, seed in any::<u64>()) {
        let c = input(&[rows, cols], -1.0, 1.0, seed);
        let a = input(&[rows, cols], -2.0, 2.0, seed + 1);
        let b = input(&[cols], -2.0, 2.0, seed + 2);
        check(&[c, a, b], &[false, true, true], |t| t[0].gt(0.0)?.where_(&t[1], &t[2]),
            |r| RefTensor::zip(&[&r[0], &r[1], &r[2]], |v| if v[0] > 0.0 { v[1] } else { v[2] }))?;
    }

    #[test]
    fn reduction_formulas(kind in proptest::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max]), shape in shapes(1..=3, 4), dim in 0usize..3, keepdim in any::<bool>(), seed in any::<u64>()) {
        let dim = dim % shape.len();
        let x = input(&shape, -3.0, 3.0, seed);
        let op = Op::Reduce { kind, dim, keepdim };
        let here = SourceLocation::caller();
        check(&[x], &[true], |t| op.apply(&[(&t[0]).into()], here), |r| r[0].reduce(kind, dim, keepdim))?;
    }

    #[test]
    fn matmul_formula(m in 1usize..4, k in 1usize..4, n in 1usize..4, batch in 0usize..3, seed in any::<u64>()) {
        // a batched on the left, b broadcast over a's batch when `batch` is 2.
        let (a_shape, b_shape) = match batch { 0 => (vec![m, k], vec![k, n]), 1 => (vec![2, m, k], vec![2, k, n]), _ => (vec![2, m, k], vec![k, n]) };
        let a = input(&a_shape, -2.0, 2.0, seed);
        let b = input(&b_shape, -2.0, 2.0, seed + 1);
        check(&[a, b], &[true, true], |t| t[0].matmul(&t[1]), |r| r[0].matmul(&r[1]))?;
    }

    #[test]
    fn linear_formula(rows in 1usize..4, inf in 1usize..4, out in 1usize..4, bias in any::<bool>(), three_d in any::<bool>(), seed in any::<u64>()) {
        let x_shape = if three_d { vec![2, rows, inf] } else { vec![rows, inf] };
        let mut inputs = vec![input(&x_shape, -2.0, 2.0, seed), input(&[out, inf], -2.0, 2.0, seed + 1)];
        if bias {
            inputs.push(input(&[out], -2.0, 2.0, seed + 2));
        }
        let wants = vec![true; inputs.len()];
        check(&inputs, &wants, |t| t[0].linear(&t[1], t.get(2)), |r| r[0].linear(&r[1], r.get(2)))?;
    }

    #[test]
    fn view_formulas(rows in 1usize..4, cols in 1usize..5, start in 0usize..4, step in 1usize..3, seed in any::<u64>()) {
        let x = input(&[rows, cols], -2.0, 2.0, seed);
        check(std::slice::from_ref(&x), &[true], |t| t[0].reshape(&[cols, rows]), |r| r[0].reshape(&[cols, rows]))?;
        check(std::slice::from_ref(&x), &[true], |t| t[0].t(), |r| r[0].permute(&[1, 0]))?;
        check(std::slice::from_ref(&x), &[true], |t| t[0].t()?.contiguous(), |r| r[0].permute(&[1, 0]))?;
        check(std::slice::from_ref(&x), &[true], |t| t[0].unsqueeze(0)?.expand(&[3, rows, cols]), |r| r[0].expand(&[3, rows, cols]))?;
        let start = start % cols;
        check(std::slice::from_ref(&x), &[true], |t| t[0].slice(1, start, cols, step), |r| r[0].slice(1, start, cols, step))?;
        let y = input(&[rows, 2], -2.0, 2.0, seed + 1);
        check(&[x, y], &[true, true], |t| Tensor::cat(&[&t[0], &t[1]], 1), |r| RefTensor::cat(&[&r[0], &r[1]], 1))?;
    }

    #[test]
    fn normalization_formulas(shape in shapes(1..=3, 5), dim in 0usize..3, seed in any::<u64>()) {
        let dim = dim % shape.len();
        let x = input(&shape, -3.0, 3.0, seed);
        check(std::slice::from_ref(&x), &[true], |t| t[0].softmax(dim as isize), |r| r[0].softmax(dim, false))?;
        check(std::slice::from_ref(&x), &[true], |t| t[0].log_softmax(dim as isize), |r| r[0].softmax(dim, true))?;
        let d = shape[shape.len() - 1];
        let (w, b) = (input(&[d], 0.5, 1.5, seed + 1), input(&[d], -1.0, 1.0, seed + 2));
        check(&[x, w, b], &[true, true, true], |t| t[0].layer_norm(&t[1], &t[2], 1e-5), |r| r[0].layer_norm(&r[1], &r[2], 1e-5))?;
    }

    #[test]
    fn attention_formula(l in 1usize..6, s in 1usize..6, e in 1usize..5, ev in 1usize..5, masking in 0u8..4, seed in any::<u64>()) {
        // masking: 0 none, 1 causal, 2 boolean, 3 additive.
        let causal = masking == 1 && l <= s;
        let q = input(&[2, l, e], -1.5, 1.5, seed);
        let k = input(&[2, s, e], -1.5, 1.5, seed + 1);
        let v = input(&[2, s, ev], -1.5, 1.5, seed + 2);
        let scale = 1.0 / (e as f32).sqrt();
        // A boolean mask keeps key 0 for every query, so no row is entirely masked.
        let (mask, mask_ref) = input(&[l, s], -1.0, 1.0, seed + 3);
        let boolean = mask.gt(-0.3).unwrap().maximum(&Tensor::from_vec((0..s).map(|j| if j == 0 { 1.0 } else { 0.0 }).collect(), &[s]).unwrap()).unwrap();
        let boolean_ref = RefTensor::new(vec![l, s], boolean.to_vec().unwrap().into_iter().map(f64::from).collect());
        // The backward kernel of each provider: the tuned (blocked) one and the plain one,
        // composed of products and a softmax.
        for kernels in [Kernels::Tuned, Kernels::Plain] {
            with_kernels(kernels, || check(&[q.clone(), k.clone(), v.clone()], &[true, true, true], |t| {
                let m = match masking { 2 => Some(AttnMask::Boolean(&boolean)), 3 => Some(AttnMask::Additive(&mask)), _ => None };
                t[0].scaled_dot_product_attention(&t[1], &t[2], m, causal, Some(scale))
            }, |r| {
                let m = match masking { 2 => Some((&boolean_ref, false)), 3 => Some((&mask_ref, true)), _ => None };
                RefTensor::attention(&r[0], &r[1], &r[2], m, causal, f64::from(scale))
            }))?;
        }
    }

    #[test]
    fn loss_formulas(batch in 1usize..5, classes in 2usize..5, seed in any::<u64>()) {
        let x = input(&[batch, classes], -2.0, 2.0, seed);
        let target = input(&[batch, classes], -2.0, 2.0, seed + 1);
        check(&[x.clone(), target], &[true, true], |t| t[0].mse_loss(&t[1]), |r| {
            let d = RefTensor::zip(&[&r[0], &r[1]], |v| (v[0] - v[1]).powi(2));
            RefTensor::scalar(d.data.iter().sum::<f64>() / d.data.len() as f64)
        })?;
        let labels: Vec<f32> = (0..batch).map(|i| ((seed as usize + i) % classes) as f32).collect();
        let labels_t = Tensor::from_vec(labels.clone(), &[batch]).unwrap();
        check(std::slice::from_ref(&x), &[true], |t| t[0].cross_entropy(&labels_t), |r| {
            let log_p = r[0].softmax(1, true);
            let picked: f64 = labels.iter().enumerate().map(|(i, &c)| log_p.data[i * classes + c as usize]).sum();
            RefTensor::scalar(-picked / batch as f64)
        })?;
    }
}

#[test]
fn comparisons_are_not_differentiable() {
    let x = Tensor::randn(&[3], 0).requires_grad_(true);
    for op in [BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge] {
        let mask = Op::Binary(op).apply(&[(&x).into(), 0.0.into()], SourceLocation::caller()).unwrap();
        assert!(!mask.requires_grad(), "{op:?}");
    }
}
