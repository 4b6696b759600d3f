//! Seeded random numbers for tensor initialisation: the same seed gives the same values on every
//! machine and device (values are drawn on the host, then copied), so a grader's random inputs
//! and a book's printed numbers are reproducible.

/// SplitMix64: tiny, fast and statistically sound enough for initialising tensors.
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 24 bits of precision (every value exactly representable).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal, by the Box-Muller transform.
    pub fn next_normal(&mut self) -> f32 {
        // 1 - u keeps the logarithm's argument in (0, 1].
        let u1 = 1.0 - self.next_f32() as f64;
        let u2 = self.next_f32() as f64;
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }
}
