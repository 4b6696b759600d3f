//! Tensor memory on a device, the analogue of `torch.Storage`.

use crate::device::Device;
use crate::device::cpu::{self, HostBuffer};
use crate::device::cuda::{self, CudaBuffer, CudaError};
use crate::device::provider::DeviceKernels;
use crate::dtype::DType;
use crate::layout::Layout;
use crate::op::Op;

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
            Storage::Cpu(buffer) => buffer.dtype(),
            Storage::Cuda(buffer) => buffer.dtype(),
        }
    }

    /// The elements a layout addresses, in row-major order, widened to `f32` and copied to the
    /// host (after every queued GPU operation has finished).
    pub fn gather(&self, layout: &Layout) -> Result<Vec<f32>, CudaError> {
        match self {
            Storage::Cpu(buffer) => {
                // Values are read once the device's queued work is done, as on a GPU.
                crate::device::cpu::queue::wait();
                let elements = buffer.elements();
                Ok(if layout.is_contiguous() {
                    (layout.offset()..layout.offset() + layout.numel()).map(|i| elements.get(i)).collect()
                } else {
                    layout.offsets().map(|i| elements.get(i)).collect()
                })
            }
            Storage::Cuda(buffer) => {
                let dense = self.dense_bytes(layout)?;
                Ok(crate::device::cpu::widen_bytes(&dense, buffer.dtype()))
            }
        }
    }

    /// The elements a layout addresses, in row-major order, as the bytes of their own dtype on
    /// the host: what moving a tensor to another device copies.
    pub fn dense_bytes(&self, layout: &Layout) -> Result<Vec<u8>, CudaError> {
        let size = self.dtype().size_in_bytes();
        match self {
            Storage::Cpu(buffer) if layout.is_contiguous() => {
                Ok(buffer.bytes()[layout.offset() * size..(layout.offset() + layout.numel()) * size].to_vec())
            }
            Storage::Cpu(buffer) => {
                let dense = cpu::execute(
                    &Op::Contiguous,
                    &[cpu::Input::Tensor { buffer, layout }],
                    layout.shape(),
                    buffer.dtype(),
                );
                Ok(dense.bytes().to_vec())
            }
            Storage::Cuda(buffer) if layout.is_contiguous() => buffer.read_bytes(layout.offset(), layout.numel()),
            Storage::Cuda(buffer) => {
                let view = cuda::Input::Tensor { buffer, layout };
                let dense = buffer.device().copy(view, layout.shape(), buffer.dtype())?;
                dense.read_bytes(0, dense.len())
            }
        }
    }
}
