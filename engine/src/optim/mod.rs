//! Optimizers, the analogue of `torch.optim`: [`Sgd`] (with momentum) and [`AdamW`] (Adam with
//! decoupled weight decay) update a list of parameters from their `.grad`.
//!
//! Each update rule is written once as a pure function over lists of tensors (the "foreach" form
//! of PyTorch's `_multi_tensor_sgd` and `_multi_tensor_adamw`): the new parameters and state from
//! the old ones and the gradients. [`Optimizer::step`] runs it eagerly, under `no_grad`, and
//! writes each new parameter into the parameter's memory (`copy_`), so that every handle of it
//! (the model's, a compiled function's) sees the update.
//!
//! ```
//! use engine::optim::{Optimizer, Sgd};
//! use engine::Tensor;
//! let w = Tensor::from_vec(vec![1.0, 2.0], &[2])?.requires_grad_(true);
//! let mut sgd = Sgd::new(&[w.clone()], 0.5);
//! w.mul(&w)?.sum_all()?.backward()?; // the gradient is 2w
//! sgd.step()?;
//! assert_eq!(w.to_vec()?, vec![0.0, 0.0]); // w - 0.5 * 2w
//! # Ok::<(), engine::Error>(())
//! ```

mod adamw;
mod sgd;

pub use adamw::{AdamW, Moments, adamw_update};
pub use sgd::{Sgd, sgd_update};

use crate::error::Result;
use crate::tensor::{Tensor, autograd};

/// What every optimizer does (`torch.optim.Optimizer`).
pub trait Optimizer {
    /// The parameters it updates.
    fn params(&self) -> &[Tensor];

    /// One update of every parameter that has a gradient (`optimizer.step()`).
    fn step(&mut self) -> Result<()>;

    /// Clears every parameter's gradient (`optimizer.zero_grad()`, which sets them to `None`).
    fn zero_grad(&self) {
        self.params().iter().for_each(Tensor::zero_grad);
    }
}

/// The parameters that have a gradient, with it: the ones a step updates.
fn with_grads(params: &[Tensor]) -> Vec<(usize, Tensor)> {
    params.iter().enumerate().filter_map(|(i, p)| p.grad().map(|g| (i, g))).collect()
}

/// Writes each new value into its parameter's memory, outside the tape.
fn write_back(params: &[Tensor], updated: &[(usize, Tensor)]) -> Result<()> {
    autograd::no_grad(|| updated.iter().try_for_each(|(i, new)| params[*i].copy_(new)))
}
