//! Exercise `fp8_scales`: matrices in an 8-bit float with one scale per row, and their product.

use engine::{DType, Result, Tensor};

/// A matrix stored in an 8-bit float with one scale per row: row `i` of the matrix it stands for
/// is `data[i] * scales[i]`. These are the operands `torch._scaled_mm` takes with row-wise
/// scales (`scale_a` of shape `[m, 1]`, `scale_b` of shape `[1, n]`).
#[derive(Clone, Debug)]
pub struct RowScaled {
    /// The rows, each divided by its scale, as `f8e4m3` or `f8e5m2`: `[rows, cols]`.
    pub data: Tensor,
    /// One scale per row, positive and finite.
    pub scales: Vec<f32>,
}

// ANCHOR: quantize_rows
/// **Exercise `fp8_scales`, part 1.** Store `x` (`f32`, `[rows, cols]`) in `dtype`
/// (`DType::F8E4M3` or `DType::F8E5M2`) with one scale per row, chosen so that each row keeps as
/// many significant bits as the format has. An 8-bit float covers a narrow range (`f8e4m3`:
/// magnitudes from about 0.002 to 448, `dtype.max_value()`); a row divided by a scale that is
/// too small overflows (to NaN in `f8e4m3`: the engine's cast does not saturate, as PyTorch's
/// does not), by one too large it falls into the subnormals and rounds to zero.
///
/// Judged on matrices drawn from the run's seed whose rows differ in magnitude by up to twelve
/// orders (a row may be all zeros), in both formats: `data` has `dtype` and `x`'s shape; every
/// scale is positive and finite; a nonzero row's largest magnitude divided by its scale lies in
/// the format's top binade, `(max / 2, max]`; and every element of `data[i] * scales[i]` is
/// within half a step of the format of its element of `x`.
///
/// Book: `book/src/phase5/exercises.md`, section "fp8_scales". Check: `cargo grader check phase5`.
pub fn quantize_rows(x: &Tensor, dtype: DType) -> Result<RowScaled> {
    todo!()
}
// ANCHOR_END: quantize_rows

// ANCHOR: fp8_linear
/// **Exercise `fp8_scales`, part 2.** The product `a @ b.T` of two row-scaled matrices, `a`
/// (`[m, k]`) and `b` (`[n, k]`, a weight as `linear` takes it), in `f32` (`[m, n]`): what
/// `torch._scaled_mm` computes with row-wise scales, which a GPU's FP8 tensor cores run. Every
/// 8-bit value is exact in `f32`: multiply the stored values as they are, accumulate in `f32`,
/// and apply the scales where they belong. The engine's `scaled_mm` is off limits.
///
/// Judged on row-scaled matrices the judge makes from the run's seed: each element of the
/// result within `1e-5` of the exact product of the dequantized matrices, relative to the sum of
/// the magnitudes of its terms.
///
/// Book: `book/src/phase5/exercises.md`, section "fp8_scales". Check: `cargo grader check phase5`.
pub fn fp8_linear(a: &RowScaled, b: &RowScaled) -> Result<Tensor> {
    todo!()
}
// ANCHOR_END: fp8_linear
