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
    todo!()
}
// ANCHOR_END: dead_code
