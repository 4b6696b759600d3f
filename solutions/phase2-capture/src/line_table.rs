//! Exercise `line_table`: which lines of your code made which nodes.

use engine::fx::Graph;

/// The ops one source line produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineOps {
    /// `file:line`, as [`engine::SourceLocation::short`] writes it.
    pub location: String,
    /// The names of the ops recorded at that line, in graph order.
    pub ops: Vec<String>,
}

// ANCHOR: line_table
/// **Exercise `line_table`.** Group the op calls of `graph` by the source line that produced
/// them: one row per distinct `file:line`, rows in the order their first node appears, each with
/// its op names in graph order. Placeholders have no line and no row.
///
/// Book: `book/src/phase2/exercises.md`, section "line_table". Check: `cargo grader check phase2`.
pub fn line_table(graph: &Graph) -> Vec<LineOps> {
    // ANCHOR: solution
    let mut rows: Vec<LineOps> = Vec::new();
    for node in graph.nodes() {
        let (Some(op), Some(location)) = (node.op(), node.location) else { continue };
        let location = location.short();
        match rows.iter_mut().find(|row| row.location == location) {
            Some(row) => row.ops.push(op.name().to_string()),
            None => rows.push(LineOps { location, ops: vec![op.name().to_string()] }),
        }
    }
    rows
    // ANCHOR_END: solution
}
// ANCHOR_END: line_table
