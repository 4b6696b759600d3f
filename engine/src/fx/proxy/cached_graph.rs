//! Following a cached graph while tracing: the engine's stand-in for Dynamo checking guards
//! *instead of* tracing. A Rust closure cannot be inspected, so every call of a compiled function
//! runs it again under a tracer; when the compiled function already holds a static graph for this
//! point of the code, the tracer compares each recorded op with that graph's next node as it goes
//! and builds nothing while they agree (no names, shapes or node allocations on a cached call). A
//! trace that reaches the cached graph's end with the same outputs *is* that graph, and the cache
//! lookup recognises it by identity instead of comparing two graphs.
//!
//! A node matches only when a plain trace would have built it identically: same op and
//! arguments, same input name, layout and metadata, same source line. So where the trace leaves
//! the cached graph (another op, another shape, a graph break), replaying the matched nodes
//! through the ordinary [`Graph`] calls rebuilds exactly the graph a plain trace would have.

use std::sync::Arc;

use super::input_strides;
use super::names::InputName;
use crate::error::SourceLocation;
use crate::fx::graph::{Arg, Graph, Node, NodeId, NodeKind};
use crate::op::Op;
use crate::tensor::Tensor;

/// A cached graph and how many of its nodes the trace has matched.
pub(super) struct FollowedGraph {
    graph: Arc<Graph>,
    matched: usize,
}

impl FollowedGraph {
    /// Starts following `graph` from its first node.
    pub(super) fn new(graph: Arc<Graph>) -> FollowedGraph {
        FollowedGraph { graph, matched: 0 }
    }

    /// The cached graph's node `id` (one the trace has already matched).
    pub(super) fn node(&self, id: NodeId) -> &Node {
        self.graph.node(id)
    }

    /// The cached graph's placeholders (the trace has matched a prefix of them).
    pub(super) fn placeholders(&self) -> &[NodeId] {
        self.graph.placeholders()
    }

    /// The next node to match, and its id.
    fn next(&self) -> Option<(&Node, NodeId)> {
        self.graph.nodes().get(self.matched).map(|node| (node, NodeId(self.matched)))
    }

    fn advance(&mut self, id: NodeId) -> NodeId {
        self.matched += 1;
        id
    }

    /// Matches a new input asking for `name` and bound to `tensor` (a static placeholder of
    /// exactly that name, metadata and layout is next). Nothing is copied from the tensor.
    pub(super) fn input(&mut self, name: InputName, tensor: &Tensor) -> Option<NodeId> {
        let (node, id) = self.next()?;
        let NodeKind::Placeholder { strides } = &node.kind else { return None };
        let meta = &node.meta;
        let same = name.is(&node.name)
            && meta.shape == tensor.shape()
            && meta.dtype == tensor.dtype()
            && meta.device == tensor.device()
            && **strides == *input_strides(tensor)
            && node.sym_shape.is_static();
        same.then(|| self.advance(id))
    }

    /// Matches a call of `op` on `args` made at `location` (the same call from the same line is
    /// next). Its value has the cached node's shape: every input matched, so every shape rule
    /// gives what it gave then.
    pub(super) fn call(&mut self, op: &Op, args: &[Arg], location: SourceLocation) -> Option<NodeId> {
        let (node, id) = self.next()?;
        let NodeKind::Call { op: cached_op, args: cached_args } = &node.kind else { return None };
        let same = cached_op == op && cached_args.as_slice() == args && node.location == Some(location);
        same.then(|| self.advance(id))
    }

    /// The cached graph itself when the trace matched all of it and returns its outputs.
    pub(super) fn finished(&self, outputs: &[NodeId]) -> Option<Arc<Graph>> {
        (self.matched == self.graph.nodes().len() && self.graph.outputs() == outputs).then(|| self.graph.clone())
    }

    /// The graph a plain trace would have built so far (same nodes, names, lines and ids).
    pub(super) fn rebuild(self) -> Graph {
        let mut graph = Graph::new();
        for node in &self.graph.nodes()[..self.matched] {
            match &node.kind {
                NodeKind::Placeholder { strides } => {
                    graph.add_placeholder(&node.name, node.meta.clone(), strides.clone());
                }
                NodeKind::Call { op, args } => {
                    let location = node.location.expect("traced calls have a location");
                    graph
                        .add_call(op.clone(), args.clone(), location)
                        .expect("a call the cached graph holds is valid on the same inputs");
                }
            }
        }
        graph
    }
}
