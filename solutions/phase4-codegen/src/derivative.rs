//! Exercise `layer_norm_backward`: the derivative of layer norm, written with tensor ops as the
//! engine's derivative formulas are (`engine/src/tensor/autograd/derivatives.rs`).

use engine::{Result, Tensor};

// ANCHOR: layer_norm_backward
/// **Exercise `layer_norm_backward`.** The gradients of `y = layer_norm(x, weight, bias, eps)`,
/// normalised over the last dimension of `x` (`[..., d]`), given `grad_y`, the gradient of a loss
/// with respect to `y`: `(grad_x, grad_weight, grad_bias)`, of the shapes of `x`, `weight` (`[d]`)
/// and `bias` (`[d]`). Layer norm is `y = (x - mean) / sqrt(var + eps) * weight + bias`, with the
/// mean and the (biased) variance taken over the last dimension, as `Tensor::layer_norm`
/// computes it. `bias` itself does not appear: its gradient does not depend on it.
///
/// Write the formulas with tensor ops (`sub`, `mul`, `div`, `mean`, `sum`, `sqrt`, `reshape`), as
/// the engine's derivative formulas are written, so that they run on every device and record
/// into a trace. Asking autograd for the answer (`backward`, `autograd::grad`, `requires_grad_`)
/// is refused for this exercise.
///
/// Judged on shapes, values and `eps` drawn from the run's seed: each of the three gradients is
/// compared with central finite differences of layer norm that the grader computes itself, in
/// double precision.
///
/// Book: `book/src/phase4/exercises.md`, section "layer_norm_backward".
/// Check: `cargo grader check phase4`.
pub fn layer_norm_backward(x: &Tensor, weight: &Tensor, eps: f32, grad_y: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    // ANCHOR: solution
    let d = x.shape()[x.rank() - 1];
    let centered = x.sub(&x.mean(-1, true)?)?;
    let std = centered.mul(&centered)?.mean(-1, true)?.add(eps)?.sqrt()?;
    let normed = centered.div(&std)?;
    // The gradient with respect to the normalised value, then through the normalisation: the
    // mean and the variance both depend on every element of the row.
    let g = grad_y.mul(weight)?;
    let through_mean = g.sub(&g.mean(-1, true)?)?;
    let through_variance = normed.mul(&g.mul(&normed)?.mean(-1, true)?)?;
    let grad_x = through_mean.sub(&through_variance)?.div(&std)?;
    // The affine map's parameters: summed over every row.
    let rows = |t: &Tensor| t.reshape(&[t.numel() / d, d]);
    let grad_weight = rows(&grad_y.mul(&normed)?)?.sum(0, false)?;
    let grad_bias = rows(grad_y)?.sum(0, false)?;
    Ok((grad_x, grad_weight, grad_bias))
    // ANCHOR_END: solution
}
// ANCHOR_END: layer_norm_backward
