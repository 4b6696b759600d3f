//! Eager CPU kernels, the analogue of ATen's CPU kernels: one pass over memory per op, parallel
//! over large outputs, reading any strided layout.
//!
//! Two providers implement the kernel-provider seam ([`KernelProvider`]):
//! - [`Plain`] (`plain.rs`): each op family as the loop a reader would write first;
//! - [`Tuned`] (`tuned/`, the default): the fast paths, vector math in lanes, tiled and packed
//!   GEMMs, flash attention.
//!
//! What both share is here and beside it: the allocator, strided gathers, the elementwise
//! kernels (`pointwise.rs`), what the device has once ([`Cpu`]: `copy`, `cat`, custom ops), and
//! the conversions between a buffer's dtype and the `f32` every kernel computes in
//! (`convert.rs`). [`vecmath`] is the vector math the tuned kernels and the C that Inductor
//! generates both call, from one set of coefficients.

mod allocator;
pub(crate) use allocator::{
    Elements, ElementsMut, HostBuffer, Stored, for_dtype, too_large, uninit, uninit_of, with_elements,
};
mod convert;
pub(crate) use convert::{Widened, bf16_bits_to_f32, f32_to_bf16_bits, in_f32, widen_bytes};
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
use std::marker::PhantomData;

use super::provider::{self, DeviceKernels, Kernels, kernels};
use crate::dtype::{DType, bf16, f16};
use crate::layout::{Layout, numel};
use crate::op::{CustomOp, Op};
use crate::parallel;

/// Below this many elements a kernel runs on the calling thread: splitting costs more than it saves.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 15;
/// Elements of work one task of a split kernel does: enough to amortise the task, small enough to
/// spread a kernel over every core.
pub(crate) const TASK_WORK: usize = 1 << 14;

/// One operand as a CPU kernel sees it: a host buffer (of any dtype) and a layout, or a scalar.
/// An `f32` buffer dereferences to its `[f32]` elements, which is how the `f32` kernels read it.
pub(crate) type Input<'a> = super::provider::Input<'a, HostBuffer>;

/// Runs one non-view op on the CPU provider this thread runs on
/// ([`with_kernels`](crate::device::with_kernels)): the one place that names the providers.
/// The result has dtype `dtype`.
pub(crate) fn execute(op: &Op, inputs: &[Input], out_shape: &[usize], dtype: DType) -> HostBuffer {
    let Ok(output) = match kernels() {
        Kernels::Tuned => provider::execute(&Tuned, op, inputs, out_shape, dtype),
        Kernels::Plain => provider::execute(&Plain, op, inputs, out_shape, dtype),
    };
    output
}

/// How a CPU kernel's hot loops are compiled: as written ([`AsWritten`], the plain kernels), or
/// once more for the CPU's widest vectors (`tuned::simd::Vectorized`), and how they convert
/// half-precision elements to and from `f32` (element by element as written; with the CPU's
/// conversion instructions when tuned).
pub(crate) trait Loops {
    /// Runs `f`, compiled as this choice says.
    fn run<R>(f: impl FnOnce() -> R) -> R;

    /// `dst[i] = src[i]` widened.
    fn widen_bf16(src: &[bf16], dst: &mut [f32]) {
        convert::plain_widen_bf16(src, dst);
    }

    /// `dst[i] = src[i]` rounded to nearest, ties to even.
    fn narrow_bf16(src: &[f32], dst: &mut [bf16]) {
        convert::plain_narrow_bf16(src, dst);
    }

    /// `dst[i] = src[i]` widened.
    fn widen_f16(src: &[f16], dst: &mut [f32]) {
        convert::plain_widen_f16(src, dst);
    }

    /// `dst[i] = src[i]` rounded to nearest, ties to even.
    fn narrow_f16(src: &[f32], dst: &mut [f16]) {
        convert::plain_narrow_f16(src, dst);
    }
}

/// Loops compiled as written, for the baseline instruction set.
pub(crate) struct AsWritten;

impl Loops for AsWritten {
    #[inline(always)]
    fn run<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// The CPU: host memory, and the kernels both of its providers share, their conversions
/// between dtypes compiled as `L` says (element by element for the plain provider, in vectors for
/// the tuned one).
pub(crate) struct Cpu<L>(PhantomData<L>);

impl<L> Cpu<L> {
    /// The CPU, converting as `L` does.
    pub(crate) const NEW: Self = Cpu(PhantomData);
}

impl<L: Loops> DeviceKernels for Cpu<L> {
    type Buffer = HostBuffer;
    type Output = HostBuffer;
    type Error = Infallible;

    fn copy(&self, x: Input, _out_shape: &[usize], dtype: DType) -> Result<HostBuffer, Infallible> {
        Ok(copy::<L>(x, dtype))
    }

    fn cat(&self, inputs: &[Input], dim: usize, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(cat(inputs, dim, out_shape))
    }

    /// The op's compiled C loop over the inputs (widened to `f32`), made dense at the output's
    /// shape, stored as `dtype`.
    fn custom(
        &self,
        op: &CustomOp,
        inputs: &[Input],
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<HostBuffer, Infallible> {
        Ok(custom::<L>(op, inputs, out_shape, dtype))
    }

    fn scaled_mm(&self, _: [Input; 4], _: &[usize], _: DType) -> Result<HostBuffer, Infallible> {
        unreachable!("the eager dispatcher and Inductor refuse FP8 products on the CPU before a kernel runs")
    }

    fn upload(&self, values: &[f32]) -> Result<HostBuffer, Infallible> {
        Ok(values.to_vec().into())
    }

    fn as_input(output: &HostBuffer) -> &HostBuffer {
        output
    }

    fn dtype(buffer: &HostBuffer) -> DType {
        buffer.dtype()
    }
}

/// A custom op's element function (of `f32`s) over `inputs` broadcast to `out_shape`, stored as
/// `dtype`.
fn custom<L: Loops>(op: &CustomOp, inputs: &[Input], out_shape: &[usize], dtype: DType) -> HostBuffer {
    in_f32::<L>(inputs, dtype, |inputs| {
        let dense: Vec<Vec<f32>> = inputs
            .iter()
            .map(|input| {
                let (data, layout) = input.tensor();
                contiguous(data, &layout.expand(out_shape)).into_vec()
            })
            .collect();
        op.run_cpu(&dense, numel(out_shape)).into()
    })
}

/// `inputs` (all of the output's dtype) joined along `dim`.
fn cat(inputs: &[Input], dim: usize, out_shape: &[usize]) -> HostBuffer {
    let dtype = inputs[0].tensor().0.dtype();
    for_dtype!(dtype, T => cat_typed::<T>(inputs, dim, out_shape))
}

/// `inputs` joined along `dim`: each of the `outer` rows of the output (the dims before `dim`)
/// is the inputs' rows, one after the other. The output is written in chunks spread over the
/// pool, each chunk a few runs copied from the inputs.
fn cat_typed<T: Stored>(inputs: &[Input], dim: usize, out_shape: &[usize]) -> HostBuffer {
    let parts: Vec<(&[T], &Layout, usize)> = inputs
        .iter()
        .map(|input| {
            let (data, layout) = input.tensor();
            (data.typed::<T>(), layout, numel(&layout.shape()[dim..]))
        })
        .collect();
    // Where each input's part of an output row starts, and the row's width.
    let starts: Vec<usize> =
        parts.iter().scan(0, |at, &(_, _, width)| Some(std::mem::replace(at, *at + width))).collect();
    let row: usize = parts.iter().map(|&(_, _, width)| width).sum();
    let fill = |first: usize, chunk: &mut [T]| {
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
    let mut buffer = allocator::uninit_of(T::DTYPE, numel(out_shape));
    if row == 0 {
        return buffer;
    }
    let out = buffer.typed_mut::<T>();
    if out.len() > PARALLEL_THRESHOLD {
        parallel::for_each_chunk_mut(out, TASK_WORK, |i, chunk| fill(i * TASK_WORK, chunk));
    } else {
        fill(0, out);
    }
    buffer
}

/// A dense row-major copy of any view, converted to `dtype`.
fn copy<L: Loops>(input: Input, dtype: DType) -> HostBuffer {
    let (data, layout) = input.tensor();
    if data.dtype() != dtype {
        return pointwise::convert::<L>(input, layout.shape(), dtype);
    }
    if layout.is_contiguous() {
        let size = dtype.size_in_bytes();
        let bytes = &data.bytes()[layout.offset() * size..(layout.offset() + layout.numel()) * size];
        return HostBuffer::from_bytes(dtype, bytes);
    }
    gather::dense_copy(data.elements(), layout)
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

/// The view's `f32` elements as a dense slice, borrowing when they already are.
fn contiguous<'a>(data: &'a [f32], layout: &Layout) -> Dense<'a> {
    if layout.is_contiguous() {
        Dense::Borrowed(&data[layout.offset()..layout.offset() + layout.numel()])
    } else {
        Dense::Copied(gather::dense_copy(Elements::F32(data), layout))
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
