//! Nodes and graphs, the analogue of `torch.fx.Graph` and `torch.fx.Node`.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};

use rustc_hash::FxHashMap;

mod shape_env;

use super::symbolic::{SymInt, SymShape};
use crate::device::Device;
use crate::error::{Error, Result, SourceLocation};
use crate::layout::contiguous_strides;
use crate::op::Op;
use crate::scalar::Scalar;
use crate::tensor::TensorMeta;
use shape_env::ShapeEnv;
pub use shape_env::{SizeMismatch, Specialization, SymbolInfo};

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
    /// Shape, dtype and device of the value this node produces, with the sizes it was traced
    /// with (for a dynamic graph: the sizes of the call that traced it).
    pub meta: TensorMeta,
    /// The shape with symbolic sizes (`[s0, 16]`): equal to `meta.shape` when the graph is
    /// static. Compiled code for a dynamic graph evaluates it for each call's sizes.
    pub sym_shape: SymShape,
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
/// symbolic shapes, dtypes, devices and outputs, whatever their node names, source locations and
/// the sizes a dynamic graph was traced with. That is what makes a graph usable as a compile-cache
/// key, and why one dynamic graph serves every batch size.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub(super) nodes: Vec<Node>,
    placeholders: Vec<NodeId>,
    outputs: Vec<NodeId>,
    name_counts: FxHashMap<String, usize>,
    pub(super) shape_env: ShapeEnv,
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
        crate::wires::trip(crate::wires::Wire::GraphOpCount);
        self.calls()
    }

    /// [`Graph::op_count`], for the engine's own use.
    pub(crate) fn calls(&self) -> usize {
        self.nodes.iter().filter(|n| n.op().is_some()).count()
    }

    /// The nodes that read `id`, in order.
    pub fn users(&self, id: NodeId) -> Vec<NodeId> {
        self.ids().filter(|&u| self.node(u).inputs().any(|i| i == id)).collect()
    }

    /// A name not used yet in this graph, derived from `base` (`add`, then `add_1`, ...), each
    /// character through [`identifier_char`].
    fn unique_name(&mut self, base: &str) -> String {
        // Names are made for every traced node on every call, so the common case (an op name,
        // already an identifier, seen before) allocates only the returned name.
        let base: Cow<str> = if base.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            Cow::Borrowed(base)
        } else {
            Cow::Owned(base.chars().map(identifier_char).collect())
        };
        let count = match self.name_counts.get_mut(base.as_ref()) {
            Some(count) => count,
            None => self.name_counts.entry(base.to_string()).or_insert(0),
        };
        let mut name = base.into_owned();
        if *count > 0 {
            name.push('_');
            push_decimal(&mut name, *count);
        }
        *count += 1;
        name
    }

    /// Appends a graph input with this metadata; `name` is made unique and identifier-safe.
    pub fn add_placeholder(&mut self, name: &str, meta: TensorMeta, strides: Vec<usize>) -> NodeId {
        let name = self.unique_name(name);
        let id = NodeId(self.nodes.len());
        let sym_shape = SymShape::from_static(&meta.shape);
        self.nodes.push(Node { name, kind: NodeKind::Placeholder { strides }, meta, sym_shape, location: None });
        self.placeholders.push(id);
        id
    }

    /// Appends a graph input whose sizes at `dims` are dynamic: each gets a new symbol (`s0`,
    /// `s1`, ...). As in PyTorch, sizes 0 and 1 stay static (broadcasting treats them
    /// specially), and so does every size of an input that is not contiguous. Returns the
    /// placeholder; its [`Node::sym_shape`] shows which sizes became symbols. (PyTorch's
    /// `ShapeEnv.create_symbolic_sizes_strides_storage_offset`.)
    pub fn add_dynamic_placeholder(
        &mut self,
        name: &str,
        meta: TensorMeta,
        strides: Vec<usize>,
        dims: &[usize],
    ) -> NodeId {
        crate::wires::trip(crate::wires::Wire::AddDynamicPlaceholder);
        self.add_symbolic_placeholder(name, meta, strides, dims)
    }

    /// [`Graph::add_dynamic_placeholder`], for the engine's own use (a graph re-traced with dynamic
    /// sizes), past its trip wire.
    pub(crate) fn add_symbolic_placeholder(
        &mut self,
        name: &str,
        meta: TensorMeta,
        strides: Vec<usize>,
        dims: &[usize],
    ) -> NodeId {
        let contiguous = strides == contiguous_strides(&meta.shape);
        let id = self.add_placeholder(name, meta, strides);
        for &dim in dims {
            match self.nodes[id.0].meta.shape.get(dim) {
                Some(&hint) if contiguous && hint >= 2 => {
                    let symbol = self.new_symbol(id, dim, hint);
                    self.nodes[id.0].sym_shape.0[dim] = SymInt::symbol(symbol);
                }
                _ => {}
            }
        }
        id
    }

    /// Appends a copy of every placeholder of `other`, with its symbolic sizes and symbols: how a
    /// graph re-traced from another one (AOT decomposition) stays exactly as dynamic. Call it on
    /// a graph that has no placeholders yet; returns the new placeholders in order.
    pub fn add_placeholders_like(&mut self, other: &Graph) -> Vec<NodeId> {
        debug_assert!(self.placeholders.is_empty(), "placeholders are copied into an empty graph");
        let ids: Vec<NodeId> = other
            .placeholders()
            .iter()
            .map(|&p| {
                let node = other.node(p);
                let strides = match &node.kind {
                    NodeKind::Placeholder { strides } => strides.clone(),
                    NodeKind::Call { .. } => unreachable!("placeholders() lists placeholders"),
                };
                let id = self.add_placeholder(&node.name, node.meta.clone(), strides);
                self.nodes[id.0].sym_shape = node.sym_shape.clone();
                id
            })
            .collect();
        for (symbol, info) in other.symbols() {
            let index = other
                .placeholders()
                .iter()
                .position(|&p| p == info.placeholder)
                .expect("symbols come from placeholders");
            self.adopt_symbol(symbol, SymbolInfo { placeholder: ids[index], ..info.clone() });
        }
        ids
    }

    /// Appends a call of `op` on `args`, inferring the output's metadata (and checking the op's
    /// shape and device rules). Every node argument must already be in the graph.
    pub fn add_call(&mut self, op: Op, args: Vec<Arg>, location: SourceLocation) -> Result<NodeId> {
        let mut shapes = Vec::with_capacity(args.len());
        let mut dtypes = Vec::with_capacity(args.len());
        let mut device: Option<Device> = None;
        for arg in &args {
            match arg {
                Arg::Scalar(_) => {
                    shapes.push(None);
                    dtypes.push(None);
                }
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
                    dtypes.push(Some((node.meta.dtype, node.meta.shape.len())));
                }
            }
        }
        let shape = op.infer_shape(&shapes, location)?;
        let dtype = op.infer_dtype(&dtypes, location)?;
        let all_static = args.iter().all(|a| match a {
            Arg::Node(id) => self.nodes[id.0].sym_shape.is_static(),
            Arg::Scalar(_) => true,
        });
        let sym_shape = if all_static {
            SymShape::from_static(&shape)
        } else {
            let sym_inputs: Vec<Option<SymShape>> = args
                .iter()
                .map(|a| match a {
                    Arg::Node(id) => Some(self.nodes[id.0].sym_shape.clone()),
                    Arg::Scalar(_) => None,
                })
                .collect();
            self.sym_output_shape(&op, &sym_inputs, &shape, location)
        };
        let meta = TensorMeta { shape, dtype, device: device.unwrap_or_default() };
        // Like FX, a node is named after its target: `add`, or `soft_clip` for `mylib::soft_clip`.
        let name = self.unique_name(op.name().rsplit(':').next().unwrap_or_default());
        let id = NodeId(self.nodes.len());
        self.nodes.push(Node { name, kind: NodeKind::Call { op, args }, meta, sym_shape, location: Some(location) });
        Ok(id)
    }

    /// Sets the values the graph returns; an id that is not a node of this graph is an error
    /// (naming the caller's line), not a panic when the graph is later run or compiled.
    #[track_caller]
    pub fn set_outputs(&mut self, outputs: Vec<NodeId>) -> Result<()> {
        if let Some(bad) = outputs.iter().find(|id| id.0 >= self.nodes.len()) {
            return Err(Error::InvalidArgument {
                op: "set_outputs",
                message: format!("output {bad:?} is not a node of this graph ({} nodes)", self.nodes.len()),
                location: SourceLocation::caller(),
            });
        }
        self.outputs = outputs;
        Ok(())
    }
}

/// Appends `n` in decimal (cheaper than `format!`, which this per-node path would pay for).
fn push_decimal(s: &mut String, n: usize) {
    if n >= 10 {
        push_decimal(s, n / 10);
    }
    s.push(char::from(b'0' + (n % 10) as u8));
}

impl Node {
    /// Whether two nodes do the same thing on values of the same symbolic shape. Sizes that a
    /// dynamic graph only knows from its trace (a reshape's target, a dynamic input's strides)
    /// are compared through the symbolic shape instead.
    pub(crate) fn same_structure(&self, other: &Node) -> bool {
        let same_kind = match (&self.kind, &other.kind) {
            (NodeKind::Call { op: a, args: x }, NodeKind::Call { op: b, args: y }) => {
                x == y
                    && match (a, b) {
                        (Op::Reshape { .. }, Op::Reshape { .. }) | (Op::Expand { .. }, Op::Expand { .. }) => true,
                        _ => a == b,
                    }
            }
            // A dynamic input is contiguous by construction; a static one keeps its exact strides.
            (NodeKind::Placeholder { strides: a }, NodeKind::Placeholder { strides: b }) => {
                !self.sym_shape.is_static() || a == b
            }
            _ => false,
        };
        same_kind
            && self.sym_shape == other.sym_shape
            && self.meta.dtype == other.meta.dtype
            && self.meta.device == other.meta.device
    }
}

impl PartialEq for Graph {
    fn eq(&self, other: &Self) -> bool {
        self.outputs == other.outputs
            && self.placeholders == other.placeholders
            && self.nodes.len() == other.nodes.len()
            && self.nodes.iter().zip(&other.nodes).all(|(a, b)| a.same_structure(b))
    }
}

impl Eq for Graph {}

impl Hash for Graph {
    /// Hashes a part of what [`PartialEq`] compares, so equal graphs hash equally.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.outputs.hash(state);
        for node in &self.nodes {
            node.op().map(Op::name).hash(state);
            node.args().hash(state);
            node.sym_shape.hash(state);
            node.meta.dtype.hash(state);
            node.meta.device.hash(state);
        }
    }
}

/// The character a node name keeps for `c` of the name it was asked for: names are identifiers,
/// so anything but an ASCII letter, digit or `_` becomes `_`.
pub(crate) fn identifier_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }
}
