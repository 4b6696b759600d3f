//! Splitting the joint graph into a forward and a backward graph, the analogue of PyTorch's
//! `min_cut_rematerialization_partition` (`torch/_functorch/partitioners.py`).
//!
//! Every value the backward reads was either **saved** by the forward (it stays in memory between
//! the two passes) or is **recomputed** by the backward from saved values. Saving costs memory
//! (and the bytes written and read back); recomputing costs work, which for a cheap pointwise op
//! fused into a backward kernel is nearly free. The partitioner saves the fewest bytes it can,
//! subject to rules on what may be recomputed:
//!
//! - primals (the forward's inputs) are never computed, only saved;
//! - of what the forward computes for its outputs, compute-intensive ops (matmul, attention),
//!   `cat` and custom ops are never recomputed (*banned*), as PyTorch keeps them off its list of
//!   recomputable ops (what only the backward needs is computed there, whatever its op);
//! - a reduction whose output is at most a quarter of its input is not recomputed either: saving
//!   its small result is cheaper than reading its input again (PyTorch's rule for reductions);
//! - pointwise ops and views may be recomputed.
//!
//! That choice is a minimum cut. Each node `n` becomes two vertices joined by an edge `n_in ->
//! n_out` whose capacity is the node's size in bytes; each use of `n` by `u` is an edge `n_out ->
//! u_in` that may not be cut. The source feeds the primals and the banned nodes (they must come
//! from the forward); every node of the backward proper (computed from the tangents) drains into
//! the sink. A cut separates what the forward computes from what the backward computes, and the
//! nodes whose `in -> out` edge it cuts are exactly the values saved: the minimum cut saves the
//! fewest bytes. Of several minimum cuts this takes the one nearest the source (a primal rather
//! than a view of it).
//!
//! PyTorch adds heuristics on top (a node's weight grows with its distance from the backward,
//! recomputation is banned for values the backward must materialize anyway, or used far apart);
//! the engine keeps the rule that the course teaches: fewest bytes, cheap ops recomputed.

use std::collections::BTreeSet;
use std::fmt;

use super::joint::JointGraph;
use super::min_cut::{INFINITE, Network};
use crate::error::{Error, Result};
use crate::fx::{Arg, Graph, NodeId, NodeKind};
use crate::layout::contiguous_strides;
use crate::op::{Op, OpClass};
use crate::tensor::TensorMeta;

/// The joint graph split in two, with the calling convention between the halves.
#[derive(Clone, Debug)]
pub struct Partition {
    /// The joint graph it came from.
    pub joint: JointGraph,
    /// Placeholders: the primals. Outputs: the forward's outputs, then the saved values.
    pub forward: Graph,
    /// Placeholders: the saved values, then the tangents of the differentiable outputs. Outputs:
    /// the gradients of the primals that get one, in primal order.
    pub backward: Graph,
    /// What the forward saves for the backward.
    pub saved: SavedTensors,
}

/// The values saved between the passes, in the order the forward returns them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SavedTensors {
    /// One entry per saved value.
    pub tensors: Vec<SavedTensor>,
}

/// One saved value.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedTensor {
    /// Its node's name in the joint graph.
    pub name: String,
    /// Shape, dtype, device.
    pub meta: TensorMeta,
    /// Whether it is a primal (an input of the forward, kept alive rather than computed).
    pub is_input: bool,
}

impl SavedTensor {
    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.meta.shape.iter().product::<usize>() * self.meta.dtype.size_in_bytes()
    }
}

impl SavedTensors {
    /// The bytes of every saved value.
    pub fn total_bytes(&self) -> usize {
        self.tensors.iter().map(SavedTensor::bytes).sum()
    }

    /// The bytes of the saved values that are not inputs: the activations the forward keeps.
    pub fn activation_bytes(&self) -> usize {
        self.tensors.iter().filter(|t| !t.is_input).map(SavedTensor::bytes).sum()
    }
}

/// `1536 B`, `12.0 KiB`, `4.0 MiB`.
fn human(bytes: usize) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} B"),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        b if b < 1 << 30 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b => format!("{:.1} GiB", b as f64 / (1 << 30) as f64),
    }
}

impl fmt::Display for SavedTensors {
    /// One line per saved value and a total:
    ///
    /// ```text
    /// saved for backward: 2 tensors, 40 B (8 B of activations)
    ///   x     f32[2, 4]  32 B  input
    ///   relu  f32[2]      8 B
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.tensors.len();
        writeln!(
            f,
            "saved for backward: {n} tensor{}, {} ({} of activations)",
            if n == 1 { "" } else { "s" },
            human(self.total_bytes()),
            human(self.activation_bytes())
        )?;
        let metas: Vec<String> = self.tensors.iter().map(|t| format!("{}{:?}", t.meta.dtype, t.meta.shape)).collect();
        let name_width = self.tensors.iter().map(|t| t.name.len()).max().unwrap_or(0);
        let meta_width = metas.iter().map(String::len).max().unwrap_or(0);
        for (t, meta) in self.tensors.iter().zip(&metas) {
            let kind = if t.is_input { "  input" } else { "" };
            writeln!(f, "  {:name_width$}  {meta:meta_width$}  {:>9}{kind}", t.name, human(t.bytes()))?;
        }
        Ok(())
    }
}

/// Why the partitioner will not recompute node `id` of `graph` in the backward, or `None` when it
/// may (PyTorch's `should_ban_recomputation`).
pub fn ban_reason(graph: &Graph, id: NodeId) -> Option<&'static str> {
    let node = graph.node(id);
    let op = node.op()?;
    match op.class() {
        OpClass::Pointwise if matches!(op, Op::Custom(_)) => Some("a custom op: not on the recomputable list"),
        OpClass::Pointwise | OpClass::View => None,
        OpClass::Reduction => {
            let input_bytes: usize = node.inputs().map(|i| bytes(&graph.node(i).meta)).sum();
            (bytes(&node.meta) * 4 <= input_bytes)
                .then_some("a reduction to a quarter of its input or less: cheaper to save")
        }
        OpClass::Extern if matches!(op, Op::Cat { .. }) => Some("cat: not on the recomputable list"),
        OpClass::Extern => Some("compute-intensive (matmul, attention): never recomputed"),
        OpClass::Composite | OpClass::HigherOrder => Some("not a primitive op"),
        OpClass::Mutation => Some("writes memory in place"),
    }
}

fn bytes(meta: &TensorMeta) -> usize {
    meta.shape.iter().product::<usize>() * meta.dtype.size_in_bytes()
}

/// The nodes that depend on a tangent (the backward proper), and the gradient outputs.
fn backward_nodes(joint: &JointGraph) -> Vec<bool> {
    let graph = &joint.graph;
    let mut in_backward = vec![false; graph.nodes().len()];
    for &t in joint.tangents() {
        in_backward[t.index()] = true;
    }
    for id in graph.ids() {
        if graph.node(id).inputs().any(|i| in_backward[i.index()]) {
            in_backward[id.index()] = true;
        }
    }
    for g in joint.gradient_nodes() {
        if !joint.graph.placeholders()[..joint.primals].contains(&g) {
            in_backward[g.index()] = true;
        }
    }
    in_backward
}

/// The nodes the forward outputs need, computed from the primals.
fn forward_nodes(joint: &JointGraph) -> Vec<bool> {
    let graph = &joint.graph;
    let mut needed = vec![false; graph.nodes().len()];
    let mut stack: Vec<NodeId> = graph.outputs()[..joint.forward_outputs].to_vec();
    while let Some(id) = stack.pop() {
        if !std::mem::replace(&mut needed[id.index()], true) {
            stack.extend(graph.node(id).inputs());
        }
    }
    needed
}

/// The values to save: the nodes cut by a minimum cut of the joint graph's flow network.
fn choose_saved(joint: &JointGraph) -> Vec<NodeId> {
    let graph = &joint.graph;
    let n = graph.nodes().len();
    let (in_backward, in_forward) = (backward_nodes(joint), forward_nodes(joint));
    if !in_backward.iter().any(|&b| b) {
        return Vec::new();
    }
    let primals = &graph.placeholders()[..joint.primals];
    let (source, sink) = (2 * n, 2 * n + 1);
    let (vin, vout) = (|id: NodeId| 2 * id.index(), |id: NodeId| 2 * id.index() + 1);
    let mut network = Network::new(2 * n + 2);
    for id in graph.ids() {
        let is_primal = primals.contains(&id);
        if in_backward[id.index()] && !is_primal {
            network.add_edge(vin(id), sink, INFINITE);
            continue;
        }
        if is_primal || (in_forward[id.index()] && ban_reason(graph, id).is_some()) {
            network.add_edge(source, vin(id), INFINITE);
        }
        network.add_edge(vin(id), vout(id), bytes(&graph.node(id).meta) as u64);
        for user in graph.users(id) {
            network.add_edge(vout(id), vin(user), INFINITE);
        }
    }
    let (_, source_side) = network.min_cut(source, sink);
    graph.ids().filter(|&id| source_side[vin(id)] && !source_side[vout(id)]).collect()
}

/// A graph of the joint graph's nodes that `outputs` need, computed from `inputs` (each becomes a
/// placeholder, in order, with its joint name; `contiguous[i]` declares input `i` dense rather
/// than with its joint layout).
fn extract(joint: &Graph, inputs: &[NodeId], contiguous: &[bool], outputs: &[NodeId], what: &str) -> Result<Graph> {
    let mut needed = vec![false; joint.nodes().len()];
    let available: BTreeSet<NodeId> = inputs.iter().copied().collect();
    let mut stack: Vec<NodeId> = outputs.to_vec();
    while let Some(id) = stack.pop() {
        if available.contains(&id) || std::mem::replace(&mut needed[id.index()], true) {
            continue;
        }
        if matches!(joint.node(id).kind, NodeKind::Placeholder { .. }) {
            return Err(Error::Backend {
                backend: "aot".into(),
                message: format!("the {what} graph needs `{}`, which it is not given", joint.node(id).name),
            });
        }
        stack.extend(joint.node(id).inputs());
    }
    let mut graph = Graph::new();
    let mut mapped: Vec<Option<NodeId>> = vec![None; joint.nodes().len()];
    for (&id, &dense) in inputs.iter().zip(contiguous) {
        let node = joint.node(id);
        let strides = match &node.kind {
            NodeKind::Placeholder { strides } if !dense => strides.clone(),
            _ => contiguous_strides(&node.meta.shape),
        };
        mapped[id.index()] = Some(graph.add_placeholder(&node.name, node.meta.clone(), strides));
    }
    for id in joint.ids().filter(|id| needed[id.index()]) {
        let node = joint.node(id);
        let NodeKind::Call { op, args } = &node.kind else { unreachable!("placeholders were checked above") };
        let args = args
            .iter()
            .map(|a| match a {
                Arg::Node(i) => Arg::Node(mapped[i.index()].expect("inputs come first")),
                Arg::Scalar(s) => Arg::Scalar(*s),
            })
            .collect();
        let location = node.location.expect("call nodes have a location");
        mapped[id.index()] = Some(graph.add_call(op.clone(), args, location)?);
    }
    graph.set_outputs(outputs.iter().map(|o| mapped[o.index()].expect("outputs were computed")).collect())?;
    Ok(graph)
}

/// Splits `joint` into forward and backward graphs, saving what a minimum cut chooses.
pub fn partition(joint: JointGraph) -> Result<Partition> {
    crate::wires::trip(crate::wires::Wire::Partitioner);
    let graph = &joint.graph;
    let saved = choose_saved(&joint);
    let primals = graph.placeholders()[..joint.primals].to_vec();
    let mut forward_outputs = graph.outputs()[..joint.forward_outputs].to_vec();
    forward_outputs.extend(&saved);
    let forward = extract(graph, &primals, &vec![false; primals.len()], &forward_outputs, "forward")?;
    let tangents: Vec<NodeId> =
        joint.tangents().iter().zip(&joint.differentiable).filter(|(_, d)| **d).map(|(&t, _)| t).collect();
    let backward_inputs: Vec<NodeId> = saved.iter().chain(&tangents).copied().collect();
    let backward =
        extract(graph, &backward_inputs, &vec![true; backward_inputs.len()], &joint.gradient_nodes(), "backward")?;
    let saved = SavedTensors {
        tensors: saved
            .iter()
            .map(|&id| SavedTensor {
                name: graph.node(id).name.clone(),
                meta: graph.node(id).meta.clone(),
                is_input: primals.contains(&id),
            })
            .collect(),
    };
    Ok(Partition { joint, forward, backward, saved })
}
