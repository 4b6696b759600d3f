//! The models the phase 4 exercises compile. Given, not exercises: the exercise crate and its
//! solved twin both re-export them as `models`.

use engine::{Result, Tensor};

/// A model: takes its inputs (activations and parameters alike), returns one tensor.
pub type Model = fn(Vec<Tensor>) -> Result<Tensor>;

/// `(x + bias).relu() * 2`: the fused add-ReLU-mul kernel of the course's sources.
pub fn add_relu_mul(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].add(&t[1])?.relu()?.mul(2.0)
}

/// Softmax over the last dimension: a max, a sum, and pointwise work around them.
pub fn softmax(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].softmax(-1)
}

/// Layer norm over the last dimension: two means and pointwise work around them.
pub fn layer_norm(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].layer_norm(&t[1], &t[2], 1e-5)
}

/// Two linear layers with a GELU between them, then a softmax (phase 1's model).
pub fn mlp(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].linear(&t[1], Some(&t[2]))?.gelu()?.linear(&t[3], Some(&t[4]))?.softmax(-1)
}

/// `e + e.T` with `e = exp(x)`: the transposed read keeps the two ops apart.
pub fn transpose_read(t: Vec<Tensor>) -> Result<Tensor> {
    let e = t[0].exp()?;
    e.add(&e.t()?)
}

/// `sqrt(sum(x * x, dim 0))`: a reduction over the outer dimension, with a prologue and an
/// epilogue.
pub fn column_norm(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].mul(&t[0])?.sum(0, false)?.sqrt()
}

/// Every model with example inputs drawn from `seed`, by name.
pub fn catalogue(seed: u64) -> Vec<(&'static str, Model, Vec<Tensor>)> {
    let randn = |shape: &[usize], k: u64| Tensor::randn(shape, seed.wrapping_mul(16).wrapping_add(k));
    vec![
        ("add_relu_mul", add_relu_mul as Model, vec![randn(&[1000], 0), randn(&[1000], 1)]),
        ("softmax", softmax, vec![randn(&[6, 100], 0)]),
        ("layer_norm", layer_norm, vec![randn(&[6, 64], 0), randn(&[64], 1), randn(&[64], 2)]),
        (
            "mlp",
            mlp,
            vec![
                randn(&[4, 16], 0),
                randn(&[32, 16], 1).with_name("fc1.weight"),
                randn(&[32], 2).with_name("fc1.bias"),
                randn(&[8, 32], 3).with_name("fc2.weight"),
                randn(&[8], 4).with_name("fc2.bias"),
            ],
        ),
        ("transpose_read", transpose_read, vec![randn(&[5, 5], 0)]),
        ("column_norm", column_norm, vec![randn(&[7, 9], 0)]),
    ]
}
