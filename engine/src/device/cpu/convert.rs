//! Between a buffer's dtype and the `f32` every CPU kernel computes in, the role of ATen's
//! `convert<BFloat16, float>` and its vectorised `cvtbf16_fp32`: a half-precision element is
//! widened as a kernel loads it and rounded (to nearest, ties to even) as it stores it.
//!
//! The conversions are hot loops, so how they are compiled is the kernel's [`Loops`] choice: the
//! plain kernels convert element by element with the `half` crate's functions; the tuned ones
//! (`tuned::simd`) use the CPU's conversion instructions where it has them (F16C for `f16`,
//! AVX-512 BF16 for rounding to `bf16`) and vectorised integer code otherwise.

use super::{Elements, ElementsMut, HostBuffer, Input, Loops, allocator, with_elements};
use crate::dtype::{DType, Element, bf16, f16};
use crate::layout::Layout;

/// `dst[i] = src[i]` widened to `f32` (the slices have one length).
pub(crate) fn widen<L: Loops>(src: Elements, dst: &mut [f32]) {
    match src {
        Elements::F32(s) => dst.copy_from_slice(s),
        Elements::BF16(s) => L::widen_bf16(s, dst),
        Elements::F16(s) => L::widen_f16(s, dst),
        Elements::F8E4M3(s) => scalar_widen(s, dst),
        Elements::F8E5M2(s) => scalar_widen(s, dst),
    }
}

/// `dst[i] = src[i]` rounded to `dst`'s dtype.
pub(crate) fn narrow<L: Loops>(src: &[f32], dst: ElementsMut) {
    match dst {
        ElementsMut::F32(d) => d.copy_from_slice(src),
        ElementsMut::BF16(d) => L::narrow_bf16(src, d),
        ElementsMut::F16(d) => L::narrow_f16(src, d),
        ElementsMut::F8E4M3(d) => scalar_narrow(src, d),
        ElementsMut::F8E5M2(d) => scalar_narrow(src, d),
    }
}

/// Element by element, with each type's own conversion.
pub(crate) fn scalar_widen<T: Element>(src: &[T], dst: &mut [f32]) {
    dst.iter_mut().zip(src).for_each(|(d, s)| *d = s.to_f32());
}

/// Element by element, with each type's own rounding.
pub(crate) fn scalar_narrow<T: Element>(src: &[f32], dst: &mut [T]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d = T::from_f32(s));
}

/// A bf16 is the top half of an f32: widening is a shift. Written without branches so that
/// the loop vectorises (a NaN keeps its payload, and stays a NaN).
#[inline(always)]
pub(crate) fn bf16_bits_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// An f32 rounded to the nearest bf16, ties to even, without branches (so that the loop
/// vectorises): add half of the dropped part's range, less one unless the kept part is odd, and
/// truncate. NaNs become a quiet NaN of their sign, as `half::bf16::from_f32` makes them.
#[inline(always)]
pub(crate) fn f32_to_bf16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    let rounded = (x.wrapping_add(0x7fff + ((x >> 16) & 1)) >> 16) as u16;
    let nan = ((x >> 16) as u16) | 0x0040;
    if v.is_nan() { nan } else { rounded }
}

/// The elements of `buffer` widened to `f32` (the bytes of a buffer of `dtype`, as read back
/// from a device).
pub(crate) fn widen_bytes(bytes: &[u8], dtype: DType) -> Vec<f32> {
    HostBuffer::from_bytes(dtype, bytes).to_f32_vec()
}

impl HostBuffer {
    /// A buffer of `dtype` holding a copy of `bytes` (the elements in their own representation).
    pub(crate) fn from_bytes(dtype: DType, bytes: &[u8]) -> HostBuffer {
        let mut buffer = allocator::uninit_of(dtype, bytes.len() / dtype.size_in_bytes());
        buffer.bytes_mut().copy_from_slice(bytes);
        buffer
    }

    /// This buffer's elements rounded to `dtype` (itself when it already has that dtype).
    pub(crate) fn converted<L: Loops>(self, dtype: DType) -> HostBuffer {
        if self.dtype() == dtype {
            return self;
        }
        let mut out = allocator::uninit_of(dtype, self.elements_len());
        match self.elements() {
            Elements::F32(values) => narrow::<L>(values, out.elements_mut()),
            other => {
                let mut wide = vec![0.0; out.elements_len()];
                widen::<L>(other, &mut wide);
                narrow::<L>(&wide, out.elements_mut());
            }
        }
        out
    }

    /// Number of elements, whatever the dtype.
    pub(crate) fn elements_len(&self) -> usize {
        with_elements!(self.elements(), s => s.len())
    }
}

impl<'a> Elements<'a> {
    /// Elements `start..start + len`.
    pub(crate) fn slice(self, start: usize, len: usize) -> Elements<'a> {
        match self {
            Elements::F32(s) => Elements::F32(&s[start..start + len]),
            Elements::F16(s) => Elements::F16(&s[start..start + len]),
            Elements::BF16(s) => Elements::BF16(&s[start..start + len]),
            Elements::F8E4M3(s) => Elements::F8E4M3(&s[start..start + len]),
            Elements::F8E5M2(s) => Elements::F8E5M2(&s[start..start + len]),
        }
    }
}

/// The inputs as `f32` views for a kernel that computes only on `f32` buffers: `f32` inputs as
/// they are, others widened into dense copies (with dense layouts). The copies live in the
/// returned vector, which `inputs` borrow from.
pub(crate) struct Widened<'a> {
    copies: Vec<Option<(HostBuffer, Layout)>>,
    inputs: Vec<Input<'a>>,
}

impl<'a> Widened<'a> {
    /// `inputs` with every tensor of another dtype than `f32` widened, as `L` compiles it.
    pub(crate) fn new<L: Loops>(inputs: &[Input<'a>]) -> Widened<'a> {
        let copies = inputs
            .iter()
            .map(|input| match *input {
                Input::Tensor { buffer, layout } if buffer.dtype() != DType::F32 => {
                    let dense = super::copy::<L>(*input, DType::F32);
                    Some((dense, Layout::contiguous(layout.shape())))
                }
                _ => None,
            })
            .collect();
        Widened { copies, inputs: inputs.to_vec() }
    }

    /// The inputs, each `f32`.
    pub(crate) fn inputs(&self) -> Vec<Input<'_>> {
        self.inputs
            .iter()
            .zip(&self.copies)
            .map(|(input, copy)| match copy {
                Some((buffer, layout)) => Input::Tensor { buffer, layout },
                None => *input,
            })
            .collect()
    }
}

/// An `f32` kernel run on inputs of any dtype: they are widened first ([`Widened`]) and the
/// result rounded to `dtype`. What the kernels whose memory traffic the conversions do not
/// dominate (matrix products, attention, custom ops, the plain reductions) do with half-precision
/// tensors.
pub(crate) fn in_f32<L: Loops>(
    inputs: &[Input],
    dtype: DType,
    kernel: impl FnOnce(&[Input]) -> HostBuffer,
) -> HostBuffer {
    if dtype == DType::F32 && inputs.iter().all(|i| matches!(i, Input::Scalar(_)) || i.tensor().0.dtype() == DType::F32)
    {
        return kernel(inputs);
    }
    let widened = Widened::new::<L>(inputs);
    kernel(&widened.inputs()).converted::<L>(dtype)
}

/// Conversions compiled as written: `half`'s functions, one element at a time.
pub(crate) fn plain_widen_bf16(src: &[bf16], dst: &mut [f32]) {
    scalar_widen(src, dst);
}

/// See [`plain_widen_bf16`].
pub(crate) fn plain_narrow_bf16(src: &[f32], dst: &mut [bf16]) {
    scalar_narrow(src, dst);
}

/// See [`plain_widen_bf16`].
pub(crate) fn plain_widen_f16(src: &[f16], dst: &mut [f32]) {
    scalar_widen(src, dst);
}

/// See [`plain_widen_bf16`].
pub(crate) fn plain_narrow_f16(src: &[f32], dst: &mut [f16]) {
    scalar_narrow(src, dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_free_bf16_rounding_matches_half() {
        let mut values = vec![0.0f32, -0.0, 1.0, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN_POSITIVE, 1e-40];
        values.extend((0..4096).map(|i| f32::from_bits(0x3f80_0000 + i * 0x1357)));
        values.extend([1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), -(1.0 + 2f32.powi(-8))]);
        for v in values {
            assert_eq!(f32_to_bf16_bits(v), bf16::from_f32(v).to_bits(), "{v:e}");
            assert_eq!(bf16_bits_to_f32(f32_to_bf16_bits(v)), bf16::from_f32(v).to_f32(), "{v:e}");
        }
        assert!(bf16_bits_to_f32(f32_to_bf16_bits(f32::NAN)).is_nan());
    }

    #[test]
    fn fp8_buffers_round_as_their_type() {
        use crate::dtype::{F8E4M3, F8E5M2};
        let b = HostBuffer::rounded(&[1.0, 500.0, -0.3], DType::F8E4M3);
        let v = b.to_f32_vec();
        assert_eq!(v[0], 1.0);
        assert!(v[1].is_nan());
        assert_eq!(v[2], F8E4M3::from_f32(-0.3).to_f32());
        let e = HostBuffer::rounded(&[1e6], DType::F8E5M2).to_f32_vec();
        assert_eq!(e[0], F8E5M2::from_f32(1e6).to_f32());
    }
}
