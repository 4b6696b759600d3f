//! Reading a strided view in row-major order: the copy behind `contiguous`, `cat` and the
//! broadcast operands of elementwise kernels (ATen's `TensorIterator` does the same walk).
//!
//! A view's innermost dimension is walked as one run: a plain copy when its stride is 1 (a
//! permute of outer dims, a slice of rows), one value repeated when it is 0 (a broadcast along
//! it), a strided loop otherwise. The outer dimensions advance once per run, not once per
//! element.

use super::{Elements, ElementsMut, HostBuffer, PARALLEL_THRESHOLD, TASK_WORK, allocator, with_elements};
use crate::dtype::Element;
use crate::layout::Layout;
use crate::parallel;

/// Elements `start..start + out.len()` of the view `layout` of `data`, in row-major order, each
/// converted by `convert` (the identity for a copy, a widening for a kernel reading a
/// half-precision view as `f32`).
#[inline(always)]
pub(super) fn gather_as<S: Copy, D>(
    data: &[S],
    layout: &Layout,
    start: usize,
    out: &mut [D],
    convert: impl Fn(S) -> D,
) {
    let (shape, strides) = (layout.shape(), layout.strides());
    let Some((&inner, outer_shape)) = shape.split_last() else {
        return out.iter_mut().for_each(|o| *o = convert(data[layout.offset()]));
    };
    let stride = strides[strides.len() - 1];
    let outer_strides = &strides[..strides.len() - 1];
    // Where the first run starts: the outer index of `start`, as an odometer.
    let (mut row, mut column) = (start / inner.max(1), start % inner.max(1));
    let mut index = vec![0; outer_shape.len()];
    for (d, &size) in outer_shape.iter().enumerate().rev() {
        index[d] = row % size.max(1);
        row /= size.max(1);
    }
    let mut base = layout.offset() + index.iter().zip(outer_strides).map(|(i, s)| i * s).sum::<usize>();
    let mut written = 0;
    while written < out.len() {
        let run = (inner - column).min(out.len() - written);
        let dst = &mut out[written..written + run];
        let first = base + column * stride;
        match stride {
            1 => dst.iter_mut().zip(&data[first..first + run]).for_each(|(d, &s)| *d = convert(s)),
            0 => {
                let value = data[first];
                dst.iter_mut().for_each(|d| *d = convert(value));
            }
            _ => dst.iter_mut().enumerate().for_each(|(j, d)| *d = convert(data[first + j * stride])),
        }
        written += run;
        column = 0;
        // The next row: bump the odometer of the outer dims.
        for d in (0..index.len()).rev() {
            index[d] += 1;
            base += outer_strides[d];
            if index[d] < outer_shape[d] {
                break;
            }
            base -= outer_strides[d] * index[d];
            index[d] = 0;
        }
    }
}

/// Elements `start..start + out.len()` of the view `layout` of `data`, in row-major order.
pub(super) fn gather<T: Copy>(data: &[T], layout: &Layout, start: usize, out: &mut [T]) {
    gather_as(data, layout, start, out, |v| v);
}

/// Elements `start..start + out.len()` of the view `layout` of `data`, widened to `f32`.
pub(super) fn gather_f32(data: Elements, layout: &Layout, start: usize, out: &mut [f32]) {
    with_elements!(data, d => gather_as(d, layout, start, out, |v| v.to_f32()))
}

/// The view `layout` of `data` as a new dense row-major buffer of its dtype, copied in parallel
/// when large. A kernel's scratch copy goes back to the allocator's cache when dropped: taking
/// fresh pages for it on every call costs more than the copy.
pub(super) fn dense_copy(data: Elements, layout: &Layout) -> HostBuffer {
    let mut out = allocator::uninit_of(data.dtype(), layout.numel());
    match (data, out.elements_mut()) {
        (Elements::F32(d), ElementsMut::F32(o)) => copy_view(d, layout, o),
        (Elements::F16(d), ElementsMut::F16(o)) => copy_view(d, layout, o),
        (Elements::BF16(d), ElementsMut::BF16(o)) => copy_view(d, layout, o),
        (Elements::F8E4M3(d), ElementsMut::F8E4M3(o)) => copy_view(d, layout, o),
        (Elements::F8E5M2(d), ElementsMut::F8E5M2(o)) => copy_view(d, layout, o),
        _ => unreachable!("the copy has its source's dtype"),
    }
    out
}

/// The view `layout` of `data` copied into `out`, in parallel when large.
fn copy_view<T: Copy + Send + Sync>(data: &[T], layout: &Layout, out: &mut [T]) {
    if out.len() > PARALLEL_THRESHOLD {
        parallel::for_each_chunk_mut(out, TASK_WORK, |i, chunk| gather(data, layout, i * TASK_WORK, chunk));
    } else {
        gather(data, layout, 0, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every start and length of every view below, against the element-by-element walk.
    #[test]
    fn runs_equal_the_element_walk() {
        let data: Vec<f32> = (0..400).map(|i| i as f32).collect();
        let base = Layout::contiguous(&[3, 4, 5]);
        let views = [
            base.clone(),
            base.permute(&[2, 0, 1]),
            base.permute(&[0, 2, 1]),
            base.slice(1, 1, 4, 2),
            Layout::contiguous(&[5]).expand(&[3, 4, 5]),
            Layout::contiguous(&[4, 1]).expand(&[3, 4, 5]),
            Layout::new(vec![2, 3], vec![7, 3], 11),
            Layout::new(vec![], vec![], 9),
        ];
        for view in &views {
            let expected: Vec<f32> = view.offsets().map(|i| data[i]).collect();
            for start in 0..expected.len() {
                for len in 0..=expected.len() - start {
                    let mut out = vec![f32::NAN; len];
                    gather(&data, view, start, &mut out);
                    assert_eq!(out, expected[start..start + len], "{view:?} from {start}, {len} elements");
                }
            }
            assert_eq!(*dense_copy(Elements::F32(&data), view), *expected);
        }
    }
}
