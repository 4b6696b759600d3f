//! Views: new shapes and orders over the same elements. Eagerly they copy nothing (except a
//! reshape of a non-contiguous tensor); in generated code they become index arithmetic.

use super::normalize_dim;
use crate::error::{Error, Result, SourceLocation};
use crate::op::Op;
use crate::tensor::Tensor;

impl Tensor {
    /// The same elements with a new shape of equal element count. A view when the strides allow
    /// one (contiguous, or each group of merged dims contiguous within itself), a copy otherwise
    /// (PyTorch's `reshape`).
    #[track_caller]
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        self.apply(Op::Reshape { shape: shape.to_vec() }, &[], SourceLocation::caller())
    }

    /// Dimensions reordered: output dimension `i` is input dimension `dims[i]`.
    #[track_caller]
    pub fn permute(&self, dims: &[usize]) -> Result<Tensor> {
        self.apply(Op::Permute { dims: dims.to_vec() }, &[], SourceLocation::caller())
    }

    /// Two dimensions swapped (negative dims count from the end).
    #[track_caller]
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let a = normalize_dim("transpose", dim0, self.rank(), location)?;
        let b = normalize_dim("transpose", dim1, self.rank(), location)?;
        let mut dims: Vec<usize> = (0..self.rank()).collect();
        dims.swap(a, b);
        self.apply(Op::Permute { dims }, &[], location)
    }

    /// The transpose of a 2-d tensor.
    #[track_caller]
    pub fn t(&self) -> Result<Tensor> {
        let location = SourceLocation::caller();
        if self.rank() != 2 {
            return Err(Error::InvalidArgument {
                op: "t",
                message: format!("needs a 2-d tensor, got shape {:?}; use transpose(d0, d1)", self.shape()),
                location,
            });
        }
        self.apply(Op::Permute { dims: vec![1, 0] }, &[], location)
    }

    /// Broadcast to `shape` without copying (size-1 and missing leading dims repeat).
    #[track_caller]
    pub fn expand(&self, shape: &[usize]) -> Result<Tensor> {
        self.apply(Op::Expand { shape: shape.to_vec() }, &[], SourceLocation::caller())
    }

    /// Elements `start..end` along `dim`, every `step`-th.
    #[track_caller]
    pub fn slice(&self, dim: isize, start: usize, end: usize, step: usize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dim = normalize_dim("slice", dim, self.rank(), location)?;
        self.apply(Op::Slice { dim, start, end, step }, &[], location)
    }

    /// A new dimension of size 1 at `dim` (which may equal the rank, to append).
    #[track_caller]
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dim = normalize_dim("unsqueeze", dim, self.rank() + 1, location)?;
        let mut shape = self.shape().to_vec();
        shape.insert(dim, 1);
        self.apply(Op::Reshape { shape }, &[], location)
    }

    /// Removes dimension `dim`, which must have size 1.
    #[track_caller]
    pub fn squeeze(&self, dim: isize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dim = normalize_dim("squeeze", dim, self.rank(), location)?;
        if self.shape()[dim] != 1 {
            return Err(Error::InvalidArgument {
                op: "squeeze",
                message: format!("dim {dim} has size {}, not 1 (shape {:?})", self.shape()[dim], self.shape()),
                location,
            });
        }
        let mut shape = self.shape().to_vec();
        shape.remove(dim);
        self.apply(Op::Reshape { shape }, &[], location)
    }

    /// A dense row-major copy, or the tensor itself when it already is one.
    #[track_caller]
    pub fn contiguous(&self) -> Result<Tensor> {
        self.apply(Op::Contiguous, &[], SourceLocation::caller())
    }
}
