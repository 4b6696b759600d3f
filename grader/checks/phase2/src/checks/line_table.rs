//! Checks of `line_table`: the learner's grouping against the grader's, on the captured and the
//! decomposed attention graph and on random graphs.

use engine::dynamo;
use engine::fx::Graph;
use engine::{Result, Tensor};
use grader_harness::{CheckResult, Context, Failure, draw, ensure, for_all, record};

use crate::subject::{Attention, LineOps, example_input, line_table};
use grader_harness::programs::RandomProgram;

/// The grader's line table.
fn reference(graph: &Graph) -> Vec<LineOps> {
    let mut rows: Vec<LineOps> = Vec::new();
    for node in graph.nodes() {
        let (Some(op), Some(location)) = (node.op(), node.location) else { continue };
        let location = location.short();
        match rows.iter().position(|r| r.location == location) {
            Some(i) => rows[i].ops.push(op.name().to_string()),
            None => rows.push(LineOps { location, ops: vec![op.name().to_string()] }),
        }
    }
    rows
}

fn agrees(graph: &Graph) -> Result<(), Failure> {
    let (actual, expected) = (line_table(graph), reference(graph));
    record("your line table", format!("{actual:?}"));
    ensure(actual == expected, || {
        let summary = match actual.iter().zip(&expected).position(|(a, e)| a != e) {
            Some(row) => format!("row {row} of your line table is {:?}, expected {:?}", actual[row], expected[row]),
            None => format!("your line table has {} rows, expected {}", actual.len(), expected.len()),
        };
        format!("{summary}, for this graph:\n{graph}\nyou returned\n{actual:#?}\nexpected\n{expected:#?}")
    })
}

fn attention_graph(seed: u64) -> Result<Graph> {
    let model = Attention::new(seed);
    let report = dynamo::explain(|x: Tensor| model.forward(&x)).call(&example_input(4, seed))?;
    Ok(report.graphs[0].clone())
}

/// A random program drawn from the seed, as traced.
fn random_graph(ctx: &Context) -> Result<Graph> {
    Ok(draw(ctx, 1, RandomProgram::strategy(14)).trace()?.0)
}

/// The attention block as captured: a line that makes three nodes, a line that makes none; then a
/// random program drawn from the seed.
pub fn groups_the_captured_graph(ctx: &Context) -> CheckResult {
    agrees(&random_graph(ctx)?)?;
    let graph = attention_graph(ctx.seed)?;
    agrees(&graph)?;
    Ok(format!("{} lines, {} ops, grouped as the grader does", reference(&graph).len(), graph.op_count()))
}

/// After AOT decomposition one line makes many primitive nodes (the attention block's, and a
/// random program's drawn from the seed).
pub fn groups_the_decomposed_graph(ctx: &Context) -> CheckResult {
    agrees(&engine::aot::decompose(&random_graph(ctx)?)?)?;
    let graph = engine::aot::decompose(&attention_graph(ctx.seed)?)?;
    agrees(&graph)?;
    let most = reference(&graph).iter().map(|r| r.ops.len()).max().unwrap_or(0);
    Ok(format!("the decomposed graph ({} ops) grouped correctly; one line made {most} nodes", graph.op_count()))
}

/// Random graphs whose nodes come from lines in any order.
pub fn groups_random_graphs(ctx: &Context) -> CheckResult {
    let cases = 48;
    for_all(ctx, cases, RandomProgram::strategy(14), |program| {
        let (graph, _) = program.trace()?;
        agrees(&graph)
    })?;
    Ok(format!("{cases} random graphs grouped as the grader does"))
}
