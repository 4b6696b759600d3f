//! The GPU backend, the analogue of ATen's CUDA kernels and `c10::cuda`: tensor memory on an
//! NVIDIA GPU, eager kernels written in CUDA C and compiled by NVRTC for the device's exact
//! architecture, and matrix products through cuBLAS.
//!
//! Everything is reached through cudarc with the CUDA libraries loaded at run time, so the engine
//! builds and runs on machines without CUDA: [`probe()`] says once per process what is there, and
//! [`CudaDevice::get`] refuses with the reason instead of panicking.
//!
//! | piece | module |
//! | --- | --- |
//! | is CUDA here? versions, device facts | [`mod@probe`] |
//! | a device: context, stream, cuBLAS, loaded modules | [`CudaDevice`] |
//! | CUDA C to a cached CUBIN | [`nvrtc`] |
//! | tensor memory and host transfers | `buffer` |
//! | freed buffers kept for reuse (the caching allocator) | `pool` |
//! | the eager kernels' source, per family (generated prelude + `kernels/eager.cu`) | `source` |
//! | kernel launchers: the plain kernels (`Plain`), in every dtype | `pointwise`, `reduce`, `normalize`, `cat`, `matmul` (cuBLAS; FP8 through `tuned::cublaslt`) |
//! | the fast paths ([`tuned`]): flash attention, and compiled code's GEMMs (cuBLASLt with epilogues, the engine's few-row and tensor-core kernels) | `tuned::*` |
//! | the cuBLASLt handle | `lt_handle` |
//! | recording queued work as a CUDA graph and replaying it | `graph` |
//!
//! Generated code (Inductor) reuses the same plumbing: [`CudaDevice::load`] compiles and loads a
//! CUDA C source once per process (and once per machine, through the disk cache), and
//! [`Module::function`] hands out a kernel to launch with cudarc's launch builder on
//! [`CudaDevice::stream`], passing raw device pointers as `u64`.

mod buffer;
mod cat;
mod context;
mod error;
mod graph;
mod lt_handle;
pub(crate) mod matmul;
mod normalize;
pub mod nvrtc;
mod params;
mod pointwise;
mod pool;
pub mod probe;
mod reduce;
pub(crate) mod source;
pub mod tuned;

use crate::device::Device;

pub(crate) use buffer::CudaBuffer;
pub use context::{CudaDevice, Module};
pub use error::CudaError;
pub(crate) use graph::Recording;
pub use probe::{DeviceFacts, Probe, available, probe, unavailable_reason};
pub use source::{DTYPES, eager_families, eager_source};

use tuned::Tuned;

use std::sync::Arc;

use super::provider::{self, DeviceKernels, KernelProvider, composed_attention, composed_attention_backward, kernels};
use crate::dtype::DType;
use crate::op::{AttentionParams, BinaryOp, CustomOp, Op, ReduceOp, UnaryOp};
use pointwise::Kernels;

/// One operand as a CUDA kernel launcher sees it: a device buffer and a layout, or a scalar
/// passed to the kernel by value.
pub(crate) type Input<'a> = super::provider::Input<'a, CudaBuffer>;

/// Runs one non-view op on `device` with the provider this thread runs on
/// ([`with_kernels`](crate::device::with_kernels)): the one place that names the providers. The
/// result has dtype `dtype`.
pub(crate) fn execute(
    device: &Arc<CudaDevice>,
    op: &Op,
    inputs: &[Input],
    out_shape: &[usize],
    dtype: DType,
) -> Result<CudaBuffer, CudaError> {
    match kernels() {
        provider::Kernels::Tuned => provider::execute(&Tuned(device), op, inputs, out_shape, dtype),
        provider::Kernels::Plain => provider::execute(&Plain(device), op, inputs, out_shape, dtype),
    }
}

/// A GPU: its memory, and the kernels both of its providers share.
impl DeviceKernels for Arc<CudaDevice> {
    type Buffer = CudaBuffer;
    type Output = CudaBuffer;
    type Error = CudaError;

    fn copy(&self, x: Input, out_shape: &[usize], dtype: DType) -> Result<CudaBuffer, CudaError> {
        pointwise::run(self, Kernels::Eager("copy"), &[x], out_shape, dtype)
    }

    fn cat(&self, inputs: &[Input], dim: usize, out_shape: &[usize]) -> Result<CudaBuffer, CudaError> {
        cat::cat(self, inputs, dim, out_shape)
    }

    fn custom(
        &self,
        op: &CustomOp,
        inputs: &[Input],
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<CudaBuffer, CudaError> {
        pointwise::run(self, Kernels::Custom(op), inputs, out_shape, dtype)
    }

    /// cuBLAS has no FP8 products: both providers take cuBLASLt's.
    fn scaled_mm(&self, inputs: [Input; 4], out_shape: &[usize], dtype: DType) -> Result<CudaBuffer, CudaError> {
        // Every route to the FP8 product (eager, a compiled graph, a graph built by hand) ends here.
        crate::wires::trip(crate::wires::Wire::ScaledMm);
        tuned::cublaslt::scaled_mm(self, inputs, out_shape, dtype)
    }

    fn upload(&self, values: &[f32]) -> Result<CudaBuffer, CudaError> {
        CudaBuffer::from_host(self, values)
    }

    fn as_input(output: &CudaBuffer) -> &CudaBuffer {
        output
    }

    fn dtype(buffer: &CudaBuffer) -> DType {
        buffer.dtype()
    }
}

/// A GPU's plain kernels: the eager CUDA C kernels (one launch per op, reading any strided
/// layout), cuBLAS for products, attention composed of two products and a softmax.
pub(crate) struct Plain<'a>(pub(crate) &'a Arc<CudaDevice>);

impl KernelProvider for Plain<'_> {
    type Device = Arc<CudaDevice>;

    fn device(&self) -> &Arc<CudaDevice> {
        self.0
    }

    fn unary(&self, op: UnaryOp, x: Input, out_shape: &[usize]) -> Result<CudaBuffer, CudaError> {
        let dtype = x.tensor().0.dtype();
        pointwise::run(self.0, Kernels::Eager(&format!("unary_{}", op.name())), &[x], out_shape, dtype)
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: Input,
        b: Input,
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<CudaBuffer, CudaError> {
        pointwise::run(self.0, Kernels::Eager(&format!("binary_{}", op.name())), &[a, b], out_shape, dtype)
    }

    fn where_(&self, inputs: [Input; 3], out_shape: &[usize], dtype: DType) -> Result<CudaBuffer, CudaError> {
        pointwise::run(self.0, Kernels::Eager("where"), &inputs, out_shape, dtype)
    }

    fn reduce(&self, kind: ReduceOp, x: Input, dim: usize) -> Result<CudaBuffer, CudaError> {
        reduce::reduce(self.0, kind, x, dim)
    }

    fn softmax(&self, x: Input, dim: usize, log: bool) -> Result<CudaBuffer, CudaError> {
        normalize::softmax(self.0, x, dim, log)
    }

    fn layer_norm(&self, [x, weight, bias]: [Input; 3], eps: f32) -> Result<CudaBuffer, CudaError> {
        normalize::layer_norm(self.0, x, weight, bias, eps)
    }

    fn matmul(&self, a: Input, b: Input, out_shape: &[usize]) -> Result<CudaBuffer, CudaError> {
        matmul::matmul(self.0, a, b, out_shape)
    }

    fn attention(&self, inputs: &[Input], params: AttentionParams) -> Result<CudaBuffer, CudaError> {
        composed_attention(self, inputs, params)
    }

    fn attention_backward(&self, inputs: &[Input], params: AttentionParams) -> Result<CudaBuffer, CudaError> {
        composed_attention_backward(self, inputs, params)
    }
}

/// A launch of `blocks` blocks (capped at the grid limit; kernels loop over the rest) of
/// `block.0 x block.1` threads.
fn launch_config(blocks: usize, block: (u32, u32)) -> cudarc::driver::LaunchConfig {
    cudarc::driver::LaunchConfig {
        grid_dim: (blocks.clamp(1, i32::MAX as usize) as u32, 1, 1),
        block_dim: (block.0, block.1, 1),
        shared_mem_bytes: 0,
    }
}

/// The methods of [`Device`] that need CUDA's runtime (the type itself is a leaf, below errors).
impl Device {
    /// `cuda:0` when CUDA can run here, else `cpu`, saying once per process, as a warning
    /// ([`crate::logs::warn`]), what is missing: `torch.device("cuda" if torch.cuda.is_available() else "cpu")`.
    pub fn cuda_if_available() -> Device {
        match unavailable_reason() {
            None => Device::Cuda(0),
            Some(reason) => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| crate::logs::warn(|| format!("CUDA is not available ({reason}); running on CPU")));
                Device::Cpu
            }
        }
    }

    /// Waits until every operation queued on the device has finished. GPU kernels run
    /// asynchronously: time them with [`crate::bench`], or synchronise before reading a host
    /// clock. CPU kernels finish before they return; on the CPU this waits only for the busy time
    /// [`crate::bench::spin`] queued.
    #[track_caller]
    pub fn synchronize(self) -> crate::Result<()> {
        let location = crate::SourceLocation::caller();
        match self {
            Device::Cpu => {
                crate::device::cpu::queue::wait();
                Ok(())
            }
            Device::Cuda(ordinal) => {
                CudaDevice::get(ordinal)?.synchronize().map_err(|e| e.at("synchronize", self, Vec::new(), location))
            }
        }
    }
}
