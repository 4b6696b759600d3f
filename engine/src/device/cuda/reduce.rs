//! Launching `reduce_sum` / `reduce_max`, ATen's `gpu_reduce_kernel`: one kernel for a reduction
//! over any dim of any layout. The launcher picks how threads map to the work:
//!
//! - ROWS when the reduced dim is contiguous (`x.sum(-1)`): threads of a block share a row and
//!   load it 16 bytes at a time;
//! - COLUMNS when neighbouring outputs are neighbours in memory (`x.sum(0)`): 32 threads take 32
//!   neighbouring outputs, so loads stay coalesced, and more threads split each column;
//!
//! and, when there are too few outputs to fill the GPU (`x.sum_all()`), splits each row into
//! chunks whose partial results a second launch combines.

use std::sync::Arc;

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::Input;
use super::buffer::CudaBuffer;
use super::context::CudaDevice;
use super::error::CudaError;
use super::params::{Geometry, MAX_DIMS, ReduceArgs, dtype_code, merge_dims, reversed};
use super::pointwise::{Dense, vector_bytes};
use super::source::Instance;
use crate::dtype::DType;
use crate::layout::{Layout, numel};
use crate::op::ReduceOp;

/// Elements each thread of a ROWS launch should accumulate: a block of 256 per row of 4096, each
/// thread issuing its 4 float4 loads at once. (A warp per row, 32 loads per lane in 8 batches,
/// reached only 0.66 of copy bandwidth on an H100; layer norm, built this way, reached 0.95.)
const ROW_ELEMENTS_PER_THREAD: usize = 16;

/// Rows of a column each thread of a COLUMNS launch should accumulate.
const COLUMN_ROWS_PER_THREAD: usize = 64;

/// The fewest elements per thread when a row is split across blocks.
const MIN_PER_THREAD: usize = 16;

/// `kind` over `dim`; the result is dense in the keepdim shape (either keepdim form reads it).
pub(super) fn reduce(
    device: &Arc<CudaDevice>,
    kind: ReduceOp,
    input: Input,
    dim: usize,
) -> Result<CudaBuffer, CudaError> {
    let (buffer, layout) = input.tensor();
    let size = layout.shape()[dim];
    let scale = if kind == ReduceOp::Mean { 1.0 / size as f32 } else { 1.0 };
    let kernel = if kind == ReduceOp::Max { "reduce_max" } else { "reduce_sum" };
    // The result has the input's dtype; accumulation is in float whatever it is.
    let task = Task { kernel, scale, output: buffer.dtype() };
    match task.plan(device, buffer.ptr_at(layout.offset()), buffer.dtype(), layout, dim) {
        Some(plan) => plan.run(device),
        None => {
            // Neither the reduced dim nor the kept ones are contiguous: copy once, then reduce.
            let dense = Dense::of(device, input)?;
            let plan = task
                .plan(device, dense.ptr, dense.dtype, &dense.layout(), dim)
                .expect("a dense layout always has a plan");
            plan.run(device)
        }
    }
}

/// Which kernel, and the factor applied to the final results.
#[derive(Clone, Copy)]
struct Task {
    kernel: &'static str,
    scale: f32,
    /// The dtype of the result.
    output: DType,
}

/// One launch, fully decided.
struct Plan {
    task: Task,
    /// The input's dtype.
    input: DType,
    args: ReduceArgs,
    block: (u32, u32),
    blocks: usize,
    splits: usize,
}

impl Task {
    /// The launch for reducing `dim` of the view `layout` whose element 0 is at `ptr`, or `None`
    /// when no thread mapping reads it coalesced.
    fn plan(self, device: &CudaDevice, ptr: u64, input: DType, layout: &Layout, dim: usize) -> Option<Plan> {
        let size = layout.shape()[dim];
        let stride = if size <= 1 { 1 } else { layout.strides()[dim] as i64 };
        let kept =
            |v: &[usize]| -> Vec<usize> { v.iter().enumerate().filter(|&(d, _)| d != dim).map(|(_, &x)| x).collect() };
        let kept_strides: Vec<i64> = kept(layout.strides()).iter().map(|&s| s as i64).collect();
        let (out_shape, out_strides) = merge_dims(&kept(layout.shape()), &[kept_strides]);
        let out_strides = &out_strides[0];
        if out_shape.len() > MAX_DIMS {
            return None;
        }
        let columns = if stride == 1 {
            false
        } else if out_strides.last() == Some(&1) {
            true
        } else {
            return None;
        };
        let n_out = numel(&out_shape);
        let (inner_size, kept_outer_strides) = match out_shape.len() {
            0 => (1, &out_strides[..0]),
            rank => (out_shape[rank - 1], &out_strides[..rank - 1]),
        };
        let vec = if columns {
            // 4 neighbouring outputs per thread: they must sit in one innermost row, 16-byte aligned.
            inner_size.is_multiple_of(4)
                && stride % 4 == 0
                && ptr.is_multiple_of(vector_bytes(input))
                && kept_outer_strides.iter().all(|s| s % 4 == 0)
        } else {
            stride == 1
                && size.is_multiple_of(4)
                && ptr.is_multiple_of(vector_bytes(input))
                && out_strides.iter().all(|s| s % 4 == 0)
        };
        let (block, blocks, per_split) = if columns {
            let rows = size.div_ceil(COLUMN_ROWS_PER_THREAD).next_power_of_two().clamp(1, 16);
            let outputs_per_block = if vec { 128 } else { 32 };
            ((32, rows as u32), n_out.div_ceil(outputs_per_block), rows * MIN_PER_THREAD)
        } else {
            let width = size.div_ceil(ROW_ELEMENTS_PER_THREAD).next_power_of_two().clamp(32, 512);
            let rows = (256 / width).max(1);
            ((width as u32, rows as u32), n_out.div_ceil(rows), width * MIN_PER_THREAD)
        };
        // Too few blocks to keep two on every multiprocessor, and long rows: split the rows across
        // grid.y, in chunks that are multiples of 4 so that every chunk starts 16-byte aligned.
        let target_blocks = 2 * device.facts().multiprocessors as usize;
        let wanted = if blocks < target_blocks { target_blocks.div_ceil(blocks) } else { 1 };
        let splits = wanted.min(size.div_ceil(per_split)).clamp(1, 65_535);
        let chunk = size.div_ceil(splits).next_multiple_of(4).max(4);
        let splits = size.div_ceil(chunk).max(1);
        let args = ReduceArgs {
            input: ptr,
            out: 0,
            n_out: n_out as i64,
            size: size as i64,
            stride,
            chunk: chunk as i64,
            scale: if splits > 1 { 1.0 } else { self.scale },
            columns: i32::from(columns),
            vec: i32::from(vec),
            in_dtype: dtype_code(input),
            // Partial results of a split row stay in float for the second pass.
            out_dtype: dtype_code(if splits > 1 { DType::F32 } else { self.output }),
            outputs: Geometry::new(&out_shape),
            output_strides: reversed(out_strides),
        };
        Some(Plan { task: self, input, args, block, blocks, splits })
    }
}

impl Plan {
    fn run(mut self, device: &Arc<CudaDevice>) -> Result<CudaBuffer, CudaError> {
        let n_out = self.args.n_out as usize;
        let dtype = if self.splits > 1 { DType::F32 } else { self.task.output };
        let out = CudaBuffer::alloc_of(device, dtype, n_out * self.splits)?;
        if n_out == 0 {
            return Ok(out);
        }
        self.args.out = out.ptr();
        // The instance for the input's dtype; the output's is read at run time (one store per
        // output).
        let instance = Instance::of([self.input]);
        let function = device.eager_kernel(&instance.name("reduce"), &instance.name(self.task.kernel))?;
        let config = LaunchConfig {
            grid_dim: (self.blocks.min(i32::MAX as usize) as u32, self.splits as u32, 1),
            block_dim: (self.block.0, self.block.1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = device.stream().launch_builder(&function);
        launch.arg(&self.args);
        // SAFETY: `ReduceArgs` mirrors the kernel's parameter; every input offset comes from a
        // validated layout and the output holds n_out * splits elements.
        unsafe { launch.launch(config) }?;
        if self.splits == 1 {
            return Ok(out);
        }
        // Combine the partials, laid out [splits, n_out], over their first dim.
        let partials = Layout::contiguous(&[self.splits, n_out]);
        self.task
            .plan(device, out.ptr(), DType::F32, &partials, 0)
            .expect("a dense layout always has a plan")
            .run(device)
    }
}
