//! Optimizers, the analogue of `torch.optim`: [`Sgd`] (with momentum) and [`AdamW`] (Adam with
//! decoupled weight decay) update a list of parameters from their `.grad`.
//!
//! Each update rule is written once as a pure function over lists of tensors (the "foreach" form
//! of PyTorch's `_multi_tensor_sgd` and `_multi_tensor_adamw`): the new parameters and state from
//! the old ones and the gradients. [`Optimizer::step`] runs it under `no_grad` and writes each new
//! value into the memory of its parameter or state tensor (`copy_`), so that every handle of a
//! parameter (the model's, a compiled function's) sees the update.
//!
//! The state lives in tensors made once, on a parameter's first step (zeros, and for AdamW a
//! step count), and updated in place after, as PyTorch's `capturable` optimizers keep theirs:
//! the same code then runs eagerly and inside a compiled function, where each `copy_` becomes a
//! write the graph performs, and Inductor prints the whole update as one foreach kernel over every
//! parameter. A whole training step compiles this way ([`dynamo::Compiled::compiled_autograd`]).
//!
//! ```
//! use engine::optim::{Optimizer, Sgd};
//! use engine::Tensor;
//! let w = Tensor::from_vec(vec![1.0, 2.0], &[2])?.requires_grad_(true);
//! let sgd = Sgd::new(&[w.clone()], 0.5);
//! w.mul(&w)?.sum_all()?.backward()?; // the gradient is 2w
//! sgd.step()?;
//! assert_eq!(w.to_vec()?, vec![0.0, 0.0]); // w - 0.5 * 2w
//! # Ok::<(), engine::Error>(())
//! ```
//!
//! [`dynamo::Compiled::compiled_autograd`]: crate::dynamo::Compiled::compiled_autograd

mod adamw;
mod sgd;

pub use adamw::{AdamW, AdamWState, adamw_update};
pub use sgd::{Sgd, sgd_update};

use crate::error::Result;
use crate::tensor::{Tensor, autograd};

/// What every optimizer does (`torch.optim.Optimizer`). Its state changes in place, so a step
/// takes `&self`: a compiled training step can call it.
pub trait Optimizer {
    /// The parameters it updates.
    fn params(&self) -> &[Tensor];

    /// One update of every parameter that has a gradient (`optimizer.step()`).
    fn step(&self) -> Result<()>;

    /// Clears every parameter's gradient (`optimizer.zero_grad()`, which sets them to `None`).
    fn zero_grad(&self) {
        self.params().iter().for_each(Tensor::zero_grad);
    }
}

/// The parameters that have a gradient, with it: the ones a step updates.
fn with_grads(params: &[Tensor]) -> Vec<(usize, Tensor)> {
    params.iter().enumerate().filter_map(|(i, p)| p.grad().map(|g| (i, g))).collect()
}

/// Zeros of `shape` on `param`'s device: a new state tensor of the parameter, named after it
/// (`fc1.weight.momentum_buffer`) when it has a name, so that graphs reading it say whose it is.
fn new_state(param: &Tensor, shape: &[usize], what: &str) -> Result<Tensor> {
    let zeros = Tensor::zeros(shape).to(param.device())?;
    Ok(match param.name() {
        Some(name) => zeros.with_name(&format!("{name}.{what}")),
        None => zeros,
    })
}

/// Writes each new value into its tensor's memory, outside the tape.
fn write_back(targets: &[Tensor], values: &[Tensor]) -> Result<()> {
    autograd::no_grad(|| targets.iter().zip(values).try_for_each(|(target, value)| target.copy_(value)))
}
