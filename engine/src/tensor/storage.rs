//! Tensor memory on a device, the analogue of `torch.Storage`, and the write epoch that tells
//! whether any tensor's memory was written since a moment (see [`write_epoch`]).

use std::sync::atomic::{AtomicU64, Ordering};

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

/// The process-wide write epoch, the engine's coarse stand-in for PyTorch's per-tensor version
/// counter (`tensor._version`, bumped by every in-place op, which autograd checks for the tensors
/// it saved): it grows by one after every write into memory that already belongs to a tensor,
/// anywhere in the process. A compiled program keeps a step's result across calls while its
/// inputs are the same storages and the epoch has not moved since the step last ran
/// (`inductor::runtime::kept`): any write anywhere invalidates every kept result, so a training
/// loop recomputes them after each optimizer step and inference never does.
///
/// Every path that writes into an existing tensor's memory bumps it once the write is issued
/// (reading the epoch before computing and bumping after writing keeps a write that overlaps a
/// fill from being missed; on a GPU the work is ordered by the one stream):
///
/// - `Tensor::copy_` run eagerly ([`super::inplace::write`]: `HostBuffer::write_shared` on the
///   CPU, `CudaBuffer::write_from` on a GPU). Eager optimizers (SGD, AdamW: `optim::write_back`),
///   the `eager` and `aot_eager` backends and eager fallbacks all write parameters this way.
/// - A compiled program that stores into its graph inputs (`LoweredGraph::written_inputs`: a
///   compiled optimizer step or training step), in the host and the CUDA runtime alike
///   (`inductor::runtime`), once per call, errors included.
/// - A CUDA graph replay (`inductor::modes::cudagraphs`), which writes the inputs the plan updates
///   in place and the output storages it hands out again (their tensors' memory).
///
/// Not writers: autograd's gradient accumulation (`AccumulateGrad` adds out of place and stores
/// a new tensor in `.grad`), a CUDA graph's copies into its own static input buffers (no tensor's
/// memory), and every kernel that writes a buffer it just allocated (a new storage).
static WRITE_EPOCH: AtomicU64 = AtomicU64::new(0);

/// The write epoch now ([`WRITE_EPOCH`]).
pub(crate) fn write_epoch() -> u64 {
    WRITE_EPOCH.load(Ordering::SeqCst)
}

/// Says that memory belonging to a tensor was just written ([`WRITE_EPOCH`]).
pub(crate) fn wrote() {
    WRITE_EPOCH.fetch_add(1, Ordering::SeqCst);
}

/// Bumps the write epoch when dropped: held by a compiled call that stores into its inputs, so
/// that the bump follows its writes however the call ends.
pub(crate) struct Writing;

impl Drop for Writing {
    fn drop(&mut self) {
        wrote();
    }
}
