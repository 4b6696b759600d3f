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
//! | the eager kernels' source, per family (generated prelude + `kernels/eager.cu`) | `source` |
//! | kernel launchers | `pointwise`, `reduce`, `normalize`, `matmul` |
//!
//! Generated code (Inductor) reuses the same plumbing: [`CudaDevice::load`] compiles and loads a
//! CUDA C source once per process (and once per machine, through the disk cache), and
//! [`Module::function`] hands out a kernel to launch with cudarc's launch builder on
//! [`CudaDevice::stream`], passing raw device pointers as `u64`.

mod buffer;
mod context;
mod error;
pub(crate) mod matmul;
mod normalize;
pub mod nvrtc;
mod params;
mod pointwise;
pub mod probe;
mod reduce;
mod source;

use crate::device::Device;

pub(crate) use buffer::CudaBuffer;
pub use context::{CudaDevice, Module};
pub use error::CudaError;
pub use probe::{DeviceFacts, Probe, available, probe, unavailable_reason};
pub use source::{eager_families, eager_source};

use std::sync::Arc;

use crate::layout::Layout;
use crate::op::Op;
use pointwise::Kernels;

/// One operand as a CUDA kernel launcher sees it.
#[derive(Clone, Copy)]
pub(crate) enum Input<'a> {
    /// A tensor: its device buffer and the layout of the view being read.
    Tensor { buffer: &'a CudaBuffer, layout: &'a Layout },
    /// A scalar broadcast everywhere, passed to the kernel by value.
    Scalar(f32),
}

impl<'a> Input<'a> {
    fn tensor(&self) -> (&'a CudaBuffer, &'a Layout) {
        match *self {
            Input::Tensor { buffer, layout } => (buffer, layout),
            Input::Scalar(_) => unreachable!("shape inference rejects scalars where tensors are required"),
        }
    }
}

/// Runs one non-view, non-composite op on `device`; shapes were checked by [`Op::infer_shape`].
pub(crate) fn execute(
    device: &Arc<CudaDevice>,
    op: &Op,
    inputs: &[Input],
    out_shape: &[usize],
) -> Result<CudaBuffer, CudaError> {
    match op {
        Op::Unary(u) => pointwise::run(device, Kernels::Eager(&format!("unary_{}", u.name())), inputs, out_shape),
        Op::Binary(b) => pointwise::run(device, Kernels::Eager(&format!("binary_{}", b.name())), inputs, out_shape),
        Op::Where => pointwise::run(device, Kernels::Eager("where"), inputs, out_shape),
        Op::Contiguous => pointwise::run(device, Kernels::Eager("copy"), inputs, out_shape),
        Op::Custom(custom) => pointwise::run(device, Kernels::Custom(custom), inputs, out_shape),
        Op::Reduce { kind, dim, .. } => reduce::reduce(device, *kind, inputs[0], *dim),
        Op::Softmax { dim } => normalize::softmax(device, inputs[0], *dim, false),
        Op::LogSoftmax { dim } => normalize::softmax(device, inputs[0], *dim, true),
        Op::LayerNorm { eps } => normalize::layer_norm(device, inputs[0], inputs[1], inputs[2], eps.0),
        Op::Matmul => matmul::matmul(device, inputs[0], inputs[1], out_shape),
        Op::Reshape { .. }
        | Op::Permute { .. }
        | Op::Expand { .. }
        | Op::Slice { .. }
        | Op::Linear
        | Op::Cond { .. } => {
            unreachable!("views, linear and cond are handled before device kernels")
        }
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

    /// Waits until every operation queued on the device has finished (nothing to wait for on the
    /// CPU, whose kernels finish before they return). GPU kernels run asynchronously: time them
    /// with [`crate::bench`], or synchronise before reading a host clock.
    #[track_caller]
    pub fn synchronize(self) -> crate::Result<()> {
        let location = crate::SourceLocation::caller();
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(ordinal) => {
                CudaDevice::get(ordinal)?.synchronize().map_err(|e| e.at("synchronize", self, Vec::new(), location))
            }
        }
    }
}
