//! What a CPU matrix product applies to its output as it writes it: the bias add and ReLU that
//! Inductor folds into a GEMM (`inductor::modes::gemm_epilogue`), ATen's `addmm` and
//! `_addmm_activation`. Applied while the product's values are in registers or still in the
//! cache, it saves the separate kernel that would read the product back.

use std::ops::Range;

/// `relu(x + bias)` per element, the bias one value per column; either part may be absent.
#[derive(Clone, Copy, Default)]
pub(crate) struct Epilogue<'a> {
    /// One value per column of the product, added to every row.
    pub bias: Option<&'a [f32]>,
    /// Whether negative values (after the bias) become 0; NaN stays NaN, as the eager ReLU.
    pub relu: bool,
}

impl Epilogue<'_> {
    /// The plain product.
    pub(crate) const NONE: Epilogue<'static> = Epilogue { bias: None, relu: false };

    /// The value written at column `col` for the product `x`.
    #[inline(always)]
    pub(super) fn at(&self, x: f32, col: usize) -> f32 {
        let x = match self.bias {
            Some(bias) => x + bias[col],
            None => x,
        };
        if self.relu && x < 0.0 { 0.0 } else { x }
    }

    /// Applies it to columns `cols` of rows `rows` of the row-major `[_, n]` output at `c`.
    ///
    /// # Safety
    /// The block must lie inside the output, and be the caller's alone to write meanwhile.
    pub(super) unsafe fn apply(&self, c: *mut f32, n: usize, rows: Range<usize>, cols: Range<usize>) {
        if self.bias.is_none() && !self.relu {
            return;
        }
        for row in rows {
            // SAFETY: the caller's block.
            let out = unsafe { std::slice::from_raw_parts_mut(c.add(row * n + cols.start), cols.len()) };
            for (j, x) in out.iter_mut().enumerate() {
                *x = self.at(*x, cols.start + j);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Epilogue;

    #[test]
    fn the_bias_goes_to_every_row_then_the_relu_keeps_nan() {
        let mut product = vec![1.0, -2.0, 3.0, -4.0, 5.0, f32::NAN];
        let epilogue = Epilogue { bias: Some(&[0.5, 1.0, -4.0]), relu: true };
        // SAFETY: the whole `[2, 3]` product.
        unsafe { epilogue.apply(product.as_mut_ptr(), 3, 0..2, 0..3) };
        assert_eq!(product[..5], [1.5, 0.0, 0.0, 0.0, 6.0]);
        assert!(product[5].is_nan());
    }
}
