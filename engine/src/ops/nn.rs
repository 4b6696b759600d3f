//! Matrix products and the neural-network composites (`linear`, `softmax`, `log_softmax`,
//! `layer_norm`): single ops eagerly, decomposed into primitives by AOT.

use super::normalize_dim;
use crate::error::{Result, SourceLocation};
use crate::op::Op;
use crate::scalar::Scalar;
use crate::tensor::{Operand, Tensor};

impl Tensor {
    /// Matrix product over the last two dims; leading (batch) dims broadcast. Both operands need
    /// rank 2 or more.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.apply(Op::Matmul, &[Operand::Tensor(other)], SourceLocation::caller())
    }

    /// `self @ weight.T + bias`, as `torch.nn.functional.linear`: `weight` is `[out, in]`.
    #[track_caller]
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let mut rest = vec![Operand::Tensor(weight)];
        rest.extend(bias.map(Operand::Tensor));
        self.apply(Op::Linear, &rest, SourceLocation::caller())
    }

    /// Softmax along `dim` (negative counts from the end).
    #[track_caller]
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dim = normalize_dim("softmax", dim, self.rank(), location)?;
        self.apply(Op::Softmax { dim }, &[], location)
    }

    /// Log of the softmax along `dim`, computed stably.
    #[track_caller]
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dim = normalize_dim("log_softmax", dim, self.rank(), location)?;
        self.apply(Op::LogSoftmax { dim }, &[], location)
    }

    /// Layer norm over the last dimension with `weight` and `bias` of that size.
    #[track_caller]
    pub fn layer_norm(&self, weight: &Tensor, bias: &Tensor, eps: f32) -> Result<Tensor> {
        let rest = [Operand::Tensor(weight), Operand::Tensor(bias)];
        self.apply(Op::LayerNorm { eps: Scalar(eps) }, &rest, SourceLocation::caller())
    }
}
