//! Vector registers for the engine's hand-written CPU microkernels (`dot_tiles.rs`,
//! `outer_tiles.rs`), and the instruction sets those kernels are compiled for: the roles of
//! ATen's `Vectorized<float>` (`aten/src/ATen/cpu/vec/`) and of the CPU capabilities its
//! `DispatchStub` chooses between at run time.
//!
//! A microkernel is written once, generic over [`Lanes`], and instantiated inside one function
//! per instruction set, each compiled with `#[target_feature]` for it. [`Kernel::detect`] says
//! which of those functions this CPU can run.

// Only x86-64 has vector types that implement `Lanes`; elsewhere the trait goes unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m256, __m512, _mm_add_ps, _mm_cvtss_f32, _mm_hadd_ps, _mm256_castps256_ps128, _mm256_extractf128_ps,
    _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps, _mm512_fmadd_ps,
    _mm512_loadu_ps, _mm512_reduce_add_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
};

/// The instruction sets the microkernels are compiled for, widest first.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kernel {
    /// AVX-512F: 16-lane vectors (`__m512`), 32 vector registers.
    Avx512,
    /// AVX2 with fused multiply-add: 8-lane vectors (`__m256`), 16 vector registers.
    Avx2,
}

impl Kernel {
    /// Every kernel, widest first.
    const ALL: [Kernel; 2] = [Kernel::Avx512, Kernel::Avx2];

    /// The widest kernel this CPU runs, if any (none without AVX2 and FMA, and none off x86-64:
    /// callers then take a plain path).
    pub(super) fn detect() -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|kernel| kernel.runs_here())
    }

    /// Every kernel this CPU runs, widest first: tests check the AVX2 kernels on AVX-512
    /// machines too.
    #[cfg(test)]
    pub(super) fn available() -> Vec<Kernel> {
        Kernel::ALL.into_iter().filter(|kernel| kernel.runs_here()).collect()
    }

    /// Whether this CPU has the instructions the kernel is compiled for.
    fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        match self {
            Kernel::Avx512 => std::is_x86_feature_detected!("avx512f"),
            Kernel::Avx2 => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }
}

/// A vector of `f32` lanes and the operations the microkernels need. Each implementation is
/// compiled for its instruction set and inlined into the kernels compiled for the same set.
pub(super) trait Lanes: Copy {
    /// Lanes in one vector.
    const WIDTH: usize;
    /// All lanes zero.
    ///
    /// # Safety
    /// The CPU must run this vector type's instructions (so for every method).
    unsafe fn zero() -> Self;
    /// Every lane `x`.
    ///
    /// # Safety
    /// As for [`Lanes::zero`].
    unsafe fn splat(x: f32) -> Self;
    /// `WIDTH` elements from `p` on, any alignment.
    ///
    /// # Safety
    /// As for [`Lanes::zero`], and `p..p + WIDTH` must be readable.
    unsafe fn load(p: *const f32) -> Self;
    /// Writes the lanes to `p..p + WIDTH`, any alignment.
    ///
    /// # Safety
    /// As for [`Lanes::zero`], and `p..p + WIDTH` must be writable.
    unsafe fn store(self, p: *mut f32);
    /// `self + a * b` in each lane, rounded once.
    ///
    /// # Safety
    /// As for [`Lanes::zero`].
    unsafe fn mul_add(self, a: Self, b: Self) -> Self;
    /// The sum of the lanes.
    ///
    /// # Safety
    /// As for [`Lanes::zero`].
    unsafe fn sum(self) -> f32;
}

#[cfg(target_arch = "x86_64")]
impl Lanes for __m512 {
    const WIDTH: usize = 16;
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn zero() -> Self {
        _mm512_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn splat(x: f32) -> Self {
        _mm512_set1_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller guarantees 16 readable elements.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller guarantees 16 writable elements.
        unsafe { _mm512_storeu_ps(p, self) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mul_add(self, a: Self, b: Self) -> Self {
        _mm512_fmadd_ps(a, b, self)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn sum(self) -> f32 {
        _mm512_reduce_add_ps(self)
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for __m256 {
    const WIDTH: usize = 8;
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn zero() -> Self {
        _mm256_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn splat(x: f32) -> Self {
        _mm256_set1_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller guarantees 8 readable elements.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller guarantees 8 writable elements.
        unsafe { _mm256_storeu_ps(p, self) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mul_add(self, a: Self, b: Self) -> Self {
        _mm256_fmadd_ps(a, b, self)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn sum(self) -> f32 {
        let halves = _mm_add_ps(_mm256_castps256_ps128(self), _mm256_extractf128_ps::<1>(self));
        let pairs = _mm_hadd_ps(halves, halves);
        _mm_cvtss_f32(_mm_hadd_ps(pairs, pairs))
    }
}
