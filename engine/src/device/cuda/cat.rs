//! `torch.cat` on the GPU, the analogue of ATen's `cat_out_cuda`: the inputs, made dense, are
//! copied by one kernel (`kernels/cat.cu`) for up to eight of them, four floats at a time where
//! the sizes and addresses allow. The output is seen as rows
//! (the dims before `dim`) of columns (`dim` and the dims after it), and each input fills its
//! band of columns in every row.
//!
//! One launch, not one strided memory copy per input: each `cuMemcpy2DAsync` costs microseconds
//! of GPU time whatever its size (bench/NOTES-modes.md, fifth round).

use std::sync::Arc;

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use super::Input;
use super::buffer::CudaBuffer;
use super::context::CudaDevice;
use super::error::CudaError;
use super::pointwise::Dense;
use super::source::CAT;
use crate::layout::numel;

/// Inputs one launch joins (`CAT_MAX_INPUTS` in the kernel).
const MAX_INPUTS: usize = 8;

/// Threads per block of the copy.
const THREADS: u32 = 256;

/// Mirrors `CatParams` in `kernels/cat.cu`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct CatParams {
    src: [u64; MAX_INPUTS],
    width: [i64; MAX_INPUTS],
    start: [i64; MAX_INPUTS],
    out: u64,
    rows: i64,
    out_row: i64,
    first: i64,
    last: i64,
    count: i32,
}

// SAFETY: `CatParams` is `repr(C)` plain data laid out as the kernel's struct.
unsafe impl DeviceRepr for CatParams {}

/// `inputs` joined along `dim` into a fresh dense buffer of `out_shape`.
pub(super) fn cat(
    device: &Arc<CudaDevice>,
    inputs: &[Input],
    dim: usize,
    out_shape: &[usize],
) -> Result<CudaBuffer, CudaError> {
    let dtype = inputs[0].tensor().0.dtype();
    let out = CudaBuffer::alloc_of(device, dtype, numel(out_shape))?;
    cat_into(device, inputs, dim, out_shape, &out)?;
    Ok(out)
}

/// `inputs` joined along `dim`, written densely as `out_shape` at the start of `out` (compiled
/// code's planned buffer, which holds at least that many elements).
pub(crate) fn cat_into(
    device: &Arc<CudaDevice>,
    inputs: &[Input],
    dim: usize,
    out_shape: &[usize],
    out: &CudaBuffer,
) -> Result<(), CudaError> {
    debug_assert!(out.len() >= numel(out_shape), "the planned buffer holds the joined tensor");
    let rows = numel(&out_shape[..dim]);
    let out_row = numel(&out_shape[dim..]);
    // Empty inputs fill no columns; dropping them keeps each launch's bands non-empty.
    let dense = inputs.iter().map(|&input| Dense::of(device, input)).collect::<Result<Vec<_>, _>>()?;
    let mut parts = Vec::with_capacity(dense.len());
    let mut column = 0;
    for part in &dense {
        let width = numel(&part.shape[dim..]);
        if width > 0 {
            parts.push((part.ptr, width, column));
        }
        column += width;
    }
    if rows == 0 {
        return Ok(());
    }
    // Sixteen bytes at a time when every band, row and address is a multiple of 16 bytes; else
    // one element (a copy moves bits, whatever the dtype).
    let size = out.dtype().size_in_bytes();
    let per_vector = 16 / size;
    let aligned = |n: usize| n.is_multiple_of(per_vector);
    let vectors = aligned(out_row)
        && out.ptr().is_multiple_of(16)
        && parts.iter().all(|&(ptr, width, start)| ptr.is_multiple_of(16) && aligned(width) && aligned(start));
    let (name, unit) = match (vectors, size) {
        (true, _) => ("cat_dense16", per_vector),
        (false, 1) => ("cat_dense1", 1),
        (false, 2) => ("cat_dense2", 1),
        (false, _) => ("cat_dense4", 1),
    };
    let function = device.eager_kernel(CAT, name)?;
    for chunk in parts.chunks(MAX_INPUTS) {
        let units = |n: usize| (n / unit) as i64;
        let mut params = CatParams { out: out.ptr(), rows: rows as i64, out_row: units(out_row), ..Default::default() };
        for (k, &(ptr, width, start)) in chunk.iter().enumerate() {
            (params.src[k], params.width[k], params.start[k]) = (ptr, units(width), units(start));
        }
        let (first, last) = (chunk[0].2 / unit, (chunk[chunk.len() - 1].2 + chunk[chunk.len() - 1].1) / unit);
        (params.first, params.last, params.count) = (first as i64, last as i64, chunk.len() as i32);
        let blocks =
            (rows * (last - first)).div_ceil(THREADS as usize).min(device.facts().multiprocessors as usize * 16);
        let config = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        let mut launch = device.stream().launch_builder(&function);
        launch.arg(&params);
        // SAFETY: each source holds `rows x width` dense elements and `out` holds `rows x out_row`
        // (checked above); the kernel reads and writes only those. The dense copies in `dense`
        // are freed after this launch in stream order.
        unsafe { launch.launch(config) }?;
    }
    drop(dense);
    Ok(())
}
