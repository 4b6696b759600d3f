//! Tensor memory on a device, the analogue of `torch.Storage`.

use crate::device::Device;
use crate::dtype::DType;
use crate::layout::Layout;

/// A flat buffer of elements that one or more tensor views read through their layouts.
pub(crate) enum Storage {
    /// Host memory.
    Cpu(Vec<f32>),
}

impl Storage {
    /// Where the buffer lives.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
        }
    }

    /// Element type of the buffer.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(_) => DType::F32,
        }
    }

    /// The elements a layout addresses, in row-major order, copied to the host.
    pub fn gather(&self, layout: &Layout) -> Vec<f32> {
        match self {
            Storage::Cpu(data) => {
                if layout.is_contiguous() {
                    data[layout.offset()..layout.offset() + layout.numel()].to_vec()
                } else {
                    layout.offsets().map(|i| data[i]).collect()
                }
            }
        }
    }
}
