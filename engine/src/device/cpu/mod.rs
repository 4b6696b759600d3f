//! Eager CPU kernels, the analogue of ATen's CPU kernels: one pass over memory per op,
//! parallel over large outputs, reading any strided layout.

mod allocator;
pub(crate) use allocator::{HostBuffer, uninit};
mod attention;
mod attention_backward;
mod dot_tiles;
mod epilogue;
pub(crate) use epilogue::Epilogue;
mod gather;
mod lanes;
mod matmul;
pub(crate) use matmul::matmul_into;
mod normalize;
mod outer_tiles;
mod pointwise;
mod reduce;
mod simd;
pub(crate) mod vecmath;

use std::convert::Infallible;

use super::backend::Backend;
use crate::layout::{Layout, numel};
use crate::op::{AttentionParams, BinaryOp, CustomOp, ReduceOp, UnaryOp};
use crate::parallel;

/// Below this many elements a kernel runs on the calling thread: splitting costs more than it saves.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 15;
/// Elements of work one task of a split kernel does: enough to amortise the task, small enough to
/// spread a kernel over every core.
pub(crate) const TASK_WORK: usize = 1 << 14;

/// One operand as a CPU kernel sees it: a host slice and a layout, or a scalar.
pub(crate) type Input<'a> = super::backend::Input<'a, [f32]>;

/// The CPU's eager kernels.
pub(crate) struct Cpu;

impl Backend for Cpu {
    type Buffer = [f32];
    type Output = HostBuffer;
    type Error = Infallible;

    fn unary(&self, op: UnaryOp, x: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::unary(op, x, out_shape))
    }

    fn binary(&self, op: BinaryOp, a: Input, b: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::binary(op, a, b, out_shape))
    }

    fn where_(&self, [cond, a, b]: [Input; 3], out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::where_(cond, a, b, out_shape))
    }

    fn copy(&self, x: Input, _out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(copy(x))
    }

    fn custom(&self, op: &CustomOp, inputs: &[Input], out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        let dense: Vec<Vec<f32>> = inputs
            .iter()
            .map(|input| {
                let (data, layout) = input.tensor();
                contiguous(data, &layout.expand(out_shape)).into_vec()
            })
            .collect();
        Ok(op.run_cpu(&dense, numel(out_shape)).into())
    }

    fn reduce(&self, kind: ReduceOp, x: Input, dim: usize) -> Result<HostBuffer, Infallible> {
        Ok(reduce::reduce(kind, x, dim))
    }

    fn softmax(&self, x: Input, dim: usize, log: bool) -> Result<HostBuffer, Infallible> {
        Ok(normalize::softmax(x, dim, log))
    }

    fn layer_norm(&self, [x, weight, bias]: [Input; 3], eps: f32) -> Result<HostBuffer, Infallible> {
        Ok(normalize::layer_norm(x, weight, bias, eps))
    }

    fn matmul(&self, a: Input, b: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(matmul::matmul(a, b, out_shape))
    }

    fn attention(&self, inputs: &[Input], params: AttentionParams) -> Result<HostBuffer, Infallible> {
        Ok(attention::attention(inputs, params))
    }

    fn attention_backward(&self, inputs: &[Input], params: AttentionParams) -> Result<HostBuffer, Infallible> {
        Ok(attention_backward::attention_backward(inputs, params))
    }

    fn cat(&self, inputs: &[Input], dim: usize, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(cat(inputs, dim, out_shape))
    }
}

/// `inputs` joined along `dim`: each of the `outer` rows of the output (the dims before `dim`)
/// is the inputs' rows, one after the other. The output is written in chunks spread over the
/// pool, each chunk a few runs copied from the inputs.
fn cat(inputs: &[Input], dim: usize, out_shape: &[usize]) -> HostBuffer {
    let parts: Vec<(&[f32], &Layout, usize)> = inputs
        .iter()
        .map(|input| {
            let (data, layout) = input.tensor();
            (data, layout, numel(&layout.shape()[dim..]))
        })
        .collect();
    // Where each input's part of an output row starts, and the row's width.
    let starts: Vec<usize> =
        parts.iter().scan(0, |at, &(_, _, width)| Some(std::mem::replace(at, *at + width))).collect();
    let row: usize = parts.iter().map(|&(_, _, width)| width).sum();
    let fill = |first: usize, chunk: &mut [f32]| {
        let mut done = 0;
        while done < chunk.len() {
            let at = first + done;
            let (outer, column) = (at / row, at % row);
            let part = starts.partition_point(|&s| s <= column) - 1;
            let (data, layout, width) = parts[part];
            let run = (starts[part] + width - column).min(chunk.len() - done);
            gather::gather(data, layout, outer * width + column - starts[part], &mut chunk[done..done + run]);
            done += run;
        }
    };
    let mut out = allocator::uninit(numel(out_shape));
    if row == 0 {
        return out;
    }
    if out.len() > PARALLEL_THRESHOLD {
        parallel::for_each_chunk_mut(&mut out, TASK_WORK, |i, chunk| fill(i * TASK_WORK, chunk));
    } else {
        fill(0, &mut out);
    }
    out
}

/// A dense row-major copy of any view.
fn copy(input: Input) -> HostBuffer {
    let (data, layout) = input.tensor();
    match contiguous(data, layout) {
        Dense::Borrowed(data) => HostBuffer::copy_of(data),
        Dense::Copied(buffer) => buffer,
    }
}

/// A view's elements as a dense slice: borrowed where they already are, else a copy.
enum Dense<'a> {
    Borrowed(&'a [f32]),
    Copied(HostBuffer),
}

impl Dense<'_> {
    /// The elements as a vector of their own.
    fn into_vec(self) -> Vec<f32> {
        match self {
            Dense::Borrowed(data) => data.to_vec(),
            Dense::Copied(buffer) => buffer.into_vec(),
        }
    }
}

impl std::ops::Deref for Dense<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            Dense::Borrowed(data) => data,
            Dense::Copied(buffer) => buffer,
        }
    }
}

/// The view's elements as a dense slice, borrowing when they already are.
fn contiguous<'a>(data: &'a [f32], layout: &Layout) -> Dense<'a> {
    if layout.is_contiguous() {
        Dense::Borrowed(&data[layout.offset()..layout.offset() + layout.numel()])
    } else {
        Dense::Copied(gather::dense_copy(data, layout))
    }
}

/// Splits a contiguous shape around `dim` into `(outer, size, inner)`.
fn split_at_dim(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    (shape[..dim].iter().product(), shape[dim], shape[dim + 1..].iter().product())
}
