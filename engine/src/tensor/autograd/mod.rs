//! Reverse-mode automatic differentiation, the analogue of `torch.autograd`: tensors that require
//! grad, a tape recorded as ops run, `backward()` and `.grad`.
//!
//! - A **leaf** is a tensor the user asked gradients for ([`Tensor::requires_grad_`]); backward
//!   adds into its [`Tensor::grad`], as PyTorch's `AccumulateGrad` does, until
//!   [`Tensor::zero_grad`] clears it.
//! - Every op applied (while grad mode is on) to a tensor that requires grad records a **node**
//!   on the tape (`graph.rs`, PyTorch's `grad_fn`): the op, the values its derivative needs, and
//!   an edge to the node (or leaf) behind each input. The result points at its node.
//! - [`Tensor::backward`] walks the tape from the result back to the leaves (`engine.rs`), each
//!   node turning the gradient of its output into gradients of its inputs with the op's
//!   **derivative formula** (`derivatives.rs`, the engine's `derivatives.yaml`).
//! - [`no_grad`] runs code without recording; [`Tensor::detach`] is the same values outside the
//!   tape.
//!
//! The formulas are written with `Tensor` ops, so they run on every device, and, while fx traces,
//! they are recorded like any other ops: that is how [`crate::aot`] builds the joint forward and
//! backward graph, as AOTAutograd traces PyTorch's autograd engine with proxy tensors. A layer
//! above the tape can also put its own node on it ([`Function`], `torch.autograd.Function`): a
//! compiled function's backward is one.
//!
//! ```
//! use engine::Tensor;
//! let w = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?.requires_grad_(true);
//! let loss = w.mul(&w)?.sum_all()?; // sum(w^2)
//! loss.backward()?;
//! assert_eq!(w.grad().unwrap().to_vec()?, vec![2.0, 4.0, 6.0]); // 2w
//! # Ok::<(), engine::Error>(())
//! ```

mod derivatives;
mod engine;
mod graph;

use std::cell::Cell;
use std::sync::Arc;

pub(crate) use graph::AutogradMeta;
pub(crate) use graph::{LeafGrad, record_op};

use crate::error::{Error, Result, SourceLocation};
use crate::tensor::{Tensor, TensorMeta};
use graph::{Edge, Node};

thread_local! {
    /// Grad mode of this thread, as PyTorch's is thread-local.
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops run now are recorded on the tape (`torch.is_grad_enabled()`).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Sets grad mode on this thread until the guard is dropped, then restores the previous mode
/// (`torch.set_grad_enabled` as a context manager).
#[must_use = "grad mode is restored when the guard is dropped"]
pub struct GradMode {
    previous: bool,
}

impl GradMode {
    /// Grad mode `enabled` until the guard drops.
    pub fn set(enabled: bool) -> GradMode {
        GradMode { previous: GRAD_ENABLED.with(|g| g.replace(enabled)) }
    }
}

impl Drop for GradMode {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.previous));
    }
}

/// Runs `f` with grad mode off (`with torch.no_grad():`): nothing it computes is recorded, so
/// nothing it returns requires grad. Optimizer steps and evaluation run this way.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _off = GradMode::set(false);
    f()
}

/// A node that a layer above the tape puts on it, the analogue of `torch.autograd.Function`: its
/// backward maps the gradients of the outputs to those of the inputs. A compiled function's
/// backward graph is one ([`crate::aot`]).
pub trait Function: Send + Sync {
    /// The name `grad_fn` shows (`CompiledFunctionBackward`).
    fn name(&self) -> String;

    /// The gradients of the inputs (in the order given to [`attach`]; `None` for an input that
    /// gets none) from those of the outputs. Every output's gradient is present: one that nothing
    /// flowed into is zeros, as PyTorch materializes them.
    fn backward(&self, grad_outputs: Vec<Tensor>) -> Result<Vec<Option<Tensor>>>;

    /// Frees what the function saved for backward: called after a backward that did not ask to
    /// retain the graph. A later backward through it should fail with a clear error.
    fn release(&self) {}
}

/// Puts `function` on the tape as the node that computed `outputs` from `inputs`, when grad mode
/// is on and some input requires grad: the outputs marked in `differentiable` come back pointing
/// at the node; the others, and every output otherwise, come back as they are.
pub fn attach(
    function: impl Function + 'static,
    inputs: &[Tensor],
    outputs: Vec<Tensor>,
    differentiable: &[bool],
) -> Vec<Tensor> {
    let edges: Vec<Option<Edge>> = inputs.iter().map(Edge::of).collect();
    if !is_grad_enabled() || edges.iter().all(Option::is_none) {
        return outputs;
    }
    let metas: Vec<TensorMeta> = outputs.iter().map(Tensor::meta).collect();
    let node = Arc::new(Node::function(Box::new(function), edges, metas));
    outputs
        .into_iter()
        .enumerate()
        .map(|(i, t)| if differentiable.get(i) == Some(&true) { node.output(t, i) } else { t })
        .collect()
}

/// The gradients of `outputs` with respect to `inputs` (leaves), given the gradient of each output
/// (`torch.autograd.grad`): nothing is added to any `.grad`. An input the outputs do not depend on
/// gets `None`. The saved values of the graph are freed unless `retain_graph`.
#[track_caller]
pub fn grad(
    outputs: &[Tensor],
    inputs: &[Tensor],
    grad_outputs: &[Tensor],
    retain_graph: bool,
) -> Result<Vec<Option<Tensor>>> {
    let location = SourceLocation::caller();
    if outputs.len() != grad_outputs.len() {
        return Err(Error::Autograd {
            message: format!("{} outputs but {} gradients for them", outputs.len(), grad_outputs.len()),
            location,
        });
    }
    let roots: Vec<(Tensor, Tensor)> = outputs.iter().cloned().zip(grad_outputs.iter().cloned()).collect();
    engine::run(&roots, Some(inputs), retain_graph, location).map(|captured| captured.unwrap_or_default())
}

impl Tensor {
    /// This tensor as a leaf that requires grad (with `true`): later ops on it are recorded, and
    /// [`Tensor::backward`] adds its gradient into [`Tensor::grad`]. Tensors here are immutable
    /// handles, so unlike PyTorch's in-place `requires_grad_` this returns the handle to use,
    /// sharing the data: `let w = Tensor::randn(&[4, 4], 0).requires_grad_(true);`. With `false`
    /// it is [`Tensor::detach`]. Clones of the returned handle share one `.grad`.
    pub fn requires_grad_(&self, requires_grad: bool) -> Tensor {
        if !requires_grad {
            return self.detach();
        }
        match &self.autograd {
            Some(_) => self.clone(),
            None => Tensor { repr: self.repr.clone(), autograd: Some(Arc::new(AutogradMeta::leaf(self.meta()))) },
        }
    }

    /// Whether gradients flow to this tensor: a leaf that requires grad, or a result computed from
    /// one while grad mode was on (`tensor.requires_grad`).
    pub fn requires_grad(&self) -> bool {
        self.autograd.is_some()
    }

    /// Whether this tensor is a leaf of the tape (`tensor.is_leaf`): it requires no grad, or it
    /// requires grad and was not computed by a recorded op.
    pub fn is_leaf(&self) -> bool {
        !matches!(self.autograd.as_deref(), Some(AutogradMeta::Computed { .. }))
    }

    /// The name of the node that computed this tensor (`MulBackward`), as `tensor.grad_fn`
    /// prints; `None` for a leaf.
    pub fn grad_fn(&self) -> Option<String> {
        match self.autograd.as_deref() {
            Some(AutogradMeta::Computed { node, .. }) => Some(node.name().to_string()),
            _ => None,
        }
    }

    /// The same values, outside the tape (`tensor.detach()`): it does not require grad, shares the
    /// data, and backward never flows through it.
    pub fn detach(&self) -> Tensor {
        Tensor { repr: self.repr.clone(), autograd: None }
    }

    /// The gradient accumulated in this leaf by the backward passes since it was created or last
    /// cleared (`tensor.grad`); `None` before any, and for a tensor that is not a leaf requiring
    /// grad.
    pub fn grad(&self) -> Option<Tensor> {
        match self.autograd.as_deref() {
            Some(AutogradMeta::Leaf(leaf)) => leaf.grad(),
            _ => None,
        }
    }

    /// Clears this leaf's gradient, so the next backward starts from nothing (`tensor.grad =
    /// None`, what `optimizer.zero_grad()` does by default).
    pub fn zero_grad(&self) {
        if let Some(AutogradMeta::Leaf(leaf)) = self.autograd.as_deref() {
            leaf.set_grad(None);
        }
    }

    /// Replaces this leaf's gradient (`tensor.grad = value`); nothing for a tensor that is not a
    /// leaf requiring grad.
    pub fn set_grad(&self, value: Option<Tensor>) {
        if let Some(AutogradMeta::Leaf(leaf)) = self.autograd.as_deref() {
            leaf.set_grad(value.map(|g| g.detach()));
        }
    }

    /// Backward from this one-element tensor (a loss): the gradient of every leaf it depends on is
    /// added into that leaf's [`Tensor::grad`], and the graph's saved values are freed
    /// (`loss.backward()`). Inside a compiled function this is a graph break: the graph so far
    /// runs, with its compiled backward, and backward runs on its result; with compiled autograd
    /// ([`Compiled::compiled_autograd`](crate::dynamo::Compiled::compiled_autograd)) the backward
    /// is traced into the function's graph instead.
    #[track_caller]
    pub fn backward(&self) -> Result<()> {
        self.backward_at(None, false, SourceLocation::caller())
    }

    /// Backward from this tensor with `gradient` as its gradient (needed unless it has one
    /// element), keeping the graph's saved values when `retain_graph`
    /// (`tensor.backward(gradient, retain_graph)`).
    #[track_caller]
    pub fn backward_with(&self, gradient: Option<&Tensor>, retain_graph: bool) -> Result<()> {
        self.backward_at(gradient, retain_graph, SourceLocation::caller())
    }

    fn backward_at(&self, gradient: Option<&Tensor>, retain_graph: bool, location: SourceLocation) -> Result<()> {
        // A traced loss with a tape (compiled autograd) is differentiated in the trace; one without
        // needs its value: a graph break.
        let reason = "Tensor::backward() runs the autograd engine on concrete values";
        let root = if self.is_symbolic() && self.autograd.is_none() {
            self.concretize(reason, location)?
        } else {
            self.clone()
        };
        let gradient = match gradient {
            Some(g) if g.is_symbolic() && !root.is_symbolic() => g.concretize(reason, location)?,
            Some(g) => g.clone(),
            None if root.numel() == 1 => ones_like(&root)?,
            None => {
                return Err(Error::Autograd {
                    message: format!(
                        "grad can be implicitly created only for one-element outputs; this one has shape {:?}: \
                         pass its gradient with backward_with",
                        root.shape()
                    ),
                    location,
                });
            }
        };
        if gradient.shape() != root.shape() {
            return Err(Error::Autograd {
                message: format!(
                    "the gradient has shape {:?} but the tensor has shape {:?}",
                    gradient.shape(),
                    root.shape()
                ),
                location,
            });
        }
        engine::run(&[(root, gradient)], None, retain_graph, location).map(|_| ())
    }
}

/// Ones of `root`'s shape on its device, the gradient a loss starts backward with. Inside a trace
/// it is a graph op (`where(root, 1, 1)`, one whatever the loss's value, NaN included), so that a
/// traced backward captures no constant tensor.
fn ones_like(root: &Tensor) -> Result<Tensor> {
    if root.is_symbolic() { root.detach().where_(1.0, 1.0) } else { Tensor::ones(root.shape()).to(root.device()) }
}
