//! Shared test support: a float64 reference implementation of every op, random inputs in several
//! memory layouts, and a comparison that explains its failures.
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod programs;
pub mod reference;
pub mod split_cases;

/// The GPU to test on, or `None` after printing why the test is skipped (no driver, no device or
/// no NVRTC). It writes to the process's stderr directly, past the test harness's capture, so a
/// CPU-only run shows every GPU test as visibly skipped.
pub fn gpu() -> Option<Device> {
    match engine::device::cuda::unavailable_reason() {
        None => Some(Device::Cuda(0)),
        Some(reason) => {
            let _ = writeln!(std::io::stderr(), "skipped: {reason}");
            None
        }
    }
}

use std::io::Write;

/// Whether a compiled result matches eager's within f32 rounding (NaN where eager has NaN), or the
/// first element that does not.
pub fn close_to_eager(got: &Tensor, expected: &Tensor) -> std::result::Result<(), String> {
    let (g, e) = (got.to_vec().map_err(|e| e.to_string())?, expected.to_vec().map_err(|e| e.to_string())?);
    if got.shape() != expected.shape() {
        return Err(format!("shape {:?}, expected {:?}", got.shape(), expected.shape()));
    }
    for (i, (x, y)) in g.iter().zip(&e).enumerate() {
        if !((x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-4 + 1e-3 * y.abs()) {
            return Err(format!("element {i}: compiled {x}, eager {y}"));
        }
    }
    Ok(())
}

use engine::{DType, Device, Tensor};
use proptest::prelude::*;
use reference::RefTensor;

/// `torch.testing.assert_close`'s default `(rtol, atol)` for a dtype: the tolerance of one op's
/// result against a reference computed in higher precision.
pub fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F16 => (1e-3, 1e-5),
        DType::BF16 => (1.6e-2, 1e-5),
        _ => (1.3e-6, 1e-5),
    }
}

/// The half-precision dtypes.
pub fn half_dtypes() -> impl Strategy<Value = DType> {
    prop_oneof![Just(DType::F16), Just(DType::BF16)]
}

/// How an input tensor is laid out in memory, so kernels see strided views as well as dense ones.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    Contiguous,
    /// Built reversed and permuted back: every stride differs from the dense ones.
    Transposed,
    /// Every other row of a tensor twice as tall.
    EveryOtherRow,
    /// Dense, but starting one element into its buffer, so no 16-byte vector loads line up.
    Misaligned,
    /// Dim 0 expanded from size 1 (stride 0): every row holds the first row's values.
    Broadcast,
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

/// Every layout, including the two that matter most to vectorised GPU kernels.
pub fn all_layouts() -> impl Strategy<Value = Layout> {
    prop_oneof![
        Just(Layout::Contiguous),
        Just(Layout::Transposed),
        Just(Layout::EveryOtherRow),
        Just(Layout::Misaligned),
        Just(Layout::Broadcast)
    ]
}

/// A CPU tensor with these row-major values and shape, stored in the given layout, plus its
/// float64 twin.
pub fn make(data: &[f32], shape: &[usize], layout: Layout) -> (Tensor, RefTensor) {
    make_on(data, shape, layout, Device::Cpu)
}

/// Like [`make`] on `device`: the stored buffer is moved there and the view is taken on the
/// device, so its kernels see the strided layout. For [`Layout::Broadcast`] the values are the
/// first row's, repeated.
pub fn make_on(data: &[f32], shape: &[usize], layout: Layout, device: Device) -> (Tensor, RefTensor) {
    make_typed(data, shape, layout, device, DType::F32)
}

/// Like [`make_on`] with the stored buffer of `dtype`: the values are rounded to it, and the
/// float64 twin holds the rounded values.
pub fn make_typed(data: &[f32], shape: &[usize], layout: Layout, device: Device, dtype: DType) -> (Tensor, RefTensor) {
    let data: Vec<f32> = data.iter().map(|&v| dtype.round(v)).collect();
    let data = data.as_slice();
    let stored = |values: Vec<f32>, stored_shape: &[usize]| {
        Tensor::from_vec_dtype(values, stored_shape, dtype).unwrap().to(device).unwrap()
    };
    let mut reference = RefTensor::new(shape.to_vec(), data.iter().map(|&v| v as f64).collect());
    let tensor = match layout {
        Layout::Contiguous => stored(data.to_vec(), shape),
        Layout::Transposed => {
            let rank = shape.len();
            let reversed: Vec<usize> = shape.iter().rev().copied().collect();
            let perm: Vec<usize> = (0..rank).rev().collect();
            stored(reference.permute(&perm).to_f32(), &reversed).permute(&perm).unwrap()
        }
        Layout::EveryOtherRow if !shape.is_empty() => {
            let mut tall = shape.to_vec();
            tall[0] *= 2;
            let row: usize = shape[1..].iter().product();
            let mut values = vec![f32::NAN; tall.iter().product()];
            for (r, chunk) in data.chunks(row.max(1)).enumerate().take(shape[0]) {
                values[2 * r * row..2 * r * row + chunk.len()].copy_from_slice(chunk);
            }
            stored(values, &tall).slice(0, 0, tall[0], 2).unwrap()
        }
        Layout::Misaligned => {
            let n = data.len();
            stored([&[f32::NAN], data].concat(), &[n + 1]).slice(0, 1, n + 1, 1).unwrap().reshape(shape).unwrap()
        }
        Layout::Broadcast if !shape.is_empty() => {
            let row = &data[..data.len() / shape[0]];
            let first_row = [&[1], &shape[1..]].concat();
            reference = RefTensor::new(shape.to_vec(), (0..data.len()).map(|i| row[i % row.len()] as f64).collect());
            stored(row.to_vec(), &first_row).expand(shape).unwrap()
        }
        Layout::EveryOtherRow | Layout::Broadcast => stored(data.to_vec(), shape),
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
