//! Launching the fused softmax, log-softmax and layer-norm kernels, as ATen runs them eagerly:
//! one kernel each instead of the five to nine primitive ops of their decompositions.

use std::sync::Arc;

use cudarc::driver::PushKernelArg;

use super::buffer::CudaBuffer;
use super::context::CudaDevice;
use super::error::CudaError;
use super::params::RowTypes;
use super::pointwise::{Dense, vector_bytes};
use super::source::Instance;
use super::{Input, launch_config};
use crate::layout::numel;

/// Threads for a block that owns one row of `size` elements: about 16 elements per thread.
fn row_threads(size: usize) -> u32 {
    size.div_ceil(16).next_power_of_two().clamp(32, 1024) as u32
}

/// Softmax (or log-softmax) along `dim`.
pub(super) fn softmax(device: &Arc<CudaDevice>, input: Input, dim: usize, log: bool) -> Result<CudaBuffer, CudaError> {
    let x = Dense::of(device, input)?;
    let n = numel(&x.shape);
    let out = CudaBuffer::alloc_of(device, x.dtype, n)?;
    if n == 0 {
        return Ok(out);
    }
    let types = RowTypes::new(x.dtype, x.dtype);
    let instance = Instance::of([x.dtype]);
    let outer: usize = x.shape[..dim].iter().product();
    let size = x.shape[dim];
    let inner: usize = x.shape[dim + 1..].iter().product();
    let (x_ptr, out_ptr, log) = (x.ptr, out.ptr(), i32::from(log));
    let (outer_arg, size_arg, inner_arg) = (outer as i64, size as i64, inner as i64);
    if inner == 1 {
        let vec = i32::from(size.is_multiple_of(4) && x_ptr.is_multiple_of(vector_bytes(x.dtype)));
        let function = device.eager_kernel(&instance.name("softmax"), &instance.name("softmax_rows"))?;
        let mut launch = device.stream().launch_builder(&function);
        launch.arg(&x_ptr).arg(&out_ptr).arg(&outer_arg).arg(&size_arg).arg(&log).arg(&vec).arg(&types);
        // SAFETY: the arguments match the kernel; both buffers hold outer * size elements.
        unsafe { launch.launch(launch_config(outer, (row_threads(size), 1))) }?;
    } else {
        let function = device.eager_kernel(&instance.name("softmax"), &instance.name("softmax_columns"))?;
        let mut launch = device.stream().launch_builder(&function);
        launch.arg(&x_ptr).arg(&out_ptr).arg(&outer_arg).arg(&size_arg).arg(&inner_arg).arg(&log).arg(&types);
        // 32 neighbouring lines per block, up to 32 threads along each.
        let along = size.next_power_of_two().clamp(1, 32) as u32;
        // SAFETY: as above, with outer * size * inner elements.
        unsafe { launch.launch(launch_config(outer * inner.div_ceil(32), (32, along))) }?;
    }
    Ok(out)
}

/// Layer norm over the last dim with an affine `weight` and `bias`.
pub(super) fn layer_norm(
    device: &Arc<CudaDevice>,
    input: Input,
    weight: Input,
    bias: Input,
    eps: f32,
) -> Result<CudaBuffer, CudaError> {
    let (x, w, b) = (Dense::of(device, input)?, Dense::of(device, weight)?, Dense::of(device, bias)?);
    let n = numel(&x.shape);
    // The output has the input's dtype; the weight and bias may have another.
    let out = CudaBuffer::alloc_of(device, x.dtype, n)?;
    let (types, affine) = (RowTypes::new(x.dtype, x.dtype), RowTypes::new(w.dtype, b.dtype));
    let size = *x.shape.last().expect("layer_norm inputs have rank >= 1");
    if n == 0 {
        return Ok(out);
    }
    let rows = n / size;
    let (x_ptr, w_ptr, b_ptr, out_ptr) = (x.ptr, w.ptr, b.ptr, out.ptr());
    let (rows_arg, size_arg) = (rows as i64, size as i64);
    let vec = i32::from(
        size.is_multiple_of(4)
            && [(x_ptr, x.dtype), (w_ptr, w.dtype), (b_ptr, b.dtype)]
                .iter()
                .all(|&(p, dtype)| p.is_multiple_of(vector_bytes(dtype))),
    );
    let instance = Instance::of([x.dtype, w.dtype, b.dtype]);
    let function = device.eager_kernel(&instance.name("layer_norm"), &instance.name("layer_norm_rows"))?;
    let mut launch = device.stream().launch_builder(&function);
    launch
        .arg(&x_ptr)
        .arg(&w_ptr)
        .arg(&b_ptr)
        .arg(&out_ptr)
        .arg(&rows_arg)
        .arg(&size_arg)
        .arg(&eps)
        .arg(&vec)
        .arg(&types)
        .arg(&affine);
    // SAFETY: the arguments match the kernel; x and out hold rows * size elements, w and b size.
    unsafe { launch.launch(launch_config(rows, (row_threads(size), 1))) }?;
    Ok(out)
}
