//! The optimizers against steps computed by hand from PyTorch's definitions.

use engine::Tensor;
use engine::optim::{AdamW, Optimizer, Sgd};

fn close(got: &[f32], expected: &[f64]) {
    for (g, e) in got.iter().zip(expected) {
        assert!((f64::from(*g) - e).abs() < 1e-5 * e.abs().max(1.0), "got {got:?}, expected {expected:?}");
    }
}

/// Sets `w.grad` to `g` (what a backward would have left).
fn with_grad(w: &Tensor, g: &[f32]) {
    w.set_grad(Some(Tensor::from_vec(g.to_vec(), w.shape()).unwrap()));
}

#[test]
fn sgd_with_momentum_and_weight_decay() {
    let w = Tensor::from_vec(vec![1.0, -2.0], &[2]).unwrap().requires_grad_(true);
    let sgd = Sgd::new(std::slice::from_ref(&w), 0.1).momentum(0.9).weight_decay(0.5);
    // Step 1: g = [0.5, 1.0] + 0.5 * [1, -2] = [1.0, 0.0]; buf = g; w = w - 0.1 * buf.
    with_grad(&w, &[0.5, 1.0]);
    sgd.step().unwrap();
    close(&w.to_vec().unwrap(), &[0.9, -2.0]);
    // Step 2: g = [0.2, -0.4] + 0.5 * [0.9, -2.0] = [0.65, -1.4]; buf = 0.9 * [1, 0] + g.
    with_grad(&w, &[0.2, -0.4]);
    sgd.step().unwrap();
    let buf = [0.9 * 1.0 + 0.65, 0.9 * 0.0 - 1.4];
    close(&w.to_vec().unwrap(), &[0.9 - 0.1 * buf[0], -2.0 - 0.1 * buf[1]]);
    // A parameter without a gradient is left alone, and zero_grad clears them.
    sgd.zero_grad();
    let before = w.to_vec().unwrap();
    sgd.step().unwrap();
    assert_eq!(w.to_vec().unwrap(), before);
}

#[test]
fn adamw_decouples_the_weight_decay() {
    let (lr, b1, b2, eps, wd) = (0.01f64, 0.9f64, 0.999f64, 1e-8f64, 0.1f64);
    let w = Tensor::from_vec(vec![0.5, -1.5, 2.0], &[3]).unwrap().requires_grad_(true);
    let adamw = AdamW::new(std::slice::from_ref(&w), lr as f32)
        .betas(b1 as f32, b2 as f32)
        .eps(eps as f32)
        .weight_decay(wd as f32);
    let grads = [[0.3f32, -0.2, 1.0], [-0.1, 0.4, 0.5]];
    let mut p: Vec<f64> = vec![0.5, -1.5, 2.0];
    let (mut m, mut v) = (vec![0.0f64; 3], vec![0.0f64; 3]);
    for (t, g) in grads.iter().enumerate() {
        with_grad(&w, g);
        adamw.step().unwrap();
        let t = t as i32 + 1;
        for i in 0..3 {
            let g = f64::from(g[i]);
            p[i] *= 1.0 - lr * wd;
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            let (m_hat, v_hat) = (m[i] / (1.0 - b1.powi(t)), v[i] / (1.0 - b2.powi(t)));
            p[i] -= lr * m_hat / (v_hat.sqrt() + eps);
        }
        close(&w.to_vec().unwrap(), &p);
    }
}

#[test]
fn steps_reach_every_handle_of_a_parameter() {
    // The model keeps one handle, a compiled function captured another: both see the update.
    let w = Tensor::from_vec(vec![1.0, 1.0], &[2]).unwrap().requires_grad_(true).with_name("w");
    let captured = w.clone();
    let f = engine::dynamo::compile(|x: Tensor| x.mul(&captured)?.sum_all()).backend(engine::backends::AotEager);
    let x = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
    f.call(&x).unwrap().backward().unwrap();
    Sgd::new(std::slice::from_ref(&w), 1.0).step().unwrap();
    assert_eq!(w.to_vec().unwrap(), vec![-2.0, -3.0]);
    assert_eq!(f.call(&x).unwrap().item().unwrap(), -18.0, "the compiled function reads the new values");
    let err = w.copy_(&Tensor::zeros(&[2])).unwrap_err().to_string();
    assert!(err.contains("no_grad"), "{err}");
}
