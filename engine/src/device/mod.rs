//! Where tensors live, the analogue of `torch.device`.

use std::fmt;

/// A device that holds tensor memory and runs kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// Host memory; kernels run on the CPU.
    #[default]
    Cpu,
    /// An NVIDIA GPU, by ordinal, driven through CUDA.
    Cuda(usize),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl Device {
    /// `cuda:0` when CUDA can run here, else `cpu`, saying once per process, on stderr and in one
    /// line, what is missing: `torch.device("cuda" if torch.cuda.is_available() else "cpu")`.
    pub fn cuda_if_available() -> Device {
        match cuda::unavailable_reason() {
            None => Device::Cuda(0),
            Some(reason) => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| eprintln!("[engine] CUDA is not available ({reason}); running on CPU"));
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
            Device::Cuda(ordinal) => cuda::CudaDevice::get(ordinal)?
                .synchronize()
                .map_err(|e| e.at("synchronize", self, Vec::new(), location)),
        }
    }
}

pub(crate) mod cpu;
pub mod cuda;
