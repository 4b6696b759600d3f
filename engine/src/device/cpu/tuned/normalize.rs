//! Softmax, log-softmax and layer norm as single eager kernels, as ATen has them: one read of each
//! line to find the statistics, one pass to write the result.
//!
//! Along the last dimension every line is a contiguous row, processed one row per task. Along an
//! earlier dimension the lines are columns of a `[size, inner]` block; reading them one by one
//! would stride through memory, so the statistics of many columns are accumulated together, row
//! after row, and the result is written row by row.

use super::reduce::{max_in_lanes, sum_in_lanes};
use super::simd::{Vectorized, vectorized};
use crate::device::cpu::convert::{narrow, widen};
use crate::device::cpu::{
    Elements, HostBuffer, Input, PARALLEL_THRESHOLD, Stored, TASK_WORK, allocator, contiguous, for_dtype, in_f32,
    max_nan, split_at_dim, vecmath,
};
use crate::dtype::DType;
use crate::parallel;

/// Columns whose statistics one task accumulates together.
const COLUMNS_PER_TASK: usize = 256;

/// `line(src_row, dst_row)` for every row of length `row` of the dense `x` (of any dtype), into a
/// new buffer of its dtype. A half-precision row is widened into a row of `f32`s, computed, and
/// rounded as it is stored, a row at a time, so the row stays in the core's cache between the
/// three and the memory traffic is the narrow dtype's.
fn for_each_row_of(x: Elements, row: usize, line: impl Fn(&[f32], &mut [f32]) + Sync) -> HostBuffer {
    let Elements::F32(x) = x else {
        let mut out = allocator::uninit_of(x.dtype(), x_len(x));
        if row == 0 {
            return out;
        }
        let rows = (TASK_WORK / row).max(1);
        for_dtype!(x.dtype(), T => {
            let task = |first_row: usize, dst: &mut [T]| {
                let (mut src_row, mut dst_row) = (vec![0.0; row], vec![0.0; row]);
                for (r, d) in dst.chunks_mut(row).enumerate() {
                    widen::<Vectorized>(x.slice((first_row + r) * row, row), &mut src_row);
                    vectorized(
                        #[inline(always)]
                        || line(&src_row, &mut dst_row),
                    );
                    narrow::<Vectorized>(&dst_row, T::wrap_mut(d));
                }
            };
            let out = out.typed_mut::<T>();
            if out.len() > PARALLEL_THRESHOLD {
                parallel::for_each_chunk_mut(out, rows * row, |t, dst| task(t * rows, dst));
            } else {
                task(0, out);
            }
        });
        return out;
    };
    for_each_row(x, row, line)
}

/// Number of elements.
fn x_len(x: Elements) -> usize {
    crate::device::cpu::with_elements!(x, s => s.len())
}

/// `line(src_row, dst_row)` for every row of length `row` of `x`, in parallel when large,
/// compiled for the CPU's widest vectors.
fn for_each_row(x: &[f32], row: usize, line: impl Fn(&[f32], &mut [f32]) + Sync) -> HostBuffer {
    let mut out = allocator::uninit(x.len());
    if row == 0 {
        return out;
    }
    let line = |s: &[f32], d: &mut [f32]| {
        vectorized(
            #[inline(always)]
            || line(s, d),
        )
    };
    if x.len() > PARALLEL_THRESHOLD {
        let rows = (TASK_WORK / row).max(1);
        parallel::for_each_chunk_mut(&mut out, rows * row, |task, dst| {
            let src = &x[task * rows * row..][..dst.len()];
            dst.chunks_mut(row).zip(src.chunks(row)).for_each(|(d, s)| line(s, d));
        });
    } else {
        out.chunks_mut(row).zip(x.chunks(row)).for_each(|(d, s)| line(s, d));
    }
    out
}

/// The softmax (or log-softmax) of `v` given its line's maximum and `sum(exp(v - max))`.
#[inline(always)]
fn normalized(v: f32, max: f32, sum: f32, log: bool) -> f32 {
    if log { v - max - vecmath::log(sum) } else { vecmath::exp(v - max) / sum }
}

/// Softmax (or log-softmax) along `dim`, subtracting the maximum first so `exp` cannot overflow.
/// Rows along the last dimension are converted a row at a time in any dtype; other lines widen
/// a half-precision input first.
pub(super) fn softmax(input: Input, dim: usize, log: bool) -> HostBuffer {
    let (data, layout) = input.tensor();
    let (_, size, inner) = split_at_dim(layout.shape(), dim);
    if inner == 1 && data.dtype() != DType::F32 && layout.is_contiguous() {
        let x = data.elements().slice(layout.offset(), layout.numel());
        return for_each_row_of(
            x,
            size,
            #[inline(always)]
            |src, dst| softmax_row(src, dst, log),
        );
    }
    in_f32::<Vectorized>(&[input], data.dtype(), |i| softmax_f32(i[0], dim, log))
}

/// One row's softmax (or log-softmax).
#[inline(always)]
fn softmax_row(src: &[f32], dst: &mut [f32], log: bool) {
    let max = max_in_lanes(src);
    let sum = sum_in_lanes(src, |v| vecmath::exp(v - max));
    dst.iter_mut().zip(src).for_each(|(d, &v)| *d = normalized(v, max, sum, log));
}

/// [`softmax`] of an `f32` input.
fn softmax_f32(input: Input, dim: usize, log: bool) -> HostBuffer {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    let (_, size, inner) = split_at_dim(layout.shape(), dim);
    if inner == 1 {
        return for_each_row(
            &x,
            size,
            #[inline(always)]
            |src, dst| softmax_row(src, dst, log),
        );
    }
    let mut out = allocator::uninit(x.len());
    let block = size * inner;
    if block == 0 {
        return out;
    }
    for (src, dst) in x.chunks(block).zip(out.chunks_mut(block)) {
        let (max, sum) = column_statistics(src, inner);
        parallel::for_each_chunk_mut(dst, inner, |i, d| {
            let s = &src[i * inner..][..inner];
            vectorized(
                #[inline(always)]
                || {
                    for j in 0..inner {
                        d[j] = normalized(s[j], max[j], sum[j], log);
                    }
                },
            )
        });
    }
    out
}

/// Maximum and `sum(exp(v - max))` of every column of a `[rows, inner]` block, accumulated a
/// strip of columns at a time so that each pass reads contiguous memory.
fn column_statistics(block: &[f32], inner: usize) -> (Vec<f32>, Vec<f32>) {
    // Each strip's maxima, then its sums, side by side in one buffer per strip.
    let mut stats = vec![0.0f32; 2 * inner];
    parallel::for_each_chunk_mut(&mut stats, 2 * COLUMNS_PER_TASK, |strip, both| {
        let start = strip * COLUMNS_PER_TASK;
        let end = start + both.len() / 2;
        let (max, sum) = both.split_at_mut(end - start);
        max.fill(f32::NEG_INFINITY);
        sum.fill(0.0);
        vectorized(
            #[inline(always)]
            || {
                for row in block.chunks(inner) {
                    max.iter_mut().zip(&row[start..end]).for_each(|(m, &v)| *m = max_nan(*m, v));
                }
                for row in block.chunks(inner) {
                    sum.iter_mut().zip(&row[start..end]).zip(&*max).for_each(|((s, &v), &m)| *s += vecmath::exp(v - m));
                }
            },
        );
    });
    let (mut max, mut sum) = (Vec::with_capacity(inner), Vec::with_capacity(inner));
    for both in stats.chunks(2 * COLUMNS_PER_TASK) {
        let (m, s) = both.split_at(both.len() / 2);
        max.extend_from_slice(m);
        sum.extend_from_slice(s);
    }
    (max, sum)
}

/// Layer norm over the last dimension with an affine `weight` and `bias`, in the input's dtype
/// (the weight and bias may have another).
pub(super) fn layer_norm(input: Input, weight: Input, bias: Input, eps: f32) -> HostBuffer {
    let (data, layout) = input.tensor();
    // The weight and bias are one row each: widened once.
    let affine = crate::device::cpu::Widened::new::<Vectorized>(&[weight, bias]);
    let [weight, bias] = affine.inputs()[..] else { unreachable!("two inputs") };
    let (wd, wl) = weight.tensor();
    let (bd, bl) = bias.tensor();
    let (w, b) = (contiguous(wd, wl), contiguous(bd, bl));
    let row = layout.shape().last().copied().unwrap_or(1);
    let dense;
    let x = match data.dtype() {
        DType::F32 => {
            dense = contiguous(data, layout);
            Elements::F32(&dense)
        }
        _ if layout.is_contiguous() => data.elements().slice(layout.offset(), layout.numel()),
        _ => return in_f32::<Vectorized>(&[input, weight, bias], data.dtype(), |i| layer_norm(i[0], i[1], i[2], eps)),
    };
    for_each_row_of(
        x,
        row,
        #[inline(always)]
        |src, dst| {
            let n = src.len() as f32;
            let mean = sum_in_lanes(src, |v| v) / n;
            let var = sum_in_lanes(src, |v| (v - mean) * (v - mean)) / n;
            let inv_std = 1.0 / (var + eps).sqrt();
            for (k, d) in dst.iter_mut().enumerate() {
                *d = (src[k] - mean) * inv_std * w[k] + b[k];
            }
        },
    )
}
