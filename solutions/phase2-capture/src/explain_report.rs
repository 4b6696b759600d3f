//! Exercise `explain_report`: run a function under `explain` and read what it captured.

use engine::{Result, Tensor, dynamo};

/// What capture made of a function, in plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureSummary {
    /// Number of graphs.
    pub graph_count: usize,
    /// Number of graph breaks.
    pub break_count: usize,
    /// Number of op calls over all graphs.
    pub op_count: usize,
    /// For each graph, in order, the names of its ops in order (`["linear", "relu"]`).
    pub ops: Vec<Vec<String>>,
    /// The names of the first graph's inputs (placeholders), in order.
    pub inputs: Vec<String>,
}

// ANCHOR: summarize
/// **Exercise `explain_report`.** Run `f` on `x` under [`dynamo::explain`] and summarize the
/// report: counts, the op names of each graph (from each call node's op), and the names of the
/// first graph's placeholders. A function with no graph at all has no inputs to name. Count
/// from `report.graphs` and `report.breaks` yourself: the report's counting methods (`op_count`,
/// `ops_per_graph`, `graph_count`, `graph_break_count`) are refused in this crate.
///
/// Book: `book/src/phase2/exercises.md`, section "explain_report". Check: `cargo grader check phase2`.
pub fn summarize(f: impl Fn(Tensor) -> Result<Tensor>, x: &Tensor) -> Result<CaptureSummary> {
    // ANCHOR: solution
    let report = dynamo::explain(f).call(x)?;
    let ops: Vec<Vec<String>> = report
        .graphs
        .iter()
        .map(|g| g.nodes().iter().filter_map(|n| n.op()).map(|op| op.name().to_string()).collect())
        .collect();
    let inputs = report.graphs.first().map(|g| g.placeholders().iter().map(|&p| g.node(p).name.clone()).collect());
    Ok(CaptureSummary {
        graph_count: report.graphs.len(),
        break_count: report.breaks.len(),
        op_count: ops.iter().map(Vec::len).sum(),
        ops,
        inputs: inputs.unwrap_or_default(),
    })
    // ANCHOR_END: solution
}
// ANCHOR_END: summarize
