//! Loss functions, `torch.nn.functional.mse_loss` and `cross_entropy`, as composites of the op
//! methods (PyTorch's `cross_entropy` is `log_softmax` then `nll_loss`): autograd differentiates
//! them through their pieces, and graphs show those pieces.

use crate::error::{Error, Result, SourceLocation};
use crate::tensor::Tensor;

impl Tensor {
    /// The mean of `(self - target)^2` over every element, as `F.mse_loss(self, target)`: a 0-d
    /// tensor. `target` broadcasts against `self`.
    #[track_caller]
    pub fn mse_loss(&self, target: &Tensor) -> Result<Tensor> {
        let diff = self.sub(target)?;
        let squared = diff.mul(&diff)?;
        let flat = squared.reshape(&[squared.numel()])?;
        flat.mean(0, false)
    }

    /// Cross-entropy of the logits `self` (`[batch, classes]`) against `target`, averaged over the
    /// batch, as `F.cross_entropy(self, target)`: a 0-d tensor. `target` is either the classes'
    /// indices, `[batch]` (whole numbers stored as `f32`: the engine's only dtype), or
    /// probabilities of the logits' shape (soft labels).
    #[track_caller]
    pub fn cross_entropy(&self, target: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if self.rank() != 2 {
            return Err(Error::InvalidArgument {
                op: "cross_entropy",
                message: format!("expects logits of shape [batch, classes], got {:?}", self.shape()),
                location,
            });
        }
        let (batch, classes) = (self.shape()[0], self.shape()[1]);
        let probabilities = if target.shape() == self.shape() {
            target.clone()
        } else if target.shape() == [batch] {
            // One-hot rows: class c is where c equals the index (a [classes] row of 0..classes
            // made on the host, moved where the target is).
            let indices = Tensor::arange(classes).to(target.device())?;
            target.unsqueeze(1)?.eq(&indices.unsqueeze(0)?)?
        } else {
            return Err(Error::InvalidArgument {
                op: "cross_entropy",
                message: format!(
                    "the target must be class indices of shape [{batch}] or probabilities of shape {:?}, got {:?}",
                    self.shape(),
                    target.shape()
                ),
                location,
            });
        };
        let per_row = probabilities.mul(&self.log_softmax(-1)?)?.sum(1, false)?;
        per_row.mean(0, false)?.neg()
    }
}
