//! Hot loops compiled for the host's vector units, the role of ATen's `DispatchStub`, which
//! builds each CPU kernel once per instruction set and picks one at run time. The engine is
//! built for baseline x86-64 (SSE2, four lanes); a loop run through [`vectorized`] is compiled a
//! second time with AVX2 and FMA (eight lanes) and that copy runs wherever the CPU has them.
//! [`vectorized_for`] adds an AVX-512 copy (sixteen lanes), for loops that run beside the
//! AVX-512 microkernels (`lanes.rs`).

use half::slice::HalfFloatSliceExt;

use super::lanes::Kernel;
use crate::device::cpu::{Loops, bf16_bits_to_f32, f32_to_bf16_bits};
use crate::dtype::{bf16, f16};

/// Loops compiled again with AVX2 and FMA, as [`vectorized`] says: how the tuned elementwise
/// kernels run the shared loops of `pointwise.rs`, and how they convert half-precision elements:
/// `f16` with F16C's instructions (the `half` crate's slice conversions pick them at run time),
/// `bf16` with vectorised integer code, or AVX-512 BF16's rounding instruction where the CPU has
/// it.
pub(crate) struct Vectorized;

impl Loops for Vectorized {
    #[inline(always)]
    fn run<R>(f: impl FnOnce() -> R) -> R {
        vectorized(f)
    }

    fn widen_bf16(src: &[bf16], dst: &mut [f32]) {
        vectorized(
            #[inline(always)]
            || dst.iter_mut().zip(src).for_each(|(d, s)| *d = bf16_bits_to_f32(s.to_bits())),
        )
    }

    fn narrow_bf16(src: &[f32], dst: &mut [bf16]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512bf16") {
            // SAFETY: the CPU has AVX-512 BF16 (and with it AVX-512F).
            return unsafe { narrow_bf16_avx512(src, dst) };
        }
        vectorized(
            #[inline(always)]
            || dst.iter_mut().zip(src).for_each(|(d, &s)| *d = bf16::from_bits(f32_to_bf16_bits(s))),
        )
    }

    fn widen_f16(src: &[f16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }

    fn narrow_f16(src: &[f32], dst: &mut [f16]) {
        dst.convert_from_f32_slice(src);
    }
}

/// `dst[i] = src[i]` rounded to bf16 sixteen at a time by `vcvtneps2bf16` (round to nearest
/// even; like the rest of AVX-512 BF16 it flushes subnormal inputs to zero), the tail by
/// [`f32_to_bf16_bits`].
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512 BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn narrow_bf16_avx512(src: &[f32], dst: &mut [bf16]) {
    use std::arch::x86_64::{__m256i, _mm256_storeu_si256, _mm512_cvtneps_pbh, _mm512_loadu_ps};
    let n = src.len().min(dst.len());
    let whole = n - n % 16;
    for i in (0..whole).step_by(16) {
        // SAFETY: `i + 16 <= n` elements of both slices; unaligned loads and stores.
        unsafe {
            let v = _mm512_loadu_ps(src.as_ptr().add(i));
            let h: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(v));
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), h);
        }
    }
    for i in whole..n {
        dst[i] = bf16::from_bits(f32_to_bf16_bits(src[i]));
    }
}

/// `f()`, compiled with AVX2 and FMA enabled when this CPU has them. Only code inlined into the
/// copy gets the wider vectors, and `f` is called from two places, so mark the closure and the
/// functions it calls `#[inline(always)]`.
#[inline(always)]
pub(crate) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features `avx2_fma` is compiled for.
        return unsafe { avx2_fma(f) };
    }
    f()
}

/// `f()`, compiled with AVX-512 for [`Kernel::Avx512`] (from [`Kernel::detect`]), as
/// [`vectorized`] otherwise; the same rules for inlining apply.
#[inline(always)]
pub(crate) fn vectorized_for<R>(kernel: Option<Kernel>, f: impl FnOnce() -> R) -> R {
    match kernel {
        // SAFETY: `Kernel::detect` returns `Avx512` only for a CPU with AVX-512F.
        #[cfg(target_arch = "x86_64")]
        Some(Kernel::Avx512) => unsafe { avx512(f) },
        _ => vectorized(f),
    }
}

/// `f()` compiled with AVX2 and FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_fma<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f()` compiled with AVX-512F (which brings AVX2 and FMA with it).
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}
