//! Reductions over one dimension. The input is viewed as `[outer, size, inner]`; rows with
//! `inner == 1` are reduced with several accumulators (fewer rounding steps, vectorisable),
//! otherwise whole inner rows are accumulated at once.

use super::{HostBuffer, Input, PARALLEL_THRESHOLD, TASK_WORK, allocator, contiguous, split_at_dim};
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

/// NaN-propagating maximum, as `torch.amax` behaves.
fn max_nan(a: f32, b: f32) -> f32 {
    // Once the running value is NaN it stays NaN, since nothing compares greater than NaN.
    if b > a || b.is_nan() { b } else { a }
}

fn reduce_row(kind: ReduceOp, row: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut acc = [if kind == ReduceOp::Max { f32::NEG_INFINITY } else { 0.0 }; LANES];
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] = if kind == ReduceOp::Max { max_nan(acc[l], c[l]) } else { acc[l] + c[l] };
        }
    }
    let (init, combine): (f32, fn(f32, f32) -> f32) = match kind {
        ReduceOp::Max => (f32::NEG_INFINITY, max_nan),
        _ => (0.0, |a, b| a + b),
    };
    let total = acc.iter().chain(tail).fold(init, |a, &b| combine(a, b));
    if kind == ReduceOp::Mean { total / row.len() as f32 } else { total }
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
