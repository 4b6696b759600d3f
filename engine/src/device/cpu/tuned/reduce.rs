//! Reductions over one dimension. The input is viewed as `[outer, size, inner]`; rows with
//! `inner == 1` are reduced with several accumulators (fewer rounding steps, vectorisable),
//! otherwise whole inner rows are accumulated at once.

use crate::device::cpu::convert::widen;
use crate::device::cpu::{
    HostBuffer, Input, Loops, PARALLEL_THRESHOLD, TASK_WORK, allocator, contiguous, max_nan, split_at_dim,
};
use crate::dtype::DType;
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

/// [`reduce`] of a contiguous bf16 or f16 tensor over its last dim, in `f32`: each task widens
/// its own rows, one at a time, as it reduces them (as ATen's reductions widen each vector they
/// load), rather than the whole tensor being widened into a copy first, which took longer than
/// the reduction itself (bench/NOTES-precision.md). `None` for any other input, which [`reduce`]
/// takes once widened.
pub(super) fn reduce_half_rows<L: Loops>(kind: ReduceOp, input: Input, dim: usize) -> Option<HostBuffer> {
    let (buffer, layout) = input.tensor();
    let (outer, size, inner) = split_at_dim(layout.shape(), dim);
    if buffer.dtype() == DType::F32 || inner != 1 || size == 0 || !layout.is_contiguous() {
        return None;
    }
    let elements = buffer.elements().slice(layout.offset(), layout.numel());
    let rows_per_task = (TASK_WORK / size).max(1);
    let reduce_task = |task: usize, dst: &mut [f32]| {
        let mut row = vec![0.0f32; size];
        for (i, dst) in dst.iter_mut().enumerate() {
            widen::<L>(elements.slice((task * rows_per_task + i) * size, size), &mut row);
            *dst = reduce_row(kind, &row);
        }
    };
    let mut out = allocator::uninit(outer);
    if outer * size > PARALLEL_THRESHOLD {
        parallel::for_each_chunk_mut(&mut out, rows_per_task, reduce_task);
    } else {
        out.chunks_mut(rows_per_task).enumerate().for_each(|(task, dst)| reduce_task(task, dst));
    }
    Some(out)
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

#[cfg(test)]
mod tests {
    use super::{reduce, reduce_half_rows};
    use crate::device::cpu::{HostBuffer, Input, tuned::simd::Vectorized};
    use crate::dtype::DType;
    use crate::layout::Layout;
    use crate::op::ReduceOp;

    /// Widening row by row gives the bits that widening the whole tensor first gives, for every
    /// kind, in one task and across many (with a last task of fewer rows), on a view that starts
    /// past its buffer's first element; other inputs are left to `reduce`.
    #[test]
    fn half_rows_reduce_as_the_widened_tensor_does() {
        for dtype in [DType::BF16, DType::F16] {
            for (rows, size, skip) in [(3, 5, 0), (300, 257, 2), (64, 1024, 1)] {
                let values: Vec<f32> =
                    (0..(rows + skip) * size).map(|i| ((i * 7919) % 613) as f32 / 97.0 - 3.0).collect();
                let buffer = HostBuffer::rounded(&values, dtype);
                let layout = Layout::new(vec![rows, size], vec![size, 1], skip * size);
                let wide = HostBuffer::rounded(&buffer.to_f32_vec(), DType::F32);
                for kind in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
                    let got =
                        reduce_half_rows::<Vectorized>(kind, Input::Tensor { buffer: &buffer, layout: &layout }, 1)
                            .expect("a contiguous half-precision row reduction");
                    let want = reduce(kind, Input::Tensor { buffer: &wide, layout: &layout }, 1);
                    assert_eq!(got.to_f32_vec(), want.to_f32_vec(), "{kind:?} of {rows} x {size} {dtype}");
                }
            }
        }
        let buffer = HostBuffer::rounded(&[1.0; 12], DType::BF16);
        let columns = Layout::contiguous(&[3, 4]);
        assert!(
            reduce_half_rows::<Vectorized>(ReduceOp::Sum, Input::Tensor { buffer: &buffer, layout: &columns }, 0)
                .is_none()
        );
        let wide = HostBuffer::rounded(&[1.0; 12], DType::F32);
        assert!(
            reduce_half_rows::<Vectorized>(ReduceOp::Sum, Input::Tensor { buffer: &wide, layout: &columns }, 1)
                .is_none()
        );
    }
}
