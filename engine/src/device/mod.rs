//! Where tensors live, the analogue of `torch.device`.
//!
//! [`Device`] is a leaf type at the bottom of the engine's layers (errors name it); the kernels
//! that run on each device (`cpu`, [`cuda`]) sit with the tensors, above the op catalogue,
//! and so do the methods that need a device's runtime ([`Device::synchronize`],
//! [`Device::cuda_if_available`], in [`cuda`]).
//!
//! Each device's eager kernels come in two providers behind one trait (`provider.rs`): the plain
//! kernels a reader follows and the tuned fast paths, which run unless [`with_kernels`] says
//! otherwise.

use std::fmt;

/// A device that holds tensor memory and runs kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
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

pub(crate) mod cpu;
pub mod cuda;
pub(crate) mod provider;

pub use provider::{Kernels, kernels, with_kernels};
