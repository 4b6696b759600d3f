//! Shared test support: a float64 reference implementation of every op, random inputs in several
//! memory layouts, and a comparison that explains its failures.
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod programs;
pub mod reference;

use engine::Tensor;
use proptest::prelude::*;
use reference::RefTensor;

/// How an input tensor is laid out in memory, so kernels see strided views as well as dense ones.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    Contiguous,
    /// Built reversed and permuted back: every stride differs from the dense ones.
    Transposed,
    /// Every other row of a tensor twice as tall.
    EveryOtherRow,
}

pub fn layouts() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::Contiguous), Just(Layout::Transposed), Just(Layout::EveryOtherRow)]
}

/// A shape of rank `ranks` with sizes in `1..=max`, including sizes that are not multiples of 4.
pub fn shapes(ranks: std::ops::RangeInclusive<usize>, max: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1..=max, ranks)
}

/// Values for a shape, in [-3, 3].
pub fn values(n: usize) -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(-3.0f32..3.0, n)
}

/// A tensor with these row-major values and shape, stored in the given layout, plus its
/// float64 twin.
pub fn make(data: &[f32], shape: &[usize], layout: Layout) -> (Tensor, RefTensor) {
    let reference = RefTensor::new(shape.to_vec(), data.iter().map(|&v| v as f64).collect());
    let tensor = match layout {
        Layout::Contiguous => Tensor::from_vec(data.to_vec(), shape).unwrap(),
        Layout::Transposed => {
            let rank = shape.len();
            let reversed: Vec<usize> = shape.iter().rev().copied().collect();
            let perm: Vec<usize> = (0..rank).rev().collect();
            let stored = reference.permute(&perm).to_f32();
            Tensor::from_vec(stored, &reversed).unwrap().permute(&perm).unwrap()
        }
        Layout::EveryOtherRow if !shape.is_empty() => {
            let mut tall = shape.to_vec();
            tall[0] *= 2;
            let row: usize = shape[1..].iter().product();
            let mut stored = vec![f32::NAN; tall.iter().product()];
            for (r, chunk) in data.chunks(row.max(1)).enumerate().take(shape[0]) {
                stored[2 * r * row..2 * r * row + chunk.len()].copy_from_slice(chunk);
            }
            Tensor::from_vec(stored, &tall).unwrap().slice(0, 0, tall[0], 2).unwrap()
        }
        Layout::EveryOtherRow => Tensor::from_vec(data.to_vec(), shape).unwrap(),
    };
    (tensor, reference)
}

/// Checks `got` against the float64 reference elementwise: `|got - want| <= atol + rtol * scale`,
/// where `scale` is `|want|` or, for sums of many terms, the sum of their magnitudes. NaN must
/// meet NaN and infinities must match exactly.
pub fn assert_close(got: &Tensor, want: &RefTensor, scale: Option<&RefTensor>, rtol: f64, atol: f64) {
    assert_eq!(got.shape(), want.shape.as_slice(), "shape");
    let values = got.to_vec().unwrap();
    for (i, (&g, &w)) in values.iter().zip(&want.data).enumerate() {
        let g = g as f64;
        let s = scale.map_or(w.abs(), |s| s.data[i]);
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || w.abs() > f32::MAX as f64 {
            g.is_infinite() && g.signum() == w.signum()
        } else {
            (g - w).abs() <= atol + rtol * s
        };
        assert!(ok, "element {i} of shape {:?}: got {g}, want {w} (tolerance {atol} + {rtol} * {s})", want.shape);
    }
}
