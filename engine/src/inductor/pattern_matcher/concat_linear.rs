//! Parallel linears into one GEMM, the analogue of Inductor's `concat_linear` pattern
//! (`fx_passes/freezing_patterns.py`): projections of one input by weights that are graph inputs
//! (attention's query, key and value projections) become one matmul by the weights joined along
//! their output dim, whose result is sliced back into the projections. The slices are views, so
//! what reads a projection (a reshape into heads, the attention kernel) reads the wide result in
//! place.
//!
//! PyTorch folds the joined weight into a constant once, when it freezes a model's parameters.
//! The engine has no frozen parameters (a weight is a graph input like any other), so the join is
//! a `cat` node: at d_model = 768 it moves 2 x 3 x 768 x 768 elements (a few microseconds on a
//! GPU) and buys one GEMM three times as wide, which keeps a GPU's multiprocessors busier than
//! three narrow ones in turn. The call plan keeps the joined buffer across calls and runs the
//! `cat` again only after a tensor was written (`runtime::kept`), so the join costs once per
//! optimizer step, not once per call.

use std::collections::HashMap;

use super::{Match, Pattern, any, call, commutative, copy_call, finish_copy, op_is, self_contained, start_copy};
use crate::error::Result;
use crate::fx::{Arg, Graph, NodeId, NodeKind};
use crate::op::{BinaryOp, Op};

/// One projection found in the graph: `x @ weight^T (+ bias)` as linear's decomposition records it.
struct Projection {
    /// The value it produces (the add when biased, else the matmul).
    root: NodeId,
    /// Its nodes, the root first.
    nodes: Vec<NodeId>,
    x: NodeId,
    weight: NodeId,
    bias: Option<NodeId>,
}

// ANCHOR: projection_pattern
/// `matmul(x, permute(w, [1, 0]))`, plus a bias when `biased`.
fn projection_pattern(biased: bool) -> Pattern {
    let transpose = call("permute", |n| op_is(n, &Op::Permute { dims: vec![1, 0] }), [any("w")]);
    let product = call("matmul", |n| op_is(n, &Op::Matmul), [any("x"), transpose]);
    if biased { commutative("add", |n| op_is(n, &Op::Binary(BinaryOp::Add)), [product, any("b")]) } else { product }
}
// ANCHOR_END: projection_pattern

/// Whether a match is a projection this pass can join: its weight is a `[out, in]` graph input
/// and its bias, if any, a `[out]` graph input (so that both can be joined with their neighbours').
fn joinable(graph: &Graph, found: &Match) -> bool {
    let input = |id: NodeId| matches!(graph.node(id).kind, NodeKind::Placeholder { .. });
    let Some(w) = found.value("w").filter(|&w| input(w) && graph.node(w).meta.shape.len() == 2) else {
        return false;
    };
    found.value("b").is_none_or(|b| input(b) && graph.node(b).meta.shape == [graph.node(w).meta.shape[0]])
}

/// Every joinable projection of `graph`, in graph order. Nodes are visited from the last, so a
/// biased projection is found before the matmul inside it.
fn projections(graph: &Graph) -> Vec<Projection> {
    let patterns = [projection_pattern(true), projection_pattern(false)];
    let mut taken = vec![false; graph.nodes().len()];
    let mut found = Vec::new();
    for id in graph.ids().collect::<Vec<_>>().into_iter().rev() {
        for pattern in &patterns {
            let mut m = Match::default();
            let fits = !taken[id.index()]
                && pattern.match_arg(graph, &Arg::Node(id), &mut m)
                && self_contained(graph, &m)
                && joinable(graph, &m)
                && m.interior.iter().all(|n| !taken[n.index()]);
            if fits {
                m.interior.iter().for_each(|n| taken[n.index()] = true);
                let (x, weight) = (m.value("x").expect("bound"), m.value("w").expect("bound"));
                found.push(Projection { root: id, nodes: m.interior.clone(), x, weight, bias: m.value("b") });
                break;
            }
        }
    }
    found.reverse();
    found
}

/// `graph` with every group of two or more projections of one input (all biased or all not) made
/// one matmul; one line per group joined is added to `matched` (`ENGINE_LOGS=fusion` prints them).
pub fn concat_linears(graph: &Graph, matched: &mut Vec<String>) -> Result<Graph> {
    let mut groups: Vec<Vec<Projection>> = Vec::new();
    let mut group_of: HashMap<(NodeId, bool), usize> = HashMap::new();
    for p in projections(graph) {
        let g = *group_of.entry((p.x, p.bias.is_some())).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(p);
    }
    groups.retain(|g| g.len() >= 2);
    if groups.is_empty() {
        return Ok(graph.clone());
    }
    // The first projection of a group (in graph order) stands for the group: every input the
    // joined matmul reads (x, and the weights and biases, which are graph inputs) exists there.
    // The other projections' nodes vanish; self_contained vouched that nothing else reads them.
    let mut first_of: HashMap<NodeId, usize> = HashMap::new();
    let mut vanishes = vec![false; graph.nodes().len()];
    for (g, group) in groups.iter().enumerate() {
        first_of.insert(group[0].root, g);
        group.iter().flat_map(|p| &p.nodes).for_each(|n| vanishes[n.index()] = true);
    }
    let (mut out, mut map) = start_copy(graph);
    for id in graph.ids() {
        if let Some(&g) = first_of.get(&id) {
            matched.push(join(&mut out, graph, &groups[g], &mut map)?);
        } else if graph.node(id).op().is_some() && !vanishes[id.index()] {
            map[id.index()] = Some(copy_call(&mut out, graph, id, &map)?);
        }
    }
    finish_copy(out, graph, &map)
}

/// Appends the joined projection of `group` to `out` and maps each projection to its slice;
/// returns the line that says so.
fn join(out: &mut Graph, graph: &Graph, group: &[Projection], map: &mut [Option<NodeId>]) -> Result<String> {
    let root = graph.node(group[0].root);
    let location = root.location.expect("call nodes have a location");
    let new = |id: NodeId| Arg::Node(map[id.index()].expect("inputs come first"));
    let weights = out.add_call(Op::Cat { dim: 0 }, group.iter().map(|p| new(p.weight)).collect(), location)?;
    let transposed = out.add_call(Op::Permute { dims: vec![1, 0] }, vec![Arg::Node(weights)], location)?;
    // The joined bias comes before the product, so that the add follows the matmul it reads:
    // lowering folds a bias into the GEMM just lowered before it (see `gemm_epilogue`).
    let biases: Option<Vec<Arg>> = group.iter().map(|p| p.bias.map(new)).collect();
    let bias = biases.map(|biases| out.add_call(Op::Cat { dim: 0 }, biases, location)).transpose()?;
    let mut joined = out.add_call(Op::Matmul, vec![new(group[0].x), Arg::Node(transposed)], location)?;
    if let Some(bias) = bias {
        joined = out.add_call(Op::Binary(BinaryOp::Add), vec![Arg::Node(joined), Arg::Node(bias)], location)?;
    }
    let last = out.node(joined).meta.shape.len() - 1;
    let mut start = 0;
    for p in group {
        let end = start + graph.node(p.weight).meta.shape[0];
        let slice = Op::Slice { dim: last, start, end, step: 1 };
        map[p.root.index()] = Some(out.add_call(slice, vec![Arg::Node(joined)], location)?);
        start = end;
    }
    let names: Vec<&str> = group.iter().map(|p| graph.node(p.weight).name.as_str()).collect();
    Ok(format!(
        "pattern `concat linear` matched at {} (%{}): {} projections of %{} -> one matmul by cat({})",
        location.short(),
        root.name,
        group.len(),
        graph.node(group[0].x).name,
        names.join(", ")
    ))
}
