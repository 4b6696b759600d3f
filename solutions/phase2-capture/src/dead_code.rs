//! Exercise `dead_code`: a graph pass that removes the nodes no output needs.

use engine::fx::{Arg, Graph, NodeId, NodeKind};
use engine::{Result, SourceLocation};

// ANCHOR: dead_code
/// **Exercise `dead_code`.** The same graph without the op calls whose values no output needs,
/// directly or through other nodes. Keep every placeholder (the graph's inputs must not change)
/// and the outputs in order. Build the result with [`Graph::new`],
/// [`Graph::add_placeholders_like`] (every input at once, with its symbolic sizes: a dynamic
/// `f32[s0, 8]` input must not become `f32[4, 8]`), [`Graph::add_call`] and
/// [`Graph::set_outputs`]; node ids change, so keep a map from old ids to new ones.
///
/// Book: `book/src/phase2/exercises.md`, section "dead_code". Check: `cargo grader check phase2`.
pub fn eliminate_dead_code(graph: &Graph) -> Result<Graph> {
    // ANCHOR: solution
    let ids: Vec<NodeId> = graph.ids().collect();
    let mut live = vec![false; ids.len()];
    for &output in graph.outputs() {
        live[output.index()] = true;
    }
    // Nodes only read earlier nodes, so one backward sweep finds everything the outputs need.
    for &id in ids.iter().rev() {
        if live[id.index()] {
            for input in graph.node(id).inputs() {
                live[input.index()] = true;
            }
        }
    }
    let mut pass = Graph::new();
    let mut new_ids: Vec<Option<NodeId>> = vec![None; ids.len()];
    // The inputs, copied with their symbolic sizes, so that a dynamic graph stays dynamic.
    for (old, new) in graph.placeholders().iter().zip(pass.add_placeholders_like(graph)) {
        new_ids[old.index()] = Some(new);
    }
    for &id in &ids {
        let node = graph.node(id);
        new_ids[id.index()] = match &node.kind {
            NodeKind::Placeholder { .. } => continue,
            NodeKind::Call { op, args } if live[id.index()] => {
                let args = args
                    .iter()
                    .map(|a| match a {
                        Arg::Node(input) => Arg::Node(new_ids[input.index()].expect("inputs come first and are live")),
                        Arg::Scalar(s) => Arg::Scalar(*s),
                    })
                    .collect();
                Some(pass.add_call(op.clone(), args, node.location.unwrap_or(SourceLocation::caller()))?)
            }
            NodeKind::Call { .. } => None,
        };
    }
    pass.set_outputs(graph.outputs().iter().map(|o| new_ids[o.index()].expect("outputs are live")).collect())?;
    Ok(pass)
    // ANCHOR_END: solution
}
// ANCHOR_END: dead_code
