//! Hot loops compiled for the host's vector units, the role of ATen's `DispatchStub`, which
//! builds each CPU kernel once per instruction set and picks one at run time. The engine is
//! built for baseline x86-64 (SSE2, four lanes); a loop run through [`vectorized`] is compiled a
//! second time with AVX2 and FMA (eight lanes) and that copy runs wherever the CPU has them.
//! [`vectorized_for`] adds an AVX-512 copy (sixteen lanes), for loops that run beside the
//! AVX-512 microkernels (`lanes.rs`).

use super::lanes::Kernel;
use crate::device::cpu::Loops;

/// Loops compiled again with AVX2 and FMA, as [`vectorized`] says: how the tuned elementwise
/// kernels run the shared loops of `pointwise.rs`.
pub(crate) struct Vectorized;

impl Loops for Vectorized {
    #[inline(always)]
    fn run<R>(f: impl FnOnce() -> R) -> R {
        vectorized(f)
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
