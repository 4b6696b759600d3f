//! Reductions over one dimension (`sum`, `mean`, `amax`), with `keepdim` as in PyTorch.

use super::normalize_dim;
use crate::error::{Result, SourceLocation};
use crate::op::{Op, ReduceOp};
use crate::tensor::Tensor;

impl Tensor {
    #[track_caller]
    fn reduce(&self, kind: ReduceOp, dim: isize, keepdim: bool) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dim = normalize_dim(kind.name(), dim, self.rank(), location)?;
        self.apply(Op::Reduce { kind, dim, keepdim }, &[], location)
    }

    /// Sum over `dim` (negative counts from the end); `keepdim` keeps it with size 1.
    #[track_caller]
    pub fn sum(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, dim, keepdim)
    }

    /// Mean over `dim`.
    #[track_caller]
    pub fn mean(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, dim, keepdim)
    }

    /// Maximum over `dim` (`torch.amax`: values only, no indices).
    #[track_caller]
    pub fn amax(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, dim, keepdim)
    }

    /// Sum of every element, as a 0-d tensor (a reshape to one dimension, then a sum).
    #[track_caller]
    pub fn sum_all(&self) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let flat = self.apply(Op::Reshape { shape: vec![self.numel()] }, &[], location)?;
        flat.apply(Op::Reduce { kind: ReduceOp::Sum, dim: 0, keepdim: false }, &[], location)
    }
}
