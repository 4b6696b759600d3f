//! Reductions over one dimension. The input is viewed as `[outer, size, inner]`; rows with
//! `inner == 1` are reduced with several accumulators (fewer rounding steps, vectorisable),
//! otherwise whole inner rows are accumulated at once.

use crate::device::cpu::{
    HostBuffer, Input, PARALLEL_THRESHOLD, TASK_WORK, allocator, contiguous, max_nan, split_at_dim,
};
use crate::op::ReduceOp;
use crate::parallel;

/// Reduce `input` over `dim`; the result is laid out as the keepdim shape (the same buffer serves
/// both keepdim forms).
pub(super) fn reduce(kind: ReduceOp, input: Input, dim: usize) -> HostBuffer {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    let (outer, size, inner) = split_at_dim(layout.shape(), dim);
    let mut out = allocator::uninit(outer * inner);
    let reduce_block = |o: usize, dst: &mut [f32]| {
        let block = &x[o * size * inner..(o + 1) * size * inner];
        if inner == 1 {
            dst[0] = reduce_row(kind, block);
        } else {
            reduce_rows(kind, block, size, dst);
        }
    };
    if inner == 0 {
        return out;
    }
    if x.len() > PARALLEL_THRESHOLD {
        // Whole blocks per task, enough of them to amortise the task.
        let blocks = (TASK_WORK / (size * inner).max(1)).max(1);
        parallel::for_each_chunk_mut(&mut out, blocks * inner, |task, dst| {
            for (i, dst) in dst.chunks_mut(inner).enumerate() {
                reduce_block(task * blocks + i, dst);
            }
        });
    } else {
        out.chunks_mut(inner).enumerate().for_each(|(o, dst)| reduce_block(o, dst));
    }
    out
}

fn reduce_row(kind: ReduceOp, row: &[f32]) -> f32 {
    match kind {
        ReduceOp::Max => max_in_lanes(row),
        ReduceOp::Sum => sum_in_lanes(row, |v| v),
        ReduceOp::Mean => sum_in_lanes(row, |v| v) / row.len() as f32,
    }
}

/// `combine` over `map(v)` for every `v` of `row`, in eight running results, one per vector lane,
/// joined at the end. The compiler can keep the eight in one register; for a sum each running total
/// takes an eighth of the terms, so its rounding error grows far slower than one total's would
/// (a single running sum of 16 K exponentials is off in the fifth digit).
#[inline(always)]
fn fold_in_lanes(row: &[f32], init: f32, map: impl Fn(f32) -> f32, combine: impl Fn(f32, f32) -> f32) -> f32 {
    const LANES: usize = 8;
    let mut acc = [init; LANES];
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] = combine(acc[l], map(c[l]));
        }
    }
    acc.into_iter().chain(tail.iter().map(|&v| map(v))).fold(init, combine)
}

/// `sum(map(v))` over `row`, in lanes as [`fold_in_lanes`] says.
#[inline(always)]
pub(super) fn sum_in_lanes(row: &[f32], map: impl Fn(f32) -> f32) -> f32 {
    fold_in_lanes(row, 0.0, map, |a, b| a + b)
}

/// The NaN-propagating maximum of `row`, in lanes as [`fold_in_lanes`] says.
#[inline(always)]
pub(super) fn max_in_lanes(row: &[f32]) -> f32 {
    fold_in_lanes(row, f32::NEG_INFINITY, |v| v, max_nan)
}

fn reduce_rows(kind: ReduceOp, block: &[f32], size: usize, dst: &mut [f32]) {
    let init = if kind == ReduceOp::Max { f32::NEG_INFINITY } else { 0.0 };
    dst.fill(init);
    for row in block.chunks_exact(dst.len()) {
        match kind {
            ReduceOp::Max => dst.iter_mut().zip(row).for_each(|(d, &v)| *d = max_nan(*d, v)),
            _ => dst.iter_mut().zip(row).for_each(|(d, &v)| *d += v),
        }
    }
    if kind == ReduceOp::Mean {
        dst.iter_mut().for_each(|d| *d /= size as f32);
    }
}
