//! Writing into a tensor's memory, `tensor.copy_(src)` in PyTorch: the one in-place op, which
//! optimizers use to update parameters and their state so that every handle of a parameter (a
//! model's field, the copy a compiled function captured) sees the new values.

use super::{Storage, Tensor};
use crate::error::{Error, Result, SourceLocation};
use crate::op::Op;
use crate::tensor::Operand;
use crate::tensor::autograd;

impl Tensor {
    /// Copies `src`'s values (same shape, same device) into this tensor's memory, which must be
    /// dense: every tensor sharing that memory sees them. As in PyTorch, a tensor that requires
    /// grad may only be written under [`autograd::no_grad`] (an optimizer step), and the write
    /// must not race with a computation reading the tensor on another thread.
    ///
    /// Inside a compiled function this is the graph node `copy_(target, src)` (the op
    /// [`Op::CopyInto`]), allowed on a tensor from outside the function (an argument, or a tensor
    /// it captured such as a parameter or an optimizer's state): later reads of the tensor in the
    /// same call see the new values, and the compiled graph writes them into the tensor's memory
    /// when it runs, as Inductor keeps a mutated input's `copy_` and stores into its buffer.
    #[track_caller]
    pub fn copy_(&self, src: &Tensor) -> Result<()> {
        let location = SourceLocation::caller();
        if self.requires_grad() && autograd::is_grad_enabled() {
            return Err(Error::Autograd {
                message: "a leaf that requires grad is being written in place; write it under no_grad (as an \
                          optimizer step does)"
                    .into(),
                location,
            });
        }
        Op::CopyInto.apply(&[Operand::Tensor(self), Operand::Tensor(src)], location).map(drop)
    }
}

/// The eager kernel of [`Op::CopyInto`]: writes `src` into `target`'s memory (the shapes and
/// devices were checked equal by the dispatcher) and returns a handle of `target`.
pub(crate) fn write(target: &Tensor, src: &Tensor, location: SourceLocation) -> Result<Tensor> {
    let invalid = |message: String| Error::InvalidArgument { op: "copy_", message, location };
    let concrete = target.concrete().expect("eager operands are concrete");
    if !concrete.layout.is_contiguous() {
        return Err(invalid(format!(
            "writes only dense tensors; this one has strides {:?}",
            concrete.layout.strides()
        )));
    }
    let offset = concrete.layout.offset();
    match &*concrete.storage {
        Storage::Cpu(buffer) => {
            // Rounded to the target's dtype as they are written.
            let values = src.values("copy_", location)?;
            // SAFETY: `values` is a copy owned here, so no slice of the buffer is alive on this
            // thread; the caller keeps other threads from reading it meanwhile (the documented
            // contract of in-place writes).
            unsafe { buffer.write_shared(offset, &values) };
        }
        Storage::Cuda(buffer) => {
            // A dense copy in the target's dtype (`copy_` converts, as PyTorch's does).
            let op = if src.dtype() == target.dtype() { Op::Contiguous } else { Op::ToDtype { dtype: target.dtype() } };
            let dense = autograd::no_grad(|| op.apply(&[Operand::Tensor(src)], location))?;
            let source = dense.concrete().expect("a concrete tensor's copy is concrete");
            let Storage::Cuda(from) = &*source.storage else { unreachable!("the devices were checked equal") };
            buffer
                .write_from(offset, from, source.layout.offset(), target.numel())
                .map_err(|e| e.at("copy_", target.device(), vec![target.shape().to_vec()], location))?;
        }
    }
    super::wrote();
    Ok(target.detach())
}
