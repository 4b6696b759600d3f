//! Writing into a tensor's memory, `tensor.copy_(src)` in PyTorch: the one in-place op, which
//! optimizers use to update parameters so that every handle of a parameter (a model's field, the
//! copy a compiled function captured) sees the new values.

use super::{Storage, Tensor};
use crate::error::{Error, Result, SourceLocation};
use crate::op::Op;
use crate::tensor::Operand;
use crate::tensor::autograd;

impl Tensor {
    /// Copies `src`'s values (same shape, same device) into this tensor's memory, which must be
    /// dense: every tensor sharing that memory sees them. As in PyTorch, a tensor that requires
    /// grad may only be written under [`autograd::no_grad`] (an optimizer step), and the write
    /// must not race with a computation reading the tensor on another thread. In-place writes
    /// have no graph form: inside a compiled function, compute the new value and write it after.
    #[track_caller]
    pub fn copy_(&self, src: &Tensor) -> Result<()> {
        let location = SourceLocation::caller();
        let invalid = |message: String| Error::InvalidArgument { op: "copy_", message, location };
        if self.is_symbolic() || src.is_symbolic() {
            return Err(Error::GraphBreak {
                reason: "Tensor::copy_() writes memory in place, which graphs cannot hold: return the new value \
                         from the compiled function and copy it after"
                    .into(),
                location,
            });
        }
        if self.requires_grad() && autograd::is_grad_enabled() {
            return Err(Error::Autograd {
                message: "a leaf that requires grad is being written in place; write it under no_grad (as an \
                          optimizer step does)"
                    .into(),
                location,
            });
        }
        if self.shape() != src.shape() || self.device() != src.device() {
            return Err(invalid(format!(
                "copies a tensor of the same shape and device: this is {} {:?}, the source {} {:?}",
                self.device(),
                self.shape(),
                src.device(),
                src.shape()
            )));
        }
        let target = self.concrete().expect("checked concrete above");
        if !target.layout.is_contiguous() {
            return Err(invalid(format!(
                "writes only dense tensors; this one has strides {:?}",
                target.layout.strides()
            )));
        }
        let offset = target.layout.offset();
        match &*target.storage {
            Storage::Cpu(buffer) => {
                // Rounded to this tensor's dtype as they are written.
                let values = src.values("copy_", location)?;
                // SAFETY: `values` is a copy owned here, so no slice of the buffer is alive on
                // this thread; the caller keeps other threads from reading it meanwhile (the
                // documented contract of in-place writes).
                unsafe { buffer.write_shared(offset, &values) };
            }
            Storage::Cuda(buffer) => {
                // A dense copy in this tensor's dtype (`copy_` converts, as PyTorch's does).
                let op = if src.dtype() == self.dtype() { Op::Contiguous } else { Op::ToDtype { dtype: self.dtype() } };
                let dense = autograd::no_grad(|| op.apply(&[Operand::Tensor(src)], location))?;
                let source = dense.concrete().expect("a concrete tensor's copy is concrete");
                let Storage::Cuda(from) = &*source.storage else { unreachable!("the devices were checked equal") };
                buffer
                    .write_from(offset, from, source.layout.offset(), self.numel())
                    .map_err(|e| e.at("copy_", self.device(), vec![self.shape().to_vec()], location))?;
            }
        }
        Ok(())
    }
}
