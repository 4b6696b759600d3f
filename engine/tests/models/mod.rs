//! The models whose generated code is snapshotted and whose fusions are checked. They live in a
//! file of their own so that the source lines printed in their output code stay put.

use engine::{Result, Tensor};

/// The seed chapter's example: `(x + bias).relu() * 2`.
pub fn add_relu_mul(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].add(&t[1])?.relu()?.mul(2.0)
}

/// Eight pointwise ops over two inputs.
pub fn chain8(t: Vec<Tensor>) -> Result<Tensor> {
    let y = t[0].add(&t[1])?.mul(1.5)?.add(0.25)?.mul(&t[1])?;
    y.sub(&t[0])?.mul(0.5)?.add(1.0)?.mul(&t[0])
}

/// Softmax over the last dimension.
pub fn softmax(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].softmax(-1)
}

/// Layer norm over the last dimension.
pub fn layer_norm(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].layer_norm(&t[1], &t[2], 1e-5)
}

/// Two linear layers with a GELU between them, then a softmax.
pub fn mlp(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].linear(&t[1], Some(&t[2]))?.gelu()?.linear(&t[3], Some(&t[4]))?.softmax(-1)
}

/// `y + y.T`: the transposed read of a fused value forces a second kernel.
pub fn transpose_read(t: Vec<Tensor>) -> Result<Tensor> {
    let y = t[0].exp()?;
    y.add(&y.t()?)
}

/// A reduction over the outer dimension: each thread walks one strided column.
pub fn column_sum(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].sum(0, false)?.sqrt()
}

/// `sin`, then `tanh`: a chain of vector-math calls, which the C printer computes in groups.
pub fn vector_math_chain(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].sin()?.mul(2.0)?.tanh()
}

/// A bias broadcast over rows and a scale per row, then two `tanh`: the C printer loops over
/// rows and columns, and splits each row into groups.
pub fn bias_tanh_chain(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].add(&t[1])?.mul(&t[2])?.tanh()?.tanh()
}

/// A bias's gradient: the ReLU's backward, summed over the batch (an outer reduction).
pub fn bias_grad(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].relu()?.mul(&t[1])?.sum(0, false)
}

/// The MSE loss: a mean over every element, one long row.
pub fn mse_loss(t: Vec<Tensor>) -> Result<Tensor> {
    t[0].mse_loss(&t[1])
}
