//! Element types, the analogue of `torch.dtype`, with PyTorch's type promotion
//! (`torch.result_type`, `torch._prims_common.elementwise_dtypes`).
//!
//! Tensors store `f32`, `f16` or `bf16` (and, as inputs of [`scaled_mm`](crate::Tensor::scaled_mm)
//! only, the 8-bit floats `f8e4m3` and `f8e5m2`). Every kernel computes in `f32`: a half-precision
//! element is widened as it is loaded and rounded back (to nearest, ties to even) as it is
//! stored, and reductions accumulate in `f32`, as PyTorch's kernels do with their `opmath_t`.
//! What a lower precision saves is memory traffic and, on tensor cores, multiply throughput.

use std::fmt;

pub use half::{bf16, f16};

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum DType {
    /// 32-bit IEEE float, `torch.float32`.
    #[default]
    F32,
    /// 16-bit IEEE float (5 exponent bits, 10 mantissa bits), `torch.float16`: more precision
    /// than bf16, but overflows past 65504.
    F16,
    /// bfloat16 (8 exponent bits, 7 mantissa bits), `torch.bfloat16`: float32's range with
    /// three significant decimal digits.
    BF16,
    /// 8-bit float with 4 exponent and 3 mantissa bits, no infinities, largest value 448
    /// (`torch.float8_e4m3fn`): the forward pass's FP8.
    F8E4M3,
    /// 8-bit float with 5 exponent and 2 mantissa bits, largest value 57344
    /// (`torch.float8_e5m2`): gradients' FP8.
    F8E5M2,
}

impl DType {
    /// Every dtype, for tests and command lines.
    pub const ALL: [DType; 5] = [DType::F32, DType::F16, DType::BF16, DType::F8E4M3, DType::F8E5M2];

    /// The dtypes every op computes in (FP8 is a matrix-product input only).
    pub const COMPUTE: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::F8E4M3 | DType::F8E5M2 => 1,
        }
    }

    /// The name used in graph listings, generated code and command lines (`f32`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
        }
    }

    /// PyTorch's name for it (`torch.bfloat16`), for messages that point a learner at PyTorch.
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "torch.float32",
            DType::F16 => "torch.float16",
            DType::BF16 => "torch.bfloat16",
            DType::F8E4M3 => "torch.float8_e4m3fn",
            DType::F8E5M2 => "torch.float8_e5m2",
        }
    }

    /// The dtype named `name` (as [`DType::name`] writes it; `float32`, `half` and `bfloat16`
    /// are accepted too), or `None`.
    pub fn parse(name: &str) -> Option<DType> {
        Some(match name {
            "f32" | "float32" | "float" => DType::F32,
            "f16" | "float16" | "half" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "f8e4m3" | "float8_e4m3fn" | "e4m3" => DType::F8E4M3,
            "f8e5m2" | "float8_e5m2" | "e5m2" => DType::F8E5M2,
            _ => return None,
        })
    }

    /// True for the 8-bit floats, which only conversions, copies, views and
    /// [`scaled_mm`](crate::Tensor::scaled_mm) accept.
    pub fn is_fp8(self) -> bool {
        matches!(self, DType::F8E4M3 | DType::F8E5M2)
    }

    /// True for the 16-bit floats, which kernels widen to `f32` on load.
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// The smallest positive difference between 1.0 and the next value (`torch.finfo(dtype).eps`).
    pub fn epsilon(self) -> f32 {
        match self {
            DType::F32 => f32::EPSILON,
            DType::F16 => 2f32.powi(-10),
            DType::BF16 => 2f32.powi(-7),
            DType::F8E4M3 => 2f32.powi(-3),
            DType::F8E5M2 => 2f32.powi(-2),
        }
    }

    /// The largest finite value (`torch.finfo(dtype).max`).
    pub fn max_value(self) -> f32 {
        match self {
            DType::F32 => f32::MAX,
            DType::F16 => f16::MAX.to_f32(),
            DType::BF16 => bf16::MAX.to_f32(),
            DType::F8E4M3 => 448.0,
            DType::F8E5M2 => 57344.0,
        }
    }

    /// `v` rounded to this dtype and widened back to `f32`: the value a tensor of this dtype
    /// stores for `v`.
    pub fn round(self, v: f32) -> f32 {
        match self {
            DType::F32 => v,
            DType::F16 => f16::from_f32(v).to_f32(),
            DType::BF16 => bf16::from_f32(v).to_f32(),
            DType::F8E4M3 => F8E4M3::from_f32(v).to_f32(),
            DType::F8E5M2 => F8E5M2::from_f32(v).to_f32(),
        }
    }

    /// `torch.promote_types(self, other)`: the dtype both widen to. Half and bfloat16 meet at
    /// `f32` (neither holds the other). PyTorch refuses to promote an 8-bit float with any other
    /// dtype, and so does this (`None`).
    pub fn promote(self, other: DType) -> Option<DType> {
        if self == other {
            return Some(self);
        }
        if self.is_fp8() || other.is_fp8() {
            return None;
        }
        Some(DType::F32)
    }

    /// `torch.result_type` for an elementwise op: among the tensor operands with dimensions the
    /// promoted dtype; a 0-d tensor counts only when no tensor has dimensions, and a scalar
    /// (`x.mul(2.0)`) never does, since every dtype here is a floating-point one (so
    /// `bf16[8] * 2.0` and `bf16[8] + f32[]` are `bf16`, as in PyTorch). `operands` are
    /// `(dtype, rank)` of the tensor operands. `Err` names the two dtypes that do not promote.
    pub fn result_type(operands: &[(DType, usize)]) -> Result<DType, (DType, DType)> {
        let dimensioned = operands.iter().any(|&(_, rank)| rank > 0);
        let mut result: Option<DType> = None;
        for &(dtype, rank) in operands {
            if dimensioned && rank == 0 {
                continue;
            }
            result = Some(match result {
                None => dtype,
                Some(r) => r.promote(dtype).ok_or((r, dtype))?,
            });
        }
        Ok(result.unwrap_or_default())
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DType::parse(s).ok_or_else(|| {
            let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
            format!("unknown dtype `{s}`; expected one of {}", names.join(", "))
        })
    }
}

/// An element type as Rust sees it: how kernels widen it to `f32` and round `f32` to it.
pub(crate) trait Element: Copy + Send + Sync + Default + 'static {
    /// The dtype it stores.
    const DTYPE: DType;
    /// Its value as an `f32` (exact: every dtype here is a subset of `f32`).
    fn to_f32(self) -> f32;
    /// `v` rounded to nearest, ties to even (NaN stays NaN).
    fn from_f32(v: f32) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> f32 {
        v
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> f16 {
        f16::from_f32(v)
    }
}

/// An `f8e4m3` value (`torch.float8_e4m3fn`): sign, 4 exponent bits (bias 7), 3 mantissa bits;
/// no infinities, one NaN pattern per sign (`S.1111.111`). Like PyTorch's conversion, values past
/// the largest (448) round to NaN rather than saturating: scale before converting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct F8E4M3(pub u8);

/// An `f8e5m2` value (`torch.float8_e5m2`): sign, 5 exponent bits (bias 15), 2 mantissa bits,
/// with infinities and NaNs as in IEEE half precision (of which it is the top byte).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct F8E5M2(pub u8);

/// Rounds `v` to a minifloat of `mantissa` bits, exponent bias `bias` and largest finite
/// magnitude `max`, returning the bits of the magnitude (sign apart), or `None` when `v` is NaN
/// or rounds past `max`.
fn minifloat_magnitude(v: f32, mantissa: u32, bias: i32, max: f32) -> Option<u8> {
    let a = v.abs();
    if a.is_nan() || a.is_infinite() {
        return None;
    }
    // The spacing of representable values near `a`: subnormals below 2^(1 - bias) share the
    // smallest normal's spacing.
    let exponent = if a == 0.0 { 1 - bias } else { (a.log2().floor() as i32).max(1 - bias) };
    let step = 2f32.powi(exponent - mantissa as i32);
    // `round_ties_even` on the multiple of the step: exact, since `a / step` is a power-of-two
    // scaling of an f32.
    let rounded = (a / step).round_ties_even() * step;
    if rounded > max {
        return None;
    }
    if rounded == 0.0 {
        return Some(0);
    }
    let e = rounded.log2().floor() as i32;
    Some(if e < 1 - bias {
        // Subnormal: the mantissa counts multiples of the smallest step.
        (rounded / 2f32.powi(1 - bias - mantissa as i32)) as u8
    } else {
        let fraction = rounded / 2f32.powi(e) - 1.0;
        (((e + bias) as u8) << mantissa) | (fraction * (1 << mantissa) as f32) as u8
    })
}

/// The value of minifloat bits `m` (sign apart) with `mantissa` bits and bias `bias`.
fn minifloat_value(m: u8, mantissa: u32, bias: i32) -> f32 {
    let e = (m >> mantissa) as i32;
    let f = (m & ((1 << mantissa) - 1)) as f32 / (1 << mantissa) as f32;
    if e == 0 { f * 2f32.powi(1 - bias) } else { (1.0 + f) * 2f32.powi(e - bias) }
}

impl F8E4M3 {
    /// `v` rounded to nearest, ties to even; NaN past ±448 and for NaN.
    pub fn from_f32(v: f32) -> F8E4M3 {
        let sign = if v.is_sign_negative() { 0x80 } else { 0 };
        F8E4M3(sign | minifloat_magnitude(v, 3, 7, 448.0).unwrap_or(0x7f))
    }

    /// The value as an `f32` (exact).
    pub fn to_f32(self) -> f32 {
        let m = self.0 & 0x7f;
        let magnitude = if m == 0x7f { f32::NAN } else { minifloat_value(m, 3, 7) };
        if self.0 & 0x80 != 0 { -magnitude } else { magnitude }
    }
}

impl F8E5M2 {
    /// `v` rounded to nearest, ties to even; infinities past ±57344 (as IEEE rounding gives),
    /// NaN for NaN.
    pub fn from_f32(v: f32) -> F8E5M2 {
        let sign = if v.is_sign_negative() { 0x80 } else { 0 };
        let bits = match minifloat_magnitude(v, 2, 15, 57344.0) {
            Some(m) => m,
            None if v.is_nan() => 0x7f,
            // Past the largest finite value, rounding to nearest gives infinity once the value
            // is at least halfway to the next power of two's first step (61440).
            None if v.abs() >= 61440.0 => 0x7c,
            None => 0x7b,
        };
        F8E5M2(sign | bits)
    }

    /// The value as an `f32` (exact).
    pub fn to_f32(self) -> f32 {
        let m = self.0 & 0x7f;
        let magnitude = match m {
            0x7c => f32::INFINITY,
            0x7d..=0x7f => f32::NAN,
            _ => minifloat_value(m, 2, 15),
        };
        if self.0 & 0x80 != 0 { -magnitude } else { magnitude }
    }
}

impl Element for F8E4M3 {
    const DTYPE: DType = DType::F8E4M3;
    fn to_f32(self) -> f32 {
        F8E4M3::to_f32(self)
    }
    fn from_f32(v: f32) -> F8E4M3 {
        F8E4M3::from_f32(v)
    }
}

impl Element for F8E5M2 {
    const DTYPE: DType = DType::F8E5M2;
    fn to_f32(self) -> f32 {
        F8E5M2::to_f32(self)
    }
    fn from_f32(v: f32) -> F8E5M2 {
        F8E5M2::from_f32(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_follows_pytorch() {
        use DType::*;
        assert_eq!(BF16.promote(F16), Some(F32));
        assert_eq!(BF16.promote(F32), Some(F32));
        assert_eq!(BF16.promote(BF16), Some(BF16));
        assert_eq!(F8E4M3.promote(BF16), None);
        // A 0-d tensor does not promote a tensor with dimensions; it does among 0-d tensors.
        assert_eq!(DType::result_type(&[(BF16, 2), (F32, 0)]), Ok(BF16));
        assert_eq!(DType::result_type(&[(BF16, 0), (F32, 0)]), Ok(F32));
        assert_eq!(DType::result_type(&[(BF16, 1), (F16, 3)]), Ok(F32));
        assert_eq!(DType::result_type(&[(F8E5M2, 1), (F16, 3)]), Err((F8E5M2, F16)));
    }

    #[test]
    fn fp8_round_trips_every_pattern_and_rounds_to_nearest_even() {
        for bits in 0..=255u8 {
            let a = F8E4M3(bits);
            if !a.to_f32().is_nan() {
                assert_eq!(F8E4M3::from_f32(a.to_f32()), a, "e4m3 {bits:#x} = {}", a.to_f32());
            }
            let b = F8E5M2(bits);
            if !b.to_f32().is_nan() {
                assert_eq!(F8E5M2::from_f32(b.to_f32()), b, "e5m2 {bits:#x} = {}", b.to_f32());
            }
        }
        assert_eq!(F8E4M3::from_f32(448.0).to_f32(), 448.0);
        assert!(F8E4M3::from_f32(500.0).to_f32().is_nan(), "no saturation, as PyTorch's cast");
        assert_eq!(F8E4M3(0x01).to_f32(), 2f32.powi(-9), "the smallest subnormal");
        // 1.0625 lies halfway between 1.0 and 1.125: ties go to the even mantissa, 1.0.
        assert_eq!(F8E4M3::from_f32(1.0625).to_f32(), 1.0);
        assert_eq!(F8E4M3::from_f32(1.1875).to_f32(), 1.25);
        assert_eq!(F8E5M2::from_f32(57344.0).to_f32(), 57344.0);
        assert_eq!(F8E5M2::from_f32(1e6).to_f32(), f32::INFINITY);
        assert_eq!(F8E5M2::from_f32(-3.0).to_f32(), -3.0);
    }

    #[test]
    fn rounding_matches_each_format() {
        assert_eq!(DType::BF16.round(1.0 + 2f32.powi(-8)), 1.0, "a tie rounds to even");
        assert_eq!(DType::F16.round(65504.0), 65504.0);
        assert_eq!(DType::F16.round(70000.0), f32::INFINITY);
        assert_eq!(DType::BF16.epsilon(), 0.0078125);
        for d in DType::ALL {
            assert_eq!(DType::parse(d.name()), Some(d));
        }
    }
}
