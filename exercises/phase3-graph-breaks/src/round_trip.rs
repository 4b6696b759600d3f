//! Exercise `round_trip`: host arithmetic on a tensor's values, rewritten as tensor ops.

use engine::{Result, Tensor};

// ANCHOR: standardized
/// **Exercise `round_trip`.**
/// [`standardized_original`](crate::models::standardized_original) without its graph break: the
/// same statistics (mean and variance over every element), computed with tensor ops so that they
/// stay in the graph. Outputs agree up to float rounding.
///
/// Book: `book/src/phase3/exercises.md`, section "round_trip". Check: `cargo grader check phase3`.
pub fn standardized(x: &Tensor) -> Result<Tensor> {
    // ANCHOR: solution
    let h = x.mul(2.0)?.add(1.0)?;
    let n = h.numel() as f32;
    let mean = h.sum_all()?.div(n)?;
    let centered = h.sub(&mean)?;
    let var = centered.mul(&centered)?.sum_all()?.div(n)?;
    centered.div(&var.add(1e-5)?.sqrt()?)
    // ANCHOR_END: solution
}
// ANCHOR_END: standardized
