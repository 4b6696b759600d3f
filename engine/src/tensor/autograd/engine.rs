//! The backward pass, the analogue of PyTorch's autograd engine (`torch/csrc/autograd/engine.cpp`):
//! find every node the roots reach, count how many gradients each still waits for, then run the
//! nodes whose gradients are all in, latest first, summing the gradients that meet at a node and
//! handing each leaf's to its `.grad` (or, for `autograd::grad`, to the caller).

use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use super::GradMode;
use super::graph::{AutogradMeta, Edge, Node};
use crate::error::{Error, Result, SourceLocation};
use crate::tensor::{Tensor, dispatch};

/// A node's identity: its address.
type NodeKey = *const Node;

fn key(node: &Arc<Node>) -> NodeKey {
    Arc::as_ptr(node)
}

/// A node ready to run, ordered by creation (latest first).
struct Ready(u64, Arc<Node>);

impl PartialEq for Ready {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Ready {}
impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ready {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// Where leaf gradients go: into `.grad`, or into the answer of `autograd::grad` for the leaves it
/// asked about.
enum Sink<'a> {
    AccumulateGrad,
    Capture { inputs: Vec<*const AutogradMeta>, grads: Vec<Option<Tensor>>, _inputs: &'a [Tensor] },
}

impl Sink<'_> {
    fn deliver(&mut self, leaf: &Arc<AutogradMeta>, grad: Tensor, from: &str, location: SourceLocation) -> Result<()> {
        let AutogradMeta::Leaf(cell) = &**leaf else { unreachable!("accumulate edges point at leaves") };
        match self {
            Sink::AccumulateGrad => {
                let symbolic = grad.is_symbolic();
                cell.accumulate(grad, from, location)?;
                // A traced backward's gradient: the trace computes it and the capture hands it over.
                if symbolic && let Some(mode) = dispatch::mode() {
                    mode.note_grad(super::LeafGrad::of(leaf));
                }
                Ok(())
            }
            Sink::Capture { inputs, grads, .. } => {
                if let Some(i) = inputs.iter().position(|&p| std::ptr::eq(p, Arc::as_ptr(leaf))) {
                    if grad.shape() != cell.meta().shape.as_slice() {
                        return Err(Error::Autograd {
                            message: format!(
                                "{from} returned a gradient of shape {:?} for an input of shape {:?}",
                                grad.shape(),
                                cell.meta().shape
                            ),
                            location,
                        });
                    }
                    grads[i] = Some(match grads[i].take() {
                        None => grad,
                        Some(old) => old.add(&grad)?,
                    });
                }
                Ok(())
            }
        }
    }
}

/// `grad` in the dtype of the tensor `edge` leads to, as PyTorch's engine casts each gradient to
/// its input's dtype (`validate_outputs`): a bf16 parameter used in an f32 op (type promotion,
/// autocast's casts) gets a bf16 gradient, while the formulas themselves stay dtype-agnostic.
fn in_dtype_of(edge: &Edge, grad: Tensor) -> Result<Tensor> {
    let dtype = match edge {
        Edge::Accumulate(leaf) => match &**leaf {
            AutogradMeta::Leaf(cell) => cell.meta().dtype,
            _ => return Ok(grad),
        },
        Edge::Node { node, output } => node.output_metas()[*output].dtype,
    };
    if grad.dtype() == dtype { Ok(grad) } else { grad.to_dtype(dtype) }
}

/// Runs backward from each `(root, gradient)`. With `capture`, the gradients of those leaves are
/// returned and no `.grad` changes; otherwise every leaf reached accumulates its gradient.
pub(super) fn run(
    roots: &[(Tensor, Tensor)],
    capture: Option<&[Tensor]>,
    retain_graph: bool,
    location: SourceLocation,
) -> Result<Option<Vec<Option<Tensor>>>> {
    crate::wires::trip(crate::wires::Wire::Autograd);
    let _no_grad = GradMode::set(false);
    // Concrete roots are differentiated now, even from traced code (a backward() that broke the
    // graph); symbolic ones (the joint graph's) are recorded by their trace.
    let traced = roots.iter().any(|(r, _)| r.is_symbolic());
    let _eager = (!traced).then(dispatch::untraced);
    let mut sink = match capture {
        None => Sink::AccumulateGrad,
        Some(inputs) => {
            let mut leaves = Vec::with_capacity(inputs.len());
            for (i, t) in inputs.iter().enumerate() {
                match t.autograd.as_ref() {
                    Some(meta) if matches!(**meta, AutogradMeta::Leaf(_)) => leaves.push(Arc::as_ptr(meta)),
                    _ => {
                        return Err(Error::Autograd {
                            message: format!(
                                "input {i} is not a leaf that requires grad; ask for the gradients of leaves \
                                 (tensors made with requires_grad_(true))"
                            ),
                            location,
                        });
                    }
                }
            }
            Sink::Capture { grads: vec![None; leaves.len()], inputs: leaves, _inputs: inputs }
        }
    };
    // The roots' edges, and every node they reach with the number of edges into it.
    let mut root_edges = Vec::with_capacity(roots.len());
    for (i, (root, _)) in roots.iter().enumerate() {
        let Some(edge) = Edge::of(root) else {
            return Err(Error::Autograd {
                message: format!(
                    "element {i} of the tensors does not require grad and has no grad_fn: nothing it was \
                     computed from requires grad (make the parameters with requires_grad_(true), and compute \
                     outside no_grad)"
                ),
                location,
            });
        };
        root_edges.push(edge);
    }
    let mut dependencies: HashMap<NodeKey, usize> = HashMap::new();
    let mut seen: HashMap<NodeKey, Arc<Node>> = HashMap::new();
    let mut stack: Vec<Arc<Node>> = root_edges
        .iter()
        .filter_map(|e| match e {
            Edge::Node { node, .. } => Some(node.clone()),
            Edge::Accumulate(_) => None,
        })
        .collect();
    while let Some(node) = stack.pop() {
        if seen.insert(key(&node), node.clone()).is_some() {
            continue;
        }
        for edge in node.next().iter().flatten() {
            if let Edge::Node { node: next, .. } = edge {
                *dependencies.entry(key(next)).or_insert(0) += 1;
                stack.push(next.clone());
            }
        }
    }
    // Gradients waiting at each node, one slot per output.
    let mut buffers: HashMap<NodeKey, Vec<Option<Tensor>>> = HashMap::new();
    let add = |buffers: &mut HashMap<NodeKey, Vec<Option<Tensor>>>, node: &Arc<Node>, output: usize, grad: Tensor| {
        let slots = buffers.entry(key(node)).or_insert_with(|| vec![None; node.output_metas().len()]);
        slots[output] = Some(match slots[output].take() {
            None => grad,
            Some(old) => old.add(&grad)?,
        });
        Ok::<(), Error>(())
    };
    for (edge, (_, grad)) in root_edges.iter().zip(roots) {
        let grad = in_dtype_of(edge, grad.clone())?;
        match edge {
            Edge::Accumulate(leaf) => sink.deliver(leaf, grad, "backward", location)?,
            Edge::Node { node, output } => add(&mut buffers, node, *output, grad)?,
        }
    }
    let mut ready: BinaryHeap<Ready> =
        seen.values().filter(|n| !dependencies.contains_key(&key(n))).map(|n| Ready(n.sequence(), n.clone())).collect();
    while let Some(Ready(_, node)) = ready.pop() {
        let slots = buffers.remove(&key(&node)).unwrap_or_default();
        let grads_in: Option<Vec<Tensor>> = if slots.iter().all(Option::is_none) {
            None
        } else {
            Some(
                slots
                    .into_iter()
                    .zip(node.output_metas())
                    .map(|(g, meta)| match g {
                        Some(g) => Ok(g),
                        None => Tensor::zeros_dtype(&meta.shape, meta.dtype).to(meta.device),
                    })
                    .collect::<Result<_>>()?,
            )
        };
        let grads_out = match grads_in {
            Some(grads) => {
                // In a trace, the backward's nodes carry the forward op's line.
                let previous = traced.then(|| dispatch::mode().map(|m| m.override_location(node.location()))).flatten();
                let out = node.apply(grads, location);
                if let (Some(previous), Some(mode)) = (previous, dispatch::mode()) {
                    mode.override_location(previous);
                }
                let out = out?;
                if !retain_graph {
                    node.release();
                }
                if out.len() != node.next().len() {
                    return Err(Error::Autograd {
                        message: format!(
                            "{} returned {} gradients for {} inputs",
                            node.name(),
                            out.len(),
                            node.next().len()
                        ),
                        location,
                    });
                }
                out
            }
            None => vec![None; node.next().len()],
        };
        for (edge, grad) in node.next().iter().zip(grads_out) {
            let grad = match (edge, grad) {
                (Some(edge), Some(grad)) => Some(in_dtype_of(edge, grad)?),
                (_, grad) => grad,
            };
            match (edge, grad) {
                (Some(Edge::Accumulate(leaf)), Some(grad)) => sink.deliver(leaf, grad, node.name(), location)?,
                (Some(Edge::Node { node: next, output }), grad) => {
                    if let Some(grad) = grad {
                        add(&mut buffers, next, *output, grad)?;
                    }
                    let waiting = dependencies.get_mut(&key(next)).expect("counted above");
                    *waiting -= 1;
                    if *waiting == 0 {
                        ready.push(Ready(next.sequence(), next.clone()));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(match sink {
        Sink::AccumulateGrad => None,
        Sink::Capture { grads, .. } => Some(grads),
    })
}
