//! Element types, the analogue of `torch.dtype`.
//!
//! The engine computes in `f32`; the enum exists so that graphs, guards and generated code already
//! carry the dtype, as PyTorch's do, and half-precision types can join without changing them.

use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DType {
    /// 32-bit IEEE float, `torch.float32`.
    #[default]
    F32,
}

impl DType {
    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
        }
    }

    /// The name used in graph listings and generated code comments (`f32`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
