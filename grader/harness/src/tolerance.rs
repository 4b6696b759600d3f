//! How far a value may be from the expected one: the rule checks compare with, and the judge
//! compares transcripts with.

/// `|actual - expected| <= abs + rel * |expected|`, the rule of `torch.testing.assert_close`.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    /// Absolute part.
    pub abs: f32,
    /// Relative part, scaled by the expected value's magnitude.
    pub rel: f32,
}

impl Tolerance {
    /// Bit-for-bit equality (NaN equals NaN): for code that must run the very same kernels.
    pub const EXACT: Tolerance = Tolerance { abs: 0.0, rel: 0.0 };
    /// What float32 code computing the same maths in another order may differ by.
    pub const F32: Tolerance = Tolerance { abs: 1e-5, rel: 1e-4 };

    pub(crate) fn accepts(self, actual: f32, expected: f32) -> bool {
        if actual.is_nan() || expected.is_nan() {
            return actual.is_nan() && expected.is_nan();
        }
        actual == expected || (actual - expected).abs() <= self.abs + self.rel * expected.abs()
    }
}
