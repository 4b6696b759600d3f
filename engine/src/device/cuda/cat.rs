//! `torch.cat` on the GPU, the analogue of ATen's `cat_out_cuda`: no kernel of its own. Each
//! input, made dense, fills its band of columns in the output with one strided 2-D memory copy
//! (rows: the dims before `dim`; columns: `dim` and the dims after it), so the copy engine moves
//! the bytes at memory speed.

use std::sync::Arc;

use cudarc::driver::sys;

use super::Input;
use super::buffer::CudaBuffer;
use super::context::CudaDevice;
use super::error::CudaError;
use super::pointwise::Dense;
use crate::layout::numel;

/// `inputs` joined along `dim` into a fresh dense buffer of `out_shape`.
pub(super) fn cat(
    device: &Arc<CudaDevice>,
    inputs: &[Input],
    dim: usize,
    out_shape: &[usize],
) -> Result<CudaBuffer, CudaError> {
    let out = CudaBuffer::alloc(device, numel(out_shape))?;
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
    let bytes = std::mem::size_of::<f32>();
    let out_row = numel(&out_shape[dim..]) * bytes;
    let mut column = 0;
    for &input in inputs {
        let dense = Dense::of(device, input)?;
        let width = numel(&dense.shape[dim..]) * bytes;
        if width > 0 && rows > 0 {
            let copy = sys::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: dense.ptr,
                srcArray: std::ptr::null_mut(),
                srcPitch: width,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: out.ptr() + column as u64,
                dstArray: std::ptr::null_mut(),
                dstPitch: out_row,
                WidthInBytes: width,
                Height: rows,
            };
            // SAFETY: both regions lie inside live buffers (`rows` rows of `width` bytes, at the
            // pitches given), and the copy is queued on the stream every kernel uses, before
            // `dense` (and any copy it made) is freed in stream order.
            unsafe { sys::cuMemcpy2DAsync_v2(&copy, device.stream().cu_stream()) }.result()?;
        }
        column += width;
    }
    Ok(())
}
