//! The tape, the analogue of PyTorch's autograd graph (`torch/csrc/autograd/function.h`): each
//! recorded op is a [`Node`] holding what its derivative needs and one [`Edge`] per input, to the
//! node that computed that input or to the leaf that accumulates its gradient.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::Function;
use super::derivatives::{self, Saved, SavedOperand};
use crate::error::{Error, Result, SourceLocation};
use crate::op::Op;
use crate::tensor::{Operand, Tensor, TensorMeta};

/// What autograd knows about one tensor handle.
pub(crate) enum AutogradMeta {
    /// A tensor the user asked gradients for.
    Leaf(Leaf),
    /// Output `output` of `node`.
    Computed {
        /// The node that computed the tensor.
        node: Arc<Node>,
        /// Which of the node's outputs it is.
        output: usize,
    },
}

/// A leaf's accumulated gradient, shared by every clone of its handle.
pub(crate) struct Leaf {
    meta: TensorMeta,
    grad: Mutex<Option<Tensor>>,
}

impl AutogradMeta {
    pub fn leaf(meta: TensorMeta) -> AutogradMeta {
        AutogradMeta::Leaf(Leaf { meta, grad: Mutex::new(None) })
    }
}

impl Leaf {
    pub fn grad(&self) -> Option<Tensor> {
        self.grad.lock().expect("grad lock").clone()
    }

    pub fn set_grad(&self, grad: Option<Tensor>) {
        *self.grad.lock().expect("grad lock") = grad;
    }

    /// Adds `grad` into the accumulated gradient, as `AccumulateGrad` does: the first gradient is
    /// kept (as a dense tensor), later ones are added to it.
    pub fn accumulate(&self, grad: Tensor, from: &str, location: SourceLocation) -> Result<()> {
        if grad.shape() != self.meta.shape.as_slice() {
            return Err(Error::Autograd {
                message: format!(
                    "{from} returned a gradient of shape {:?} for a leaf of shape {:?}",
                    grad.shape(),
                    self.meta.shape
                ),
                location,
            });
        }
        let mut slot = self.grad.lock().expect("grad lock");
        let sum = match slot.take() {
            None => grad.contiguous()?,
            Some(old) => old.add(&grad)?,
        };
        *slot = Some(sum.detach());
        Ok(())
    }

    pub fn meta(&self) -> &TensorMeta {
        &self.meta
    }
}

/// A leaf's `.grad` slot, held by a trace whose traced backward wrote a symbolic gradient into it
/// (compiled autograd): once the graph has run, the capture puts the concrete gradient there.
#[derive(Clone)]
pub(crate) struct LeafGrad(Arc<AutogradMeta>);

impl LeafGrad {
    /// The slot of `meta`, which must be a leaf's.
    pub fn of(meta: &Arc<AutogradMeta>) -> LeafGrad {
        debug_assert!(matches!(**meta, AutogradMeta::Leaf(_)), "gradients accumulate into leaves");
        LeafGrad(meta.clone())
    }

    fn leaf(&self) -> &Leaf {
        let AutogradMeta::Leaf(leaf) = &*self.0 else { unreachable!("a LeafGrad is a leaf's") };
        leaf
    }

    /// The gradient in the slot.
    pub fn get(&self) -> Option<Tensor> {
        self.leaf().grad()
    }

    /// Puts `grad` in the slot.
    pub fn set(&self, grad: Option<Tensor>) {
        self.leaf().set_grad(grad.map(|g| g.detach()));
    }

    /// Whether both are the slot of one leaf.
    pub fn same(&self, other: &LeafGrad) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Where the gradient of one input of a node goes.
#[derive(Clone)]
pub(crate) enum Edge {
    /// Into a leaf's `.grad` (its `AccumulateGrad`).
    Accumulate(Arc<AutogradMeta>),
    /// Into output `output` of `node`.
    Node {
        /// The node that computed the input.
        node: Arc<Node>,
        /// Which of its outputs the input is.
        output: usize,
    },
}

impl Edge {
    /// The edge to whatever computed `tensor`, or `None` when it requires no grad.
    pub fn of(tensor: &Tensor) -> Option<Edge> {
        let meta = tensor.autograd.as_ref()?;
        Some(match &**meta {
            AutogradMeta::Leaf(_) => Edge::Accumulate(meta.clone()),
            AutogradMeta::Computed { node, output } => Edge::Node { node: node.clone(), output: *output },
        })
    }
}

/// How a node computes its inputs' gradients.
enum Backward {
    /// A recorded op: its derivative formula on the values it saved (freed after backward).
    Op { op: Op, saved: Mutex<Option<Saved>> },
    /// A node put on the tape from above.
    Function(Box<dyn Function>),
}

static NEXT_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// One node of the tape (`grad_fn`).
pub(crate) struct Node {
    name: String,
    backward: Backward,
    /// One per input of the forward computation; `None` for an input that requires no grad.
    next: Vec<Option<Edge>>,
    /// Shape, dtype and device of each output, to make zeros for an output no gradient reached.
    outputs: Vec<TensorMeta>,
    /// Creation order: the engine runs later nodes first, as PyTorch's does.
    sequence: u64,
    /// The line of the forward op, which a traced backward's nodes carry (as PyTorch's joint
    /// graph annotates each backward node with its forward op's stack trace).
    location: Option<SourceLocation>,
}

impl Node {
    /// A node for a [`Function`].
    pub fn function(function: Box<dyn Function>, next: Vec<Option<Edge>>, outputs: Vec<TensorMeta>) -> Node {
        let name = function.name();
        Node::new(name, Backward::Function(function), next, outputs, None)
    }

    fn new(
        name: String,
        backward: Backward,
        next: Vec<Option<Edge>>,
        outputs: Vec<TensorMeta>,
        location: Option<SourceLocation>,
    ) -> Node {
        let sequence = NEXT_SEQUENCE.fetch_add(1, Ordering::Relaxed);
        Node { name, backward, next, outputs, sequence, location }
    }

    /// The line of the forward op this node differentiates, if it is an op's.
    pub fn location(&self) -> Option<SourceLocation> {
        self.location
    }

    /// `tensor` as output `index` of this node.
    pub fn output(self: &Arc<Node>, tensor: Tensor, index: usize) -> Tensor {
        let meta = AutogradMeta::Computed { node: self.clone(), output: index };
        Tensor { repr: tensor.repr, autograd: Some(Arc::new(meta)) }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn next(&self) -> &[Option<Edge>] {
        &self.next
    }

    pub fn output_metas(&self) -> &[TensorMeta] {
        &self.outputs
    }

    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The gradients of the node's inputs from those of its outputs (each present).
    pub fn apply(&self, grads: Vec<Tensor>, location: SourceLocation) -> Result<Vec<Option<Tensor>>> {
        match &self.backward {
            Backward::Op { op, saved } => {
                let saved = saved.lock().expect("saved lock");
                let Some(saved) = saved.as_ref() else {
                    return Err(Error::Autograd {
                        message: format!(
                            "trying to backward through {} a second time: its saved values were freed by the first \
                             backward; pass retain_graph = true to the first one to keep them",
                            self.name
                        ),
                        location,
                    });
                };
                let needs: Vec<bool> = self.next.iter().map(Option::is_some).collect();
                let grad = grads.into_iter().next().expect("an op has one output");
                derivatives::backward(op, saved, &grad, &needs, location)
            }
            Backward::Function(function) => function.backward(grads),
        }
    }

    /// Frees the saved values (after a backward that does not retain the graph).
    pub fn release(&self) {
        match &self.backward {
            Backward::Op { saved, .. } => *saved.lock().expect("saved lock") = None,
            Backward::Function(function) => function.release(),
        }
    }
}

/// Records `op`, which computed `output` from `operands`, on the tape when one of the operands
/// requires grad: the returned tensor points at the new node. While fx traces, only the trace's
/// own (symbolic) tensors count: a concrete tensor met in a trace becomes a graph input, and
/// whether it requires grad is the business of whoever runs the graph, unless `captured_too`: a
/// trace with compiled autograd (see
/// [`crate::tensor::dispatch::DispatchMode::captures_autograd`]) counts the concrete tensors too,
/// so that a `backward()` in it reaches them.
pub(crate) fn record_op(
    op: &Op,
    operands: &[Operand],
    output: Tensor,
    captured_too: bool,
    location: SourceLocation,
) -> Tensor {
    let tracing = output.is_symbolic();
    let next: Vec<Option<Edge>> = operands
        .iter()
        .map(|o| match o {
            Operand::Tensor(t) if t.is_symbolic() == tracing || captured_too => Edge::of(t),
            _ => None,
        })
        .collect();
    if next.iter().all(Option::is_none) || !derivatives::is_differentiable(op) {
        return output;
    }
    let saved = Saved {
        operands: operands
            .iter()
            .map(|o| match o {
                Operand::Tensor(t) => SavedOperand::Tensor(t.detach()),
                Operand::Scalar(v) => SavedOperand::Scalar(*v),
            })
            .collect(),
        output: output.detach(),
    };
    let name = derivatives::node_name(op);
    let node = Arc::new(Node::new(
        name,
        Backward::Op { op: op.clone(), saved: Mutex::new(Some(saved)) },
        next,
        vec![output.meta()],
        Some(location),
    ));
    node.output(output, 0)
}
