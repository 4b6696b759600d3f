//! What the phase 3 checks share: "one graph, no break" with the breaks spelled out when there
//! are some, and the comparison of a fixed model with its original.

use engine::dynamo::{self, ExplainOutput};
use engine::{Result, Tensor};
use grader_harness::{Failure, Tolerance, assert_close, record, record_tensor};

/// Runs `f` on `x` under `explain` and fails, listing each break with its reason and line,
/// unless it made exactly one graph.
/// A random input of a phase 3 model: `rows` rows drawn from `seed`.
#[derive(Clone, Copy, Debug)]
pub struct Input {
    /// Seed of the values (and of the model's weights, where it has some).
    pub seed: u64,
    /// Rows of the input.
    pub rows: usize,
}

impl Input {
    /// Inputs of 1 to 5 rows.
    pub fn strategy() -> impl proptest::strategy::Strategy<Value = Input> {
        use proptest::strategy::Strategy as _;
        (0u64..1000, 1usize..6).prop_map(|(seed, rows)| Input { seed, rows })
    }
}

pub fn one_graph(what: &str, f: impl Fn(Tensor) -> Result<Tensor>, x: &Tensor) -> Result<ExplainOutput, Failure> {
    let report = dynamo::explain(f).call(x)?;
    // Counts only: a fix may rightly write other ops than the reference's. The outputs on the
    // seed's input, which any right fix computes, make the answers the seed's own.
    record(format!("graphs and breaks of {what}"), format!("{} {}", report.graph_count(), report.graph_break_count()));
    for (i, output) in report.outputs.iter().enumerate() {
        record_tensor(format!("output {i} of {what}"), output, Tolerance::F32);
    }
    if report.graph_break_count() > 0 || report.graph_count() != 1 {
        let breaks: Vec<String> =
            report.breaks.iter().map(|b| format!("  - {} (at {})", b.reason, b.location.short())).collect();
        return Err(Failure::fail(format!(
            "{what} made {} graph(s) with {} break(s):\n{}",
            report.graph_count(),
            report.graph_break_count(),
            breaks.join("\n")
        )));
    }
    Ok(report)
}

/// Compiles `fixed` with `fullgraph(true)` (any break is an error), runs it on `x`, and fails
/// unless it agrees with `original` run eagerly.
pub fn matches_original(
    what: &str,
    fixed: impl Fn(Tensor) -> Result<Tensor>,
    original: impl Fn(&Tensor) -> Result<Tensor>,
    x: &Tensor,
    tolerance: Tolerance,
) -> Result<(), Failure> {
    let compiled = dynamo::compile(fixed).fullgraph(true);
    let actual =
        compiled.call(x).map_err(|e| Failure::fail(format!("{what}, compiled with fullgraph(true), failed: {e}")))?;
    let expected = original(x)?;
    assert_close(&format!("{what}'s output"), &actual, &expected, tolerance)
}
