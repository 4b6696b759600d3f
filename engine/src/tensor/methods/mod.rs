//! The public op methods on [`Tensor`], the analogue of the `torch.*` functions and `Tensor`
//! methods. Every method funnels into [`Op::apply`], which records a graph node when a trace is
//! active and runs an eager kernel otherwise: the same split PyTorch's dispatcher makes between
//! its Python/proxy mode and its eager kernels.
//!
//! Methods are `#[track_caller]`, so errors and graph nodes name the learner's line.

mod cat;
mod loss;
mod nn;
mod pointwise;
mod reduce;
mod view;

pub use nn::AttnMask;

use crate::error::{Error, Result, SourceLocation};
use crate::op::{CustomOp, Op};
use crate::tensor::{Operand, Tensor, autocast, autograd, dispatch};

// ANCHOR: op_apply
impl Op {
    /// Applies the op to its operands: recorded into the active trace if there is one, run
    /// eagerly otherwise. This is how graphs are interpreted (see [`crate::fx::Interpreter`]).
    /// When an operand requires grad (and grad mode is on), the op also goes on autograd's tape,
    /// as PyTorch's autograd dispatch key does before the kernel below it runs.
    pub fn apply(&self, operands: &[Operand], location: SourceLocation) -> Result<Tensor> {
        // Autocast first, as PyTorch's Autocast dispatch key comes before autograd's: the casts it
        // makes are ops of their own, taped, recorded or run like any other.
        if let Some(cast) = autocast::cast_operands(self, operands, location)? {
            let cast: Vec<Operand> = operands
                .iter()
                .zip(&cast)
                .map(|(o, t)| match t {
                    Some(t) => Operand::Tensor(t),
                    None => *o,
                })
                .collect();
            return self.apply_taped(&cast, location);
        }
        self.apply_taped(operands, location)
    }

    /// [`Op::apply`] after autocast: on autograd's tape when an operand requires grad, then
    /// recorded into the active trace or run eagerly.
    fn apply_taped(&self, operands: &[Operand], location: SourceLocation) -> Result<Tensor> {
        let tracked = operands.iter().any(|o| matches!(o, Operand::Tensor(t) if t.requires_grad()));
        if tracked && autograd::is_grad_enabled() {
            // What runs below (a decomposition, a cond branch) is not recorded a second time.
            let output = autograd::no_grad(|| self.dispatch(operands, location))?;
            let captured_too = output.is_symbolic() && dispatch::mode().is_some_and(|m| m.captures_autograd());
            return Ok(autograd::record_op(self, operands, output, captured_too, location));
        }
        self.dispatch(operands, location)
    }

    /// [`Op::apply`] after autocast and autograd: recorded into the active trace, or run eagerly.
    fn dispatch(&self, operands: &[Operand], location: SourceLocation) -> Result<Tensor> {
        if let Some(recorded) = dispatch::mode().and_then(|mode| mode.record(self, operands, location)) {
            return recorded;
        }
        crate::eager::run(self, operands, location)
    }
}
// ANCHOR_END: op_apply

impl CustomOp {
    /// Applies the op: recorded as one node inside a compiled function, run now otherwise.
    #[track_caller]
    pub fn call(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        let operands: Vec<Operand> = inputs.iter().map(|t| Operand::Tensor(t)).collect();
        Op::Custom(self.clone()).apply(&operands, SourceLocation::caller())
    }
}

/// Resolves a possibly negative dimension (`-1` is the last) against a rank.
fn normalize_dim(op: &'static str, dim: isize, rank: usize, location: SourceLocation) -> Result<usize> {
    let resolved = if dim < 0 { dim + rank as isize } else { dim };
    if (0..rank as isize).contains(&resolved) {
        Ok(resolved as usize)
    } else {
        Err(Error::InvalidArgument {
            op,
            message: format!("dim {dim} is out of range for a tensor of rank {rank} (valid: -{rank}..{rank})"),
            location,
        })
    }
}

impl Tensor {
    /// Applies `op` with this tensor as the first operand. The operands are gathered on the
    /// stack, not in a `Vec` (this runs for every op of every traced call), element by element
    /// (a copy of a slice of unknown length calls `memcpy`). No method here passes more than three
    /// others (attention's key, value and mask).
    fn apply(&self, op: Op, rest: &[Operand], location: SourceLocation) -> Result<Tensor> {
        assert!(rest.len() <= 3, "an op method passes at most three more operands");
        let other = |i: usize| rest.get(i).copied().unwrap_or(Operand::Tensor(self));
        let operands = [Operand::Tensor(self), other(0), other(1), other(2)];
        op.apply(&operands[..1 + rest.len()], location)
    }
}
