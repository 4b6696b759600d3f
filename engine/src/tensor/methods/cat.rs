//! Joining tensors: `torch.cat`. Not a view: the result is a fresh buffer holding each operand's
//! elements in turn along the joined dimension.

use super::normalize_dim;
use crate::error::{Error, Result, SourceLocation};
use crate::op::Op;
use crate::tensor::{Operand, Tensor};

impl Tensor {
    /// `tensors` joined end to end along `dim` (negative counts from the end), as `torch.cat`:
    /// every tensor has the same rank and the same sizes except along `dim`.
    #[track_caller]
    pub fn cat(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let Some(first) = tensors.first() else {
            return Err(Error::InvalidArgument {
                op: "cat",
                message: "expected a non-empty list of tensors".into(),
                location,
            });
        };
        let dim = normalize_dim("cat", dim, first.rank(), location)?;
        let operands: Vec<Operand> = tensors.iter().map(|t| Operand::Tensor(t)).collect();
        Op::Cat { dim }.apply(&operands, location)
    }
}
