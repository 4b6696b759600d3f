//! Checks of `dead_code`: the pass keeps the outputs bit for bit, keeps every input, and removes
//! exactly the nodes no output needs.

use engine::fx::Graph;
use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record};

use grader_harness::programs::RandomProgram;

use super::support::{live_nodes, op_names, same_outputs};
use crate::subject::{eliminate_dead_code, example_input, wasteful};

/// Fails unless `pass` is `graph` with exactly its dead call nodes removed, computing the same.
fn removes_exactly_the_dead(graph: &Graph, pass: &Graph, batches: &[Vec<Tensor>]) -> Result<(), Failure> {
    for inputs in batches {
        same_outputs(graph, pass, inputs)?;
    }
    record("inputs and ops your pass kept", format!("{} {:?}", pass.placeholders().len(), op_names(pass)));
    ensure(pass.placeholders().len() == graph.placeholders().len(), || {
        format!(
            "the graph has {} inputs, yours {}: keep every placeholder",
            graph.placeholders().len(),
            pass.placeholders().len()
        )
    })?;
    let live: Vec<&'static str> = graph
        .nodes()
        .iter()
        .zip(live_nodes(graph))
        .filter(|(n, live)| *live && n.op().is_some())
        .map(|(n, _)| n.op().expect("filtered to calls").name())
        .collect();
    ensure(op_names(pass) == live, || {
        format!("expected exactly the live ops {live:?}, your graph has {:?}:\n{pass}", op_names(pass))
    })
}

/// `wasteful`'s unused `exp` and `sum` disappear; everything else stays.
pub fn removes_unused_nodes(ctx: &Context) -> CheckResult {
    let x = example_input(3, ctx.seed);
    let graph = dynamo::explain(|x: Tensor| wasteful(&x)).call(&x)?.graphs[0].clone();
    let pass = eliminate_dead_code(&graph)?;
    removes_exactly_the_dead(&graph, &pass, &[vec![x]])?;
    Ok(format!("{} ops became {}: {:?}", graph.op_count(), pass.op_count(), op_names(&pass)))
}

/// Random graphs, most of whose nodes are dead: the same outputs, only live nodes left.
pub fn dead_code_keeps_outputs_on_random_graphs(ctx: &Context) -> CheckResult {
    let cases = 64;
    for_all(ctx, cases, RandomProgram::strategy(16), |program| {
        let (graph, _) = program.trace()?;
        let pass = eliminate_dead_code(&graph)?;
        let batches: Vec<Vec<Tensor>> =
            program.batch_sizes(&graph).into_iter().map(|rows| program.inputs(rows)).collect();
        removes_exactly_the_dead(&graph, &pass, &batches)
    })?;
    Ok(format!(
        "{cases} random graphs, dynamic ones at two batch sizes: identical outputs, exactly the live nodes kept"
    ))
}
