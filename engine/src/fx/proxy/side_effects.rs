//! What a trace does besides computing values, the analogue of Dynamo's `SideEffects`: writes
//! into tensors from outside the traced function (`copy_`, an optimizer updating a parameter),
//! and the gradients a traced backward leaves in leaves' `.grad` (compiled autograd).
//!
//! A write becomes a `copy_` node into the tensor's placeholder, and an extra output of the graph,
//! so that the graph performs it when it runs (Inductor stores straight into the tensor's memory).
//! Later reads of the tensor in the same graph read the value written. A symbolic gradient stays
//! in the leaf until the call ends, when the capture makes it an output and hands the leaf the
//! concrete result.

use super::{TRACES, TraceState};
use crate::error::{Error, Result, SourceLocation};
use crate::fx::graph::{NodeId, NodeKind};
use crate::tensor::Tensor;
use crate::tensor::autograd::LeafGrad;

/// A write into a graph input: the placeholder written and the `copy_` node writing it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mutation {
    pub input: NodeId,
    pub node: NodeId,
}

impl TraceState {
    /// The node holding the latest value written into `placeholder` in this graph, if any.
    pub(super) fn written(&self, placeholder: NodeId) -> Option<NodeId> {
        self.mutations.iter().find(|m| m.input == placeholder).map(|m| m.node)
    }

    /// The placeholder a `copy_` whose target is node `target` writes: the target's own, or the
    /// one an earlier `copy_` wrote (its result stands for the tensor since). Only tensors from
    /// outside the function can be written: a value computed inside has no memory to write.
    pub(super) fn copy_target(&self, target: NodeId, location: SourceLocation) -> Result<NodeId> {
        if let Some(m) = self.mutations.iter().find(|m| m.node == target) {
            return Ok(m.input);
        }
        match self.node(target).kind {
            NodeKind::Placeholder { .. } => Ok(target),
            NodeKind::Call { .. } => Err(Error::Capture {
                message: "copy_ inside a compiled function writes only a tensor from outside it (an argument, or a \
                          tensor it captured such as a parameter); this one was computed inside, so use the \
                          computed value instead of writing into it"
                    .into(),
                location,
            }),
        }
    }

    /// Records that node `node` wrote `input`, reached through `target` (the tensor written):
    /// later reads of that tensor in this graph read `node`.
    pub(super) fn note_copy(&mut self, input: NodeId, node: NodeId, target: &Tensor) {
        self.mutations.retain(|m| m.input != input);
        self.mutations.push(Mutation { input, node });
        if let Some(s) = target.symbolic()
            && s.trace == self.id
        {
            self.values.set_node(s.value, node);
        }
    }

    /// `outputs` with every write of the graph after them (the graph performs the writes), and the
    /// writes forgotten: the graph is done.
    pub(super) fn with_writes(&mut self, mut outputs: Vec<NodeId>) -> Vec<NodeId> {
        for m in std::mem::take(&mut self.mutations) {
            if !outputs.contains(&m.node) {
                outputs.push(m.node);
            }
        }
        outputs
    }

    /// Whether the graph so far changes state outside itself: it writes tensors from outside, or
    /// a backward traced in it left gradients in leaves.
    pub(super) fn updates_state(&self) -> bool {
        !self.mutations.is_empty() || self.backward_in_graph
    }
}

/// Whether the innermost recording trace captures autograd (see
/// [`crate::tensor::dispatch::DispatchMode::captures_autograd`]).
pub(crate) fn captures_autograd() -> bool {
    TRACES.with(|t| t.borrow().last().is_some_and(|s| !s.paused && s.captures_autograd))
}

/// Notes a symbolic gradient left in `leaf` by the innermost trace's backward.
pub(crate) fn note_grad(leaf: LeafGrad) {
    TRACES.with(|t| {
        if let Some(s) = t.borrow_mut().last_mut() {
            s.backward_in_graph = true;
            if !s.grads.iter().any(|g| g.same(&leaf)) {
                s.grads.push(leaf);
            }
        }
    });
}

impl super::Tracer {
    /// The leaves whose `.grad` holds a symbolic gradient of this trace (left by a traced
    /// backward), each with that gradient: what the capture adds to the outputs of its last graph.
    pub(crate) fn traced_grads(&self) -> Vec<(LeafGrad, Tensor)> {
        self.with_state(|s| {
            s.grads
                .iter()
                .filter_map(|leaf| {
                    leaf.get().filter(|g| g.symbolic().is_some_and(|g| g.trace == s.id)).map(|g| (leaf.clone(), g))
                })
                .collect()
        })
    }
}
