//! Tensor metadata without data, what a `FakeTensor` carries in PyTorch.

use std::fmt;

use crate::device::Device;
use crate::dtype::DType;

/// Shape, dtype and device: everything about a tensor except its values.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct TensorMeta {
    /// Sizes of each dimension.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Where the tensor lives.
    pub device: Device,
}

impl fmt::Display for TensorMeta {
    /// `f32[8, 16]`, with the device appended when it is not the CPU: `f32[8, 16] cuda:0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, size) in self.shape.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{size}")?;
        }
        write!(f, "]")?;
        if self.device != Device::Cpu {
            write!(f, " {}", self.device)?;
        }
        Ok(())
    }
}
