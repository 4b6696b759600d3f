//! Eager CPU kernels, the analogue of ATen's CPU kernels: one pass over memory per op, parallel
//! over large outputs, reading any strided layout.
//!
//! Two providers implement the kernel-provider seam ([`KernelProvider`]):
//! - [`Plain`] (`plain.rs`): each op family as the loop a reader would write first;
//! - [`Tuned`] (`tuned/`, the default): the fast paths, vector math in lanes, tiled and packed
//!   GEMMs, flash attention.
//!
//! What both share is here and beside it: the allocator, strided gathers, the elementwise
//! kernels (`pointwise.rs`), and what the device has once ([`Cpu`]: `copy`, `cat`, custom ops). [`vecmath`] is the vector math the
//! tuned kernels and the C that Inductor generates both call, from one set of coefficients.

mod allocator;
pub(crate) use allocator::{HostBuffer, too_large, uninit};
mod gather;
mod plain;
use plain::Plain;
mod pointwise;
pub(crate) mod queue;
pub(crate) mod tuned;
use tuned::Tuned;
pub(crate) use tuned::{Epilogue, matmul_into};
pub(crate) mod vecmath;

use std::convert::Infallible;

use super::provider::{self, DeviceKernels, Kernels, kernels};
use crate::layout::{Layout, numel};
use crate::op::{CustomOp, Op};
use crate::parallel;

/// Below this many elements a kernel runs on the calling thread: splitting costs more than it saves.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 15;
/// Elements of work one task of a split kernel does: enough to amortise the task, small enough to
/// spread a kernel over every core.
pub(crate) const TASK_WORK: usize = 1 << 14;

/// One operand as a CPU kernel sees it: a host slice and a layout, or a scalar.
pub(crate) type Input<'a> = super::provider::Input<'a, [f32]>;

/// Runs one non-view op on the CPU provider this thread runs on
/// ([`with_kernels`](crate::device::with_kernels)): the one place that names the providers.
pub(crate) fn execute(op: &Op, inputs: &[Input], out_shape: &[usize]) -> HostBuffer {
    let Ok(output) = match kernels() {
        Kernels::Tuned => provider::execute(&Tuned, op, inputs, out_shape),
        Kernels::Plain => provider::execute(&Plain, op, inputs, out_shape),
    };
    output
}

/// How a CPU kernel's hot loop is compiled: as written ([`AsWritten`], the plain kernels), or
/// once more for the CPU's widest vectors (`tuned::simd::Vectorized`).
pub(crate) trait Loops {
    /// Runs `f`, compiled as this choice says.
    fn run<R>(f: impl FnOnce() -> R) -> R;
}

/// Loops compiled as written, for the baseline instruction set.
pub(crate) struct AsWritten;

impl Loops for AsWritten {
    #[inline(always)]
    fn run<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// The CPU: host memory, and the kernels both of its providers share.
pub(crate) struct Cpu;

impl DeviceKernels for Cpu {
    type Buffer = [f32];
    type Output = HostBuffer;
    type Error = Infallible;

    fn copy(&self, x: Input, _out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(copy(x))
    }

    fn cat(&self, inputs: &[Input], dim: usize, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(cat(inputs, dim, out_shape))
    }

    /// The op's compiled C loop over the inputs, made dense at the output's shape.
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

    fn upload(&self, values: &[f32]) -> Result<HostBuffer, Infallible> {
        Ok(values.to_vec().into())
    }

    fn as_input(output: &HostBuffer) -> &[f32] {
        output
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

/// NaN-propagating maximum, as `torch.amax` behaves.
#[inline(always)]
fn max_nan(a: f32, b: f32) -> f32 {
    // Once the running value is NaN it stays NaN, since nothing compares greater than NaN.
    if b > a || b.is_nan() { b } else { a }
}

/// Splits a contiguous shape around `dim` into `(outer, size, inner)`.
fn split_at_dim(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    (shape[..dim].iter().product(), shape[dim], shape[dim + 1..].iter().product())
}
