//! Nodes and graphs, the analogue of `torch.fx.Graph` and `torch.fx.Node`.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::op::Op;
use crate::scalar::Scalar;
use crate::tensor::TensorMeta;

/// A node's position in its graph. Nodes only refer to earlier nodes, so ids are also a
/// topological order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) usize);

impl NodeId {
    /// The node's index in [`Graph::nodes`].
    pub fn index(self) -> usize {
        self.0
    }
}

/// An argument of an op call: another node's value or a scalar constant baked into the graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// The value produced by an earlier node.
    Node(NodeId),
    /// A constant, as in `mul(%x, 2.0)`.
    Scalar(Scalar),
}

/// What a node does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A graph input: the next tensor handed to the compiled graph. `strides` records the layout
    /// of the tensor it was traced with, which the compiled code may rely on.
    Placeholder {
        /// Strides, in elements, of the input the graph was traced with.
        strides: Vec<usize>,
    },
    /// An op applied to arguments.
    Call {
        /// The op.
        op: Op,
        /// Its operands, in order.
        args: Vec<Arg>,
    },
}

/// One node: its kind, the metadata of the value it produces and where in the learner's code it
/// came from.
#[derive(Clone, Debug)]
pub struct Node {
    /// A unique, readable name (`add`, `add_1`, `fc1_weight`).
    pub name: String,
    /// Placeholder or op call.
    pub kind: NodeKind,
    /// Shape, dtype and device of the value this node produces.
    pub meta: TensorMeta,
    /// The learner's line that produced the node (`None` for placeholders).
    pub location: Option<SourceLocation>,
}

impl Node {
    /// The op of a call node.
    pub fn op(&self) -> Option<&Op> {
        match &self.kind {
            NodeKind::Call { op, .. } => Some(op),
            NodeKind::Placeholder { .. } => None,
        }
    }

    /// The arguments of a call node (empty for a placeholder).
    pub fn args(&self) -> &[Arg] {
        match &self.kind {
            NodeKind::Call { args, .. } => args,
            NodeKind::Placeholder { .. } => &[],
        }
    }

    /// The nodes this node reads.
    pub fn inputs(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.args().iter().filter_map(|a| match a {
            Arg::Node(id) => Some(*id),
            Arg::Scalar(_) => None,
        })
    }
}

/// A dataflow graph: placeholders and op calls in execution order, and the values it returns.
///
/// Equality and hashing are structural: two graphs are equal when they have the same ops, args,
/// metadata and outputs, whatever their node names and source locations. That is what makes a
/// graph usable as a compile-cache key.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    placeholders: Vec<NodeId>,
    outputs: Vec<NodeId>,
    name_counts: HashMap<String, usize>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Graph::default()
    }

    /// Every node, placeholders first among their peers, in execution order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    /// Ids of all nodes in order.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + use<> {
        (0..self.nodes.len()).map(NodeId)
    }

    /// The placeholders, in the order inputs are passed.
    pub fn placeholders(&self) -> &[NodeId] {
        &self.placeholders
    }

    /// The nodes whose values the graph returns, in order.
    pub fn outputs(&self) -> &[NodeId] {
        &self.outputs
    }

    /// Number of op-call nodes (what `explain` reports as the op count).
    pub fn op_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.op().is_some()).count()
    }

    /// The nodes that read `id`, in order.
    pub fn users(&self, id: NodeId) -> Vec<NodeId> {
        self.ids().filter(|&u| self.node(u).inputs().any(|i| i == id)).collect()
    }

    /// A name not used yet in this graph, derived from `base` (`add`, then `add_1`, ...).
    fn unique_name(&mut self, base: &str) -> String {
        let base: String = base.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let count = self.name_counts.entry(base.clone()).or_insert(0);
        let name = if *count == 0 { base.clone() } else { format!("{base}_{count}") };
        *count += 1;
        name
    }

    /// Appends a graph input with this metadata; `name` is made unique and identifier-safe.
    pub fn add_placeholder(&mut self, name: &str, meta: TensorMeta, strides: Vec<usize>) -> NodeId {
        let name = self.unique_name(name);
        let id = NodeId(self.nodes.len());
        self.nodes.push(Node { name, kind: NodeKind::Placeholder { strides }, meta, location: None });
        self.placeholders.push(id);
        id
    }

    /// Appends a call of `op` on `args`, inferring the output's metadata (and checking the op's
    /// shape and device rules). Every node argument must already be in the graph.
    pub fn add_call(&mut self, op: Op, args: Vec<Arg>, location: SourceLocation) -> Result<NodeId> {
        let mut shapes = Vec::with_capacity(args.len());
        let mut device: Option<Device> = None;
        for arg in &args {
            match arg {
                Arg::Scalar(_) => shapes.push(None),
                Arg::Node(id) => {
                    let Some(node) = self.nodes.get(id.0) else {
                        return Err(Error::InvalidArgument {
                            op: op.name(),
                            message: format!("argument {id:?} is not a node of this graph"),
                            location,
                        });
                    };
                    match device {
                        Some(d) if d != node.meta.device => {
                            return Err(Error::DeviceMismatch {
                                op: op.name(),
                                devices: format!("{d} and {}", node.meta.device),
                                location,
                            });
                        }
                        _ => device = Some(node.meta.device),
                    }
                    shapes.push(Some(node.meta.shape.as_slice()));
                }
            }
        }
        let shape = op.infer_shape(&shapes, location)?;
        let meta = TensorMeta { shape, dtype: DType::F32, device: device.unwrap_or_default() };
        let name = self.unique_name(op.name());
        let id = NodeId(self.nodes.len());
        self.nodes.push(Node { name, kind: NodeKind::Call { op, args }, meta, location: Some(location) });
        Ok(id)
    }

    /// Sets the values the graph returns.
    pub fn set_outputs(&mut self, outputs: Vec<NodeId>) {
        self.outputs = outputs;
    }
}

impl PartialEq for Graph {
    fn eq(&self, other: &Self) -> bool {
        self.outputs == other.outputs
            && self.nodes.len() == other.nodes.len()
            && self.nodes.iter().zip(&other.nodes).all(|(a, b)| a.kind == b.kind && a.meta == b.meta)
    }
}

impl Eq for Graph {}

impl Hash for Graph {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.outputs.hash(state);
        for node in &self.nodes {
            node.kind.hash(state);
            node.meta.hash(state);
        }
    }
}
