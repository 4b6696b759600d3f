//! Softmax, log-softmax and layer norm as single eager kernels, as ATen has them: one read of each
//! line to find the statistics, one pass to write the result.
//!
//! Along the last dimension every line is a contiguous row, processed one row per task. Along an
//! earlier dimension the lines are columns of a `[size, inner]` block; reading them one by one
//! would stride through memory, so the statistics of many columns are accumulated together, row
//! after row, and the result is written row by row.

use super::reduce::{max_in_lanes, sum_in_lanes};
use super::simd::vectorized;
use crate::device::cpu::{
    HostBuffer, Input, PARALLEL_THRESHOLD, TASK_WORK, allocator, contiguous, max_nan, split_at_dim, vecmath,
};
use crate::parallel;

/// Columns whose statistics one task accumulates together.
const COLUMNS_PER_TASK: usize = 256;

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
pub(super) fn softmax(input: Input, dim: usize, log: bool) -> HostBuffer {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    let (_, size, inner) = split_at_dim(layout.shape(), dim);
    if inner == 1 {
        return for_each_row(
            &x,
            size,
            #[inline(always)]
            |src, dst| {
                let max = max_in_lanes(src);
                let sum = sum_in_lanes(src, |v| vecmath::exp(v - max));
                dst.iter_mut().zip(src).for_each(|(d, &v)| *d = normalized(v, max, sum, log));
            },
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

/// Layer norm over the last dimension with an affine `weight` and `bias`.
pub(super) fn layer_norm(input: Input, weight: Input, bias: Input, eps: f32) -> HostBuffer {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    let (wd, wl) = weight.tensor();
    let (bd, bl) = bias.tensor();
    let (w, b) = (contiguous(wd, wl), contiguous(bd, bl));
    let row = layout.shape().last().copied().unwrap_or(1);
    for_each_row(
        &x,
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
