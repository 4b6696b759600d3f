//! Vector math: `exp`, `log`, `sin`, `cos`, `tanh` and `erf` as branch-free polynomials that a
//! compiler runs in vector lanes, the role SLEEF plays for ATen's vectorized CPU kernels (and
//! for TorchInductor's generated C++). Calls to libm cannot be vectorized; these can.
//!
//! The same algorithms are written twice: in Rust here, for the eager kernels, and in C by
//! [`c_source`], for generated kernels, both from the coefficient tables below, so eager and
//! compiled code compute the same values. Every step is a plain `+ - * /`, a fused multiply-add
//! written out (`mul_add` in Rust, `fmaf` in C: one rounding on both sides), a comparison turned
//! into a select, or a bit operation; neither side contracts any other `a * b + c` (Rust never
//! does; the C is compiled as ISO C, where GCC does not either).
//!
//! The multiply-adds are single instructions only where the CPU has FMA: the eager kernels call
//! these functions inside `tuned::simd::vectorized`, the copy compiled with FMA; called from
//! baseline x86-64 code, each `mul_add` would be a call into libm.
//!
//! Accuracy against a float64 reference (checked by this module's tests, over the domains named):
//! - `exp`: relative error below 2e-7 (results under 2^-126 lose precision gradually, as
//!   subnormals do); `log`: absolute error below 2e-7 near 1, relative below 2e-7 elsewhere;
//! - `sin`, `cos`: absolute error below 2e-7 for |x| <= 1e6 (the argument is reduced with
//!   multiply-adds against pi/2 in three parts); past 2^24 the result is bounded but meaningless;
//! - `tanh`: absolute error below 2e-7; `erf`: absolute error below 3e-7 (Cephes' polynomial
//!   below 1, Abramowitz and Stegun 7.1.26 above, which is what ATen's vectorized `erf` uses);
//! - `sigmoid`: absolute error below 3e-7; `gelu`: error below 5e-7, relative past |x| = 1.
//!
//! Measured worst cases are about half of each bound (bench/NOTES-cpu.md).

use std::f32::consts::FRAC_2_SQRT_PI as TWO_OVER_SQRT_PI;

use crate::op::UnaryOp;

/// `exp`: `x = n ln2 + r`, a degree-6 polynomial in `r` (Cephes `expf`), times `2^n`.
const EXP_POLY: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5];
/// `ln 2` in two parts: `n * LN2_HI` is exact for every `n` the range allows.
const LN2_HI: f32 = 0.693_359_4;
/// See `LN2_HI`.
const LN2_LO: f32 = -2.121_944_4e-4;
/// `exp`'s argument is clamped to `EXP_LO..=EXP_HI`, just past where its result overflows
/// (88.72) and rounds to zero (-103.97): the arithmetic then gives infinity and zero by itself,
/// with no select for them.
const EXP_HI: f32 = 89.0;
/// See `EXP_HI`.
const EXP_LO: f32 = -104.0;
/// `1.5 * 2^23`: adding and subtracting it rounds a float below `2^22` to the nearest integer
/// with plain arithmetic, which vectorizes where `floor` may be a library call.
const ROUND: f32 = 12_582_912.0;

/// `log`: `x = 2^e m`, `m` in `[sqrt(1/2), sqrt(2))`, `log(m)` from a degree-8 polynomial (Cephes
/// `logf`).
const LOG_POLY: [f32; 9] = [
    7.037_683_6e-2,
    -1.151_461_e-1,
    1.167_699_9e-1,
    -1.242_014_1e-1,
    1.424_932_3e-1,
    -1.666_805_8e-1,
    2.000_071_4e-1,
    -2.499_999_4e-1,
    3.333_333e-1,
];

/// `sin` near zero, in `z = r^2` (Cephes `sinf`): `r + r z P(z)`.
const SIN_POLY: [f32; 3] = [-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1];
/// `cos` near zero, in `z = r^2` (Cephes `cosf`): `1 - z/2 + z^2 P(z)`.
const COS_POLY: [f32; 3] = [2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2];
/// `pi / 2` as a sum of three floats, each the float nearest to what the previous ones leave of
/// it (worked out from 60 digits of `pi / 2`): for a whole `j` below 2^24, `|x| - j * PARTS[0]`
/// in one multiply-add is exact, and the two smaller parts carry the digits one float of `pi / 2`
/// lacks (Cody and Waite's reduction).
const PI_2_PARTS: [f32; 3] = [1.570_796_4, -4.371_139e-8, -1.715_124_5e-15];
/// Arguments are clamped to this (2^24) before reduction, so that the quadrant count `j` is a
/// whole float and the reduction stays exact; past it the result is bounded but meaningless.
const TRIG_LIMIT: f32 = 16_777_216.0;

/// `tanh` below `TANH_SMALL`, in `z = x^2` (Cephes `tanhf`): `x + x z P(z)`.
const TANH_POLY: [f32; 5] = [-5.704_988_7e-3, 2.063_909e-2, -5.373_971_6e-2, 0.133_314_42, -0.333_332_8];
/// Where `tanh` switches to `1 - 2 / (exp(2|x|) + 1)`.
const TANH_SMALL: f32 = 0.625;

/// `erf` below 1, in `z = x^2` (Cephes `erff`): `x P(z)`.
const ERF_POLY: [f32; 7] =
    [7.8538614e-5, -8.0101936e-4, 5.1883277e-3, -2.6853812e-2, 0.11283585, -0.37612626, TWO_OVER_SQRT_PI];
/// `erf` from 1: `1 - t Q(t) exp(-x^2)`, `t = 1 / (1 + p x)` (Abramowitz and Stegun 7.1.26).
const ERF_TAIL: [f32; 5] = [1.061_405_4, -1.453_152_1, 1.421_413_7, -0.284_496_74, 0.254_829_6];
/// The `p` of `ERF_TAIL`.
const ERF_P: f32 = 0.327_591_1;

/// `c[0] z^(n-1) + ... + c[n-1]`, by Horner's rule with a multiply-add a step.
#[inline(always)]
fn horner(c: &[f32], z: f32) -> f32 {
    c[1..].iter().fold(c[0], |acc, &k| acc.mul_add(z, k))
}

/// `2^n` for `n` in `-150..=128`, as the product of two normal powers of two.
#[inline(always)]
fn pow2(n: i32) -> (f32, f32) {
    let half = n >> 1;
    (f32::from_bits(((half + 127) as u32) << 23), f32::from_bits(((n - half + 127) as u32) << 23))
}

/// `e^x`.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // NaN fails the first comparison and is clamped to EXP_HI; the final select restores it.
    let c = if x < EXP_HI { x } else { EXP_HI };
    let c = if c > EXP_LO { c } else { EXP_LO };
    let n = (c * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, c));
    let p = horner(&EXP_POLY, r) * (r * r) + r + 1.0;
    // SAFETY: `c` was clamped (NaN included), so `n` is a whole number in -150..=128. A checked
    // `as` conversion would be done lane by lane; this one is one vector instruction.
    let (s1, s2) = pow2(unsafe { n.to_int_unchecked::<i32>() });
    let y = p * s1 * s2;
    if x.is_nan() { x } else { y }
}

/// Natural logarithm.
#[inline(always)]
pub(crate) fn log(x: f32) -> f32 {
    // Subnormals are scaled into the normal range first.
    let tiny = x < f32::MIN_POSITIVE;
    let xs = if tiny { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits();
    let e = ((bits >> 23) & 0xff) as i32 - 126 - if tiny { 23 } else { 0 };
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let low = m < std::f32::consts::FRAC_1_SQRT_2;
    let e = (if low { e - 1 } else { e }) as f32;
    let m = if low { m + m - 1.0 } else { m - 1.0 };
    let z = m * m;
    let y = m * z * horner(&LOG_POLY, m) + LN2_LO * e - 0.5 * z;
    let y = m + y + LN2_HI * e;
    if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        x
    } else {
        y
    }
}

/// `|x|` reduced to `r` in `[-pi/4, pi/4]` and its quadrant `q` in `0..4` (`|x| = j pi/2 + r`
/// with `q = j mod 4`), `pi/2` subtracted in three parts so that `r` keeps its digits for large
/// `x`.
#[inline(always)]
fn reduce_quadrant(ax: f32) -> (f32, i32) {
    let ax = if ax < TRIG_LIMIT { ax } else { TRIG_LIMIT };
    // `ax` is not negative, so truncating `v + 0.5` rounds `v` to the nearest integer.
    // SAFETY: `ax` was clamped (NaN included) to `0..=TRIG_LIMIT`, so the value fits an `i32`;
    // a checked `as` conversion would be done lane by lane.
    let j = unsafe { (ax * std::f32::consts::FRAC_2_PI + 0.5).to_int_unchecked::<i32>() };
    let minus_j = -(j as f32);
    let r = PI_2_PARTS.iter().fold(ax, |r, &part| minus_j.mul_add(part, r));
    (r, j & 3)
}

/// `sin(r)` and `cos(r)` for `r` in `[-pi/4, pi/4]`.
#[inline(always)]
fn sin_cos_poly(r: f32) -> (f32, f32) {
    let z = r * r;
    (horner(&SIN_POLY, z) * z * r + r, horner(&COS_POLY, z) * z * z - 0.5 * z + 1.0)
}

/// `sin(|x| + shift pi/2)` with its sign bit flipped by `sign`: sine and cosine in one.
#[inline(always)]
fn sin_shifted(x: f32, shift: i32, sign: u32) -> f32 {
    let (r, q) = reduce_quadrant(x.abs());
    let q = (q + shift) & 3;
    let (s, c) = sin_cos_poly(r);
    // sin(r + q pi/2) is cos(r) in quadrant 1, -sin(r) in 2, -cos(r) in 3. Negating flips the
    // sign bit (a select here would keep GCC from vectorizing the C twin).
    let y = if q & 1 != 0 { c } else { s };
    let y = f32::from_bits(y.to_bits() ^ ((q as u32 & 2) << 30) ^ sign);
    if x.is_finite() { y } else { f32::NAN }
}

/// Sine: odd, so the sign of `x` carries over.
#[inline(always)]
pub(crate) fn sin(x: f32) -> f32 {
    sin_shifted(x, 0, x.to_bits() & 0x8000_0000)
}

/// Cosine: `sin(|x| + pi/2)`.
#[inline(always)]
pub(crate) fn cos(x: f32) -> f32 {
    sin_shifted(x, 1, 0)
}

/// Hyperbolic tangent.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    // Past |x| = 44 `exp` overflows to infinity and `big` is exactly 1.
    let a = x.abs();
    let z = x * x;
    let small = horner(&TANH_POLY, z) * z * x + x;
    let big = 1.0 - 2.0 / (exp(a + a) + 1.0);
    let big = if x < 0.0 { -big } else { big };
    if a < TANH_SMALL || x.is_nan() { small } else { big }
}

/// The Gauss error function.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let a = x.abs();
    let small = x * horner(&ERF_POLY, x * x);
    let t = 1.0 / (1.0 + ERF_P * a);
    let big = 1.0 - t * horner(&ERF_TAIL, t) * exp(-(a * a));
    let big = if x < 0.0 { -big } else { big };
    if a < 1.0 || x.is_nan() { small } else { big }
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `x * Φ(x)`, the exact GELU.
#[inline(always)]
pub(crate) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// `c[0] z^(n-1) + ... + c[n-1]` by Horner's rule with `fmaf`, as a C expression in `z` (spelled
/// out, so that GCC sees arithmetic it can vectorize).
fn c_horner(c: &[f32], z: &str) -> String {
    c[1..].iter().fold(c_float(c[0]), |acc, &k| format!("fmaf({acc}, {z}, {})", c_float(k)))
}

/// A float as C text that reads back to the same bits.
fn c_float(v: f32) -> String {
    format!("{v:?}f")
}

/// A vector-math function: the name [`c_source`] defines it by, and the Rust function that
/// computes the same values.
pub(crate) type Function = (&'static str, fn(f32) -> f32);

/// The vector-math function for `op`, where there is one.
pub(crate) fn for_op(op: UnaryOp) -> Option<Function> {
    Some(match op {
        UnaryOp::Exp => ("vm_exp", exp),
        UnaryOp::Log => ("vm_log", log),
        UnaryOp::Sin => ("vm_sin", sin),
        UnaryOp::Cos => ("vm_cos", cos),
        UnaryOp::Tanh => ("vm_tanh", tanh),
        UnaryOp::Erf => ("vm_erf", erf),
        UnaryOp::Sigmoid => ("vm_sigmoid", sigmoid),
        UnaryOp::Gelu => ("vm_gelu", gelu),
        _ => return None,
    })
}

/// The C function [`c_source`] defines for `op`, where it has one.
pub(crate) fn c_function(op: UnaryOp) -> Option<&'static str> {
    for_op(op).map(|(name, _)| name)
}

/// The same functions in C (`vm_exp`, `vm_log`, `vm_sin`, `vm_cos`, `vm_tanh`, `vm_erf`,
/// `vm_sigmoid`, `vm_gelu`), always inlined, so that the loop of each kernel that calls them
/// vectorizes. Needs `<math.h>` and `<stdint.h>`.
pub(crate) fn c_source() -> String {
    let f = c_float;
    format!(
        r#"/* Vector math: branch-free polynomials GCC vectorizes (the engine's device/cpu/vecmath.rs). A loop
   vectorizes only if every call in it is inlined, and GCC stops inlining plain `static inline`
   functions into a long loop body (eight `vm_tanh` in four groups): these are always inlined. */
#define VM_INLINE static inline __attribute__((always_inline))
VM_INLINE float vm_bits(int32_t b) {{ union {{ int32_t i; float f; }} u = {{ b }}; return u.f; }}
VM_INLINE int32_t vm_int(float f) {{ union {{ float f; int32_t i; }} u = {{ f }}; return u.i; }}
VM_INLINE float vm_exp(float x) {{
    float c = x < {exp_hi} ? x : {exp_hi};
    c = c > {exp_lo} ? c : {exp_lo};
    float n = (c * {log2e} + {round}) - {round};
    float r = fmaf(-n, {ln2_lo}, fmaf(-n, {ln2_hi}, c));
    float p = {exp_poly} * (r * r) + r + 1.0f;
    int32_t ni = (int32_t)n, half = ni >> 1;
    float y = p * vm_bits((half + 127) << 23) * vm_bits((ni - half + 127) << 23);
    return x != x ? x : y;
}}
VM_INLINE float vm_log(float x) {{
    int tiny = x < {min_positive};
    float xs = tiny ? x * 8388608.0f : x;
    int32_t bits = vm_int(xs);
    int32_t e = ((bits >> 23) & 0xff) - 126 - (tiny ? 23 : 0);
    float m = vm_bits((bits & 0x007fffff) | 0x3f000000);
    int low = m < {sqrt_half};
    float ef = (float)(low ? e - 1 : e);
    m = low ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float y = m * z * {log_poly} + {ln2_lo} * ef - 0.5f * z;
    y = m + y + {ln2_hi} * ef;
    return (x != x || x < 0.0f) ? NAN : x == 0.0f ? -INFINITY : x == INFINITY ? x : y;
}}
VM_INLINE int32_t vm_quadrant(float ax) {{ return (int32_t)(ax * {two_over_pi} + 0.5f); }}
VM_INLINE float vm_reduce(float ax, int32_t j) {{
    float minus_j = -(float)j;
    return {reduce};
}}
VM_INLINE float vm_sin_poly(float r) {{ float z = r * r; return {sin_poly} * z * r + r; }}
VM_INLINE float vm_cos_poly(float r) {{ float z = r * r; return {cos_poly} * z * z - 0.5f * z + 1.0f; }}
/* The clamp compares bits (the same order for floats that are not negative) and the non-finite
   case multiplies by NaN: as float selects, GCC turns them into branches around the whole
   computation (jump threading), and a loop with branches is not vectorized. */
VM_INLINE float vm_sin_shifted(float x, int32_t shift, uint32_t sign) {{
    int32_t abits = vm_int(fabsf(x));
    float ax = vm_bits(abits < {trig_limit_bits:#x} ? abits : {trig_limit_bits:#x});
    int32_t j = vm_quadrant(ax), q = (j + shift) & 3;
    float r = vm_reduce(ax, j);
    float s = vm_sin_poly(r), c = vm_cos_poly(r);
    float y = (q & 1) ? c : s;
    y = vm_bits((int32_t)((uint32_t)vm_int(y) ^ ((uint32_t)(q & 2) << 30) ^ sign));
    return y * ((x - x) + 1.0f); /* x - x is 0 for finite x, NaN otherwise */
}}
VM_INLINE float vm_sin(float x) {{ return vm_sin_shifted(x, 0, (uint32_t)vm_int(x) & 0x80000000u); }}
VM_INLINE float vm_cos(float x) {{ return vm_sin_shifted(x, 1, 0); }}
VM_INLINE float vm_tanh(float x) {{
    float a = fabsf(x);
    float z = x * x;
    float small = {tanh_poly} * z * x + x;
    float big = 1.0f - 2.0f / (vm_exp(a + a) + 1.0f);
    big = x < 0.0f ? -big : big;
    return (a < {tanh_small} || x != x) ? small : big;
}}
VM_INLINE float vm_erf(float x) {{
    float a = fabsf(x);
    float z = x * x;
    float small = x * {erf_poly};
    float t = 1.0f / (1.0f + {erf_p} * a);
    float big = 1.0f - t * {erf_tail} * vm_exp(-(a * a));
    big = x < 0.0f ? -big : big;
    return (a < 1.0f || x != x) ? small : big;
}}
VM_INLINE float vm_sigmoid(float x) {{ return 1.0f / (1.0f + vm_exp(-x)); }}
VM_INLINE float vm_gelu(float x) {{ return 0.5f * x * (1.0f + vm_erf(x * {sqrt_half})); }}
"#,
        exp_poly = c_horner(&EXP_POLY, "r"),
        exp_hi = f(EXP_HI),
        exp_lo = f(EXP_LO),
        log2e = f(std::f32::consts::LOG2_E),
        round = f(ROUND),
        ln2_hi = f(LN2_HI),
        ln2_lo = f(LN2_LO),
        log_poly = c_horner(&LOG_POLY, "m"),
        min_positive = f(f32::MIN_POSITIVE),
        sqrt_half = f(std::f32::consts::FRAC_1_SQRT_2),
        trig_limit_bits = TRIG_LIMIT.to_bits(),
        two_over_pi = f(std::f32::consts::FRAC_2_PI),
        reduce = PI_2_PARTS.iter().fold("ax".to_string(), |r, &part| format!("fmaf(minus_j, {}, {r})", f(part))),
        sin_poly = c_horner(&SIN_POLY, "z"),
        cos_poly = c_horner(&COS_POLY, "z"),
        tanh_poly = c_horner(&TANH_POLY, "z"),
        tanh_small = f(TANH_SMALL),
        erf_poly = c_horner(&ERF_POLY, "z"),
        erf_tail = c_horner(&ERF_TAIL, "t"),
        erf_p = f(ERF_P),
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::codecache::CCompiler;

    /// A function under test, its float64 reference, the domain checked and the error bound:
    /// absolute where `relative` is false, else relative to the reference (absolute below 1e-30).
    struct Case {
        name: &'static str,
        f: fn(f32) -> f32,
        reference: fn(f64) -> f64,
        domain: (f32, f32),
        bound: f64,
        relative: bool,
    }

    const CASES: [Case; 8] = [
        Case { name: "exp", f: exp, reference: f64::exp, domain: (-103.0, 88.7), bound: 2e-7, relative: true },
        Case { name: "log", f: log, reference: f64::ln, domain: (1e-30, 1e30), bound: 2e-7, relative: true },
        Case { name: "sin", f: sin, reference: f64::sin, domain: (-1e6, 1e6), bound: 2e-7, relative: false },
        Case { name: "cos", f: cos, reference: f64::cos, domain: (-1e6, 1e6), bound: 2e-7, relative: false },
        Case { name: "tanh", f: tanh, reference: f64::tanh, domain: (-50.0, 50.0), bound: 2e-7, relative: false },
        Case { name: "erf", f: erf, reference: libm::erf, domain: (-10.0, 10.0), bound: 3e-7, relative: false },
        Case {
            name: "sigmoid",
            f: sigmoid,
            reference: |x| 1.0 / (1.0 + (-x).exp()),
            domain: (-80.0, 80.0),
            bound: 3e-7,
            relative: false,
        },
        Case {
            name: "gelu",
            f: gelu,
            reference: |x| 0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2)),
            domain: (-20.0, 20.0),
            bound: 5e-7,
            relative: true,
        },
    ];

    /// The error of `case.f(x)` against its float64 reference, in the case's measure.
    fn error(case: &Case, x: f32) -> f64 {
        let (got, want) = ((case.f)(x) as f64, (case.reference)(x as f64));
        let scale = if case.relative { want.abs().max(1e-30) } else { 1.0 };
        // GELU's error is relative only past |ref| = 1: near its zero at 0 only the absolute
        // error is meaningful.
        let scale = if case.name == "gelu" { scale.max(1.0) } else { scale };
        (got - want).abs() / scale
    }

    /// `steps` points spread over the domain: evenly in value, and, for a domain spanning many
    /// orders of magnitude, evenly in magnitude too.
    fn sweep(case: &Case, steps: usize) -> impl Iterator<Item = f32> + '_ {
        let (lo, hi) = case.domain;
        let even = (0..=steps).map(move |i| lo + (hi - lo) * (i as f32 / steps as f32));
        let log_spaced = (0..=steps).flat_map(move |i| {
            let v = 10f32.powf(-30.0 + 60.0 * i as f32 / steps as f32);
            [v, -v]
        });
        even.chain(log_spaced).filter(move |&x| x >= lo && x <= hi)
    }

    #[test]
    fn every_function_meets_its_stated_bound_on_a_sweep() {
        for case in &CASES {
            let (worst, at) = sweep(case, 200_000)
                .map(|x| (error(case, x), x))
                .fold((0.0f64, 0.0f32), |a, b| if b.0 > a.0 { b } else { a });
            assert!(worst <= case.bound, "{}: error {worst:e} at x = {at:e} exceeds {:e}", case.name, case.bound);
        }
    }

    proptest! {
        #[test]
        fn every_function_meets_its_stated_bound_at_random_points(i in 0..CASES.len(), t in 0.0f64..1.0) {
            let case = &CASES[i];
            let (lo, hi) = (case.domain.0 as f64, case.domain.1 as f64);
            let x = (lo + (hi - lo) * t) as f32;
            prop_assert!(error(case, x) <= case.bound, "{}({x}) off by {:e}", case.name, error(case, x));
        }
    }

    #[test]
    fn the_parts_of_pi_over_2_add_up_to_it() {
        assert_eq!(PI_2_PARTS[0], std::f64::consts::FRAC_PI_2 as f32);
        assert_eq!(PI_2_PARTS[1], (std::f64::consts::FRAC_PI_2 - PI_2_PARTS[0] as f64) as f32);
        // float64 holds pi/2 to within 1e-16, less than the last part, so that part is checked
        // against the sum only.
        let sum: f64 = PI_2_PARTS.iter().map(|&p| p as f64).sum();
        assert!((sum - std::f64::consts::FRAC_PI_2).abs() < 1e-16);
    }

    #[test]
    fn special_values_follow_libm() {
        for case in &CASES {
            for x in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0] {
                let (got, want) = ((case.f)(x), (case.reference)(x as f64) as f32);
                let same = (got.is_nan() && want.is_nan()) || got == want;
                assert!(same, "{}({x}) = {got}, libm says {want}", case.name);
            }
        }
        assert_eq!(exp(-200.0), 0.0);
        // Past the clamps the arithmetic overflows and underflows by itself, as libm does.
        assert!(exp(88.722_83).is_finite());
        assert_eq!(exp(88.722_84), f32::INFINITY);
        assert_eq!(exp(-103.98), 0.0);
        assert_eq!(exp(-103.972_07), f32::from_bits(1), "the smallest subnormal");
        assert!(log(-1.0).is_nan());
        assert!((log(1e-40) as f64 - (1e-40f32 as f64).ln()).abs() < 1e-5, "log of a subnormal");
    }

    /// `vm_NAME` over an array, for comparing the C functions with the Rust ones.
    fn c_harness() -> String {
        let mut source = format!("#include <math.h>\n#include <stdint.h>\n{}", c_source());
        for case in &CASES {
            let name = case.name;
            source.push_str(&format!(
                "void apply_{name}(const float* x, float* y, int64_t n) {{ for (int64_t i = 0; i < n; i++) y[i] = \
                 vm_{name}(x[i]); }}\n"
            ));
        }
        source
    }

    #[test]
    fn the_c_functions_compute_exactly_what_the_rust_ones_do() {
        let cc = CCompiler::detect().expect("CI machines have a C compiler");
        let cache =
            crate::codecache::DiskCache::at(std::env::temp_dir().join(format!("vecmath-{}", std::process::id())));
        let (library, _) = cc.compile_in(&cache, &c_harness()).unwrap();
        for case in &CASES {
            // Beyond the domains too: the clamps of `exp` and the trigonometric functions.
            let beyond = [f32::NAN, f32::INFINITY, -f32::INFINITY, 0.0, 88.8, 100.0, -103.98, -200.0, 3e7, -3e9];
            let xs: Vec<f32> = sweep(case, 20_000).chain(beyond).collect();
            let mut ys = vec![0.0f32; xs.len()];
            type Apply = unsafe extern "C" fn(*const f32, *mut f32, i64);
            // SAFETY: the signature matches `apply_NAME` above; both buffers hold `xs.len()` floats.
            unsafe {
                let apply = library.get::<Apply>(&format!("apply_{}", case.name)).unwrap();
                apply(xs.as_ptr(), ys.as_mut_ptr(), xs.len() as i64);
            }
            for (&x, &y) in xs.iter().zip(&ys) {
                let rust = (case.f)(x);
                assert!(
                    rust.to_bits() == y.to_bits() || (rust.is_nan() && y.is_nan()),
                    "{}({x}): C {y}, Rust {rust}",
                    case.name
                );
            }
        }
        let _ = std::fs::remove_dir_all(cache.dir());
    }
}
