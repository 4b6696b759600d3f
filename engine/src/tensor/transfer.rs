//! Moving tensors between devices, `Tensor.to(device)` in PyTorch.

use std::sync::Arc;

use super::{Storage, Tensor, autograd};
use crate::device::Device;
use crate::device::cpu::HostBuffer;
use crate::device::cuda::{CudaBuffer, CudaDevice, CudaError};
use crate::error::{Error, Result, SourceLocation};
use crate::layout::Layout;

impl Tensor {
    /// The same values on `device`: the tensor itself when it is already there, else a dense copy
    /// (keeping the tensor's name, so a model's parameters read the same in graphs on any
    /// device). Moving to a GPU that this machine lacks fails with [`Error::DeviceUnavailable`],
    /// whose reason says what is missing.
    ///
    /// ```
    /// use engine::{Device, Tensor};
    /// let x = Tensor::arange(4);
    /// let device = Device::cuda_if_available();
    /// assert_eq!(x.to(device)?.to(Device::Cpu)?.to_vec()?, vec![0.0, 1.0, 2.0, 3.0]);
    /// # Ok::<(), engine::Error>(())
    /// ```
    #[track_caller]
    pub fn to(&self, device: Device) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if self.device() == device {
            return Ok(self.clone());
        }
        if self.is_symbolic() {
            return Err(Error::GraphBreak {
                reason: format!(
                    "Tensor::to({device}) has no graph form: move tensors before calling the compiled function"
                ),
                location,
            });
        }
        let c = self.concrete().expect("checked: not symbolic");
        let failed = |e: CudaError| e.at("to", self.device(), vec![self.shape().to_vec()], location);
        let bytes = c.storage.dense_bytes(&c.layout).map_err(failed)?;
        let dtype = self.dtype();
        let storage = match device {
            Device::Cpu => Storage::Cpu(HostBuffer::from_bytes(dtype, &bytes)),
            Device::Cuda(ordinal) => {
                let gpu = CudaDevice::get(ordinal)?;
                let buffer = CudaBuffer::from_bytes(&gpu, dtype, &bytes)
                    .map_err(|e| e.at("to", device, vec![self.shape().to_vec()], location))?;
                Storage::Cuda(buffer)
            }
        };
        let moved = Tensor::from_concrete(Arc::new(storage), Layout::contiguous(self.shape()));
        let moved = match self.name() {
            Some(name) => moved.with_name(name),
            None => moved,
        };
        // Differentiable, as PyTorch's `to`: the gradient goes back to where the tensor came from.
        let source = self.device();
        Ok(autograd::attach(CopyBackward { to: source }, std::slice::from_ref(self), vec![moved], &[true]).remove(0))
    }
}

/// The backward of a move between devices (PyTorch's `ToCopyBackward`): the gradient moved back.
struct CopyBackward {
    to: Device,
}

impl autograd::Function for CopyBackward {
    fn name(&self) -> String {
        "ToCopyBackward".into()
    }

    fn backward(&self, grad_outputs: Vec<Tensor>) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(grad_outputs[0].to(self.to)?)])
    }
}
