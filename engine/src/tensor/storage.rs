//! Tensor memory on a device, the analogue of `torch.Storage`.

use crate::device::Device;
use crate::device::cpu::HostBuffer;
use crate::device::cuda::{self, CudaBuffer, CudaError};
use crate::device::provider::DeviceKernels;
use crate::dtype::DType;
use crate::layout::Layout;

/// A flat buffer of elements that one or more tensor views read through their layouts.
pub(crate) enum Storage {
    /// Host memory (from the CPU allocator's cache, and back to it when dropped).
    Cpu(HostBuffer),
    /// Memory on a CUDA device.
    Cuda(CudaBuffer),
}

impl Storage {
    /// Where the buffer lives.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            Storage::Cuda(buffer) => Device::Cuda(buffer.device().ordinal()),
        }
    }

    /// Element type of the buffer.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(_) | Storage::Cuda(_) => DType::F32,
        }
    }

    /// The elements a layout addresses, in row-major order, copied to the host (after every
    /// queued GPU operation has finished).
    pub fn gather(&self, layout: &Layout) -> Result<Vec<f32>, CudaError> {
        match self {
            Storage::Cpu(data) => {
                // Values are read once the device's queued work is done, as on a GPU.
                crate::device::cpu::queue::wait();
                Ok(if layout.is_contiguous() {
                    data[layout.offset()..layout.offset() + layout.numel()].to_vec()
                } else {
                    layout.offsets().map(|i| data[i]).collect()
                })
            }
            Storage::Cuda(buffer) if layout.is_contiguous() => buffer.read(layout.offset(), layout.numel()),
            Storage::Cuda(buffer) => {
                let view = cuda::Input::Tensor { buffer, layout };
                let dense = buffer.device().copy(view, layout.shape())?;
                dense.read(0, dense.len())
            }
        }
    }
}
