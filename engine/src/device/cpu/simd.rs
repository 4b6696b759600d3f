//! Hot loops compiled for the host's vector units, the role of ATen's `DispatchStub`, which
//! builds each CPU kernel once per instruction set and picks one at run time. The engine is
//! built for baseline x86-64 (SSE2, four lanes); a loop run through [`vectorized`] is compiled a
//! second time with AVX2 and FMA (eight lanes) and that copy runs wherever the CPU has them.

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

/// `f()` compiled with AVX2 and FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_fma<R>(f: impl FnOnce() -> R) -> R {
    f()
}
