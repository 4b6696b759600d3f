//! The ceilings that eager kernels are measured against, timed in the same run: a device-to-device
//! copy (what the memory system moves, counting bytes read plus bytes written) and the vendor GEMM
//! on ready buffers (what the arithmetic units deliver). An eager kernel's "fraction of copy
//! bandwidth" or "fraction of cuBLAS" is only meaningful next to a ceiling measured this way.

use std::sync::Arc;

use crate::device::cuda::matmul::{Operand, sgemm};
use crate::device::cuda::{CudaBuffer, CudaDevice, CudaError};
use crate::device::{Device, cpu};
use crate::error::{Error, Result, SourceLocation};
use crate::layout::Layout;
use crate::tensor::Tensor;

/// A timed closure.
pub type Work = Box<dyn FnMut() -> Result<()>>;

/// Copies `n` f32 between two buffers on `device` each call (a D2D `memcpy` on a GPU, a slice
/// copy on the CPU): `8 n` bytes moved.
#[track_caller]
pub fn copy(device: Device, n: usize) -> Result<Work> {
    crate::wires::trip(crate::wires::Wire::Baseline);
    let location = SourceLocation::caller();
    let source = Tensor::randn(&[n], 1).to_vec()?;
    match device {
        Device::Cpu => {
            let mut target = vec![0.0f32; n];
            Ok(Box::new(move || {
                target.copy_from_slice(&source);
                std::hint::black_box(&target);
                Ok(())
            }))
        }
        Device::Cuda(ordinal) => {
            let gpu = CudaDevice::get(ordinal)?;
            let fail = move |e: CudaError| e.at("copy", device, vec![vec![n]], location);
            let source = CudaBuffer::from_host(&gpu, &source).map_err(fail)?;
            let mut target = CudaBuffer::alloc(&gpu, n).map_err(fail)?;
            Ok(Box::new(move || target.copy_from(&source).map_err(fail)))
        }
    }
}

/// Multiplies ready row-major `[batch, m, k] @ [batch, k, n]` buffers with the vendor SGEMM each
/// call (cuBLAS on a GPU, the `gemm` crate on the CPU, as eager matmul calls them): `2 batch m n k` flops.
#[track_caller]
pub fn gemm(device: Device, batch: usize, m: usize, n: usize, k: usize) -> Result<Work> {
    crate::wires::trip(crate::wires::Wire::Baseline);
    let location = SourceLocation::caller();
    let a = Tensor::randn(&[batch * m * k], 2).to_vec()?;
    let b = Tensor::randn(&[batch * k * n], 3).to_vec()?;
    match device {
        Device::Cpu => {
            let mut c = vec![0.0f32; batch * m * n];
            let (a_layout, b_layout) = (Layout::contiguous(&[batch, m, k]), Layout::contiguous(&[batch, k, n]));
            Ok(Box::new(move || {
                let a = cpu::Input::Tensor { buffer: &a[..], layout: &a_layout };
                let b = cpu::Input::Tensor { buffer: &b[..], layout: &b_layout };
                cpu::matmul_into(a, b, &[batch, m, n], &mut c, cpu::Epilogue::NONE);
                std::hint::black_box(&c);
                Ok(())
            }))
        }
        Device::Cuda(ordinal) => {
            let gpu: Arc<CudaDevice> = CudaDevice::get(ordinal)?;
            let shapes = vec![vec![batch, m, k], vec![batch, k, n]];
            let fail = move |e: CudaError| e.at("gemm", device, shapes.clone(), location);
            let int = |v: usize| {
                i32::try_from(v).map_err(|_| Error::InvalidArgument {
                    op: "gemm",
                    message: format!("{v} exceeds cuBLAS's 32-bit sizes"),
                    location,
                })
            };
            let dims = (int(m)?, int(n)?, int(k)?, int(batch)?);
            let a = CudaBuffer::from_host(&gpu, &a).map_err(&fail)?;
            let b = CudaBuffer::from_host(&gpu, &b).map_err(&fail)?;
            let c = CudaBuffer::alloc(&gpu, batch * m * n).map_err(&fail)?;
            Ok(Box::new(move || {
                let (a_op, b_op) = (Operand::dense(a.ptr(), m, k), Operand::dense(b.ptr(), k, n));
                sgemm(&gpu, &a_op, &b_op, c.ptr(), dims).map_err(&fail)
            }))
        }
    }
}
