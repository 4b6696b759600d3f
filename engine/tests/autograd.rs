//! Autograd's behaviour as PyTorch's: leaves accumulate, `zero_grad` clears, `no_grad` and
//! `detach` stop recording, a second backward through freed values is an error, and so on; every
//! derivative formula against finite differences (`gradcheck`); the optimizers' steps (`optim`).

mod common;
#[path = "autograd/gradcheck.rs"]
mod gradcheck;
#[path = "autograd/optim.rs"]
mod optim;

use engine::{Error, Tensor, autograd};

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec().unwrap()
}

#[test]
fn gradients_accumulate_until_cleared() {
    let w = Tensor::from_vec(vec![1.0, -2.0], &[2]).unwrap().requires_grad_(true);
    for _ in 0..2 {
        w.mul(3.0).unwrap().sum_all().unwrap().backward().unwrap();
    }
    assert_eq!(values(&w.grad().unwrap()), vec![6.0, 6.0], "two backwards add up");
    w.zero_grad();
    assert!(w.grad().is_none());
    w.mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(values(&w.grad().unwrap()), vec![2.0, -4.0], "x * x reaches x twice: 2x");
}

#[test]
fn leaves_results_and_names() {
    let x = Tensor::randn(&[2, 2], 0);
    assert!(!x.requires_grad() && x.is_leaf() && x.grad_fn().is_none());
    let w = x.requires_grad_(true);
    assert!(w.requires_grad() && w.is_leaf());
    let y = w.exp().unwrap().layer_norm(&Tensor::ones(&[2]), &Tensor::zeros(&[2]), 1e-5).unwrap();
    assert!(y.requires_grad() && !y.is_leaf());
    assert_eq!(y.grad_fn().as_deref(), Some("LayerNormBackward"));
    assert_eq!(w.exp().unwrap().grad_fn().as_deref(), Some("ExpBackward"));
    assert!(!w.gt(0.0).unwrap().requires_grad(), "a comparison's mask has no gradient");
    // A constant operand gets no gradient, and the leaf's handle keeps its grad across clones.
    let named = w.with_name("w");
    named.mul(&x).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(values(&w.grad().unwrap()), values(&x));
}

#[test]
fn no_grad_and_detach_stop_recording() {
    let w = Tensor::randn(&[3], 1).requires_grad_(true);
    let y = autograd::no_grad(|| w.mul(2.0).unwrap());
    assert!(!y.requires_grad());
    assert!(autograd::is_grad_enabled());
    let d = w.detach();
    assert!(!d.requires_grad() && !d.mul(2.0).unwrap().requires_grad());
    let err = y.sum_all().unwrap().backward().unwrap_err();
    assert!(matches!(err, Error::Autograd { .. }) && err.to_string().contains("does not require grad"), "{err}");
}

#[test]
fn backward_needs_a_gradient_for_non_scalars() {
    let w = Tensor::randn(&[3], 2).requires_grad_(true);
    let y = w.mul(2.0).unwrap();
    let err = y.backward().unwrap_err().to_string();
    assert!(err.contains("implicitly created only for one-element outputs"), "{err}");
    y.backward_with(Some(&Tensor::ones(&[3])), false).unwrap();
    assert_eq!(values(&w.grad().unwrap()), vec![2.0; 3]);
}

#[test]
fn a_second_backward_needs_retain_graph() {
    let w = Tensor::randn(&[3], 3).requires_grad_(true);
    let loss = w.exp().unwrap().sum_all().unwrap();
    loss.backward_with(None, true).unwrap();
    loss.backward().unwrap();
    let err = loss.backward().unwrap_err().to_string();
    assert!(err.contains("a second time") && err.contains("retain_graph"), "{err}");
    let expected: Vec<f32> = values(&w).iter().map(|v| 2.0 * v.exp()).collect();
    for (g, e) in values(&w.grad().unwrap()).iter().zip(expected) {
        assert!((g - e).abs() < 1e-5);
    }
}

#[test]
fn grad_returns_gradients_without_touching_dot_grad() {
    let a = Tensor::randn(&[2, 3], 4).requires_grad_(true);
    let b = Tensor::randn(&[3], 5).requires_grad_(true);
    let unused = Tensor::randn(&[1], 6).requires_grad_(true);
    let y = a.mul(&b).unwrap().sum_all().unwrap();
    let grads = autograd::grad(&[y], &[a.clone(), b.clone(), unused], &[Tensor::scalar(1.0)], false).unwrap();
    assert_eq!(values(grads[0].as_ref().unwrap()), values(&b.expand(&[2, 3]).unwrap()));
    let column_sums = values(&a.detach().sum(0, false).unwrap());
    assert_eq!(values(grads[1].as_ref().unwrap()), column_sums, "a broadcast operand's gradient is summed");
    assert!(grads[2].is_none(), "the loss does not depend on it");
    assert!(a.grad().is_none() && b.grad().is_none());
}

#[test]
fn a_custom_op_has_no_formula() {
    let op = engine::dynamo::CustomOp::elementwise("test::twice", 1)
        .c_source("float twice(float x) { return 2.0f * x; }")
        .register()
        .unwrap();
    let w = Tensor::randn(&[2], 7).requires_grad_(true);
    let err = op.call(&[&w]).unwrap().sum_all().unwrap().backward().unwrap_err().to_string();
    assert!(err.contains("test::twice") && err.contains("not implemented"), "{err}");
}
