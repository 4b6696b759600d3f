//! Exercise `cse` (stretch): a graph pass that computes each distinct expression once.

use std::collections::HashMap;

use engine::fx::{Arg, Graph, NodeId, NodeKind};
use engine::op::Op;
use engine::{Result, SourceLocation};

// ANCHOR: cse
/// **Exercise `cse` (stretch).** The same graph with common subexpressions merged: a call node
/// with the same op and the same arguments as an earlier one is not added again; its users read
/// the earlier node instead. Placeholders all stay (two inputs are different values even when
/// they look alike), copied with [`Graph::add_placeholders_like`] so that a dynamic graph stays
/// dynamic. Every op of the engine is pure, so merging never changes an output.
///
/// Book: `book/src/phase2/exercises.md`, section "cse". Check: `cargo grader check phase2`.
pub fn eliminate_common_subexpressions(graph: &Graph) -> Result<Graph> {
    // ANCHOR: solution
    let mut pass = Graph::new();
    // The inputs, copied with their symbolic sizes, so that a dynamic graph stays dynamic.
    let mut new_ids: HashMap<NodeId, NodeId> =
        graph.placeholders().iter().copied().zip(pass.add_placeholders_like(graph)).collect();
    let mut seen: HashMap<(Op, Vec<Arg>), NodeId> = HashMap::new();
    for id in graph.ids() {
        let node = graph.node(id);
        let new_id = match &node.kind {
            NodeKind::Placeholder { .. } => continue,
            NodeKind::Call { op, args } => {
                let args: Vec<Arg> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Node(input) => Arg::Node(new_ids[input]),
                        Arg::Scalar(s) => Arg::Scalar(*s),
                    })
                    .collect();
                let key = (op.clone(), args.clone());
                match seen.get(&key) {
                    Some(&earlier) => earlier,
                    None => {
                        let added =
                            pass.add_call(op.clone(), args, node.location.unwrap_or(SourceLocation::caller()))?;
                        seen.insert(key, added);
                        added
                    }
                }
            }
        };
        new_ids.insert(id, new_id);
    }
    pass.set_outputs(graph.outputs().iter().map(|o| new_ids[o]).collect())?;
    Ok(pass)
    // ANCHOR_END: solution
}
// ANCHOR_END: cse
