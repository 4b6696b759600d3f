//! Checks of `cse`: the pass keeps the outputs bit for bit and leaves no two call nodes with the
//! same op and arguments.

use std::collections::HashSet;

use engine::fx::{Arg, Graph};
use engine::op::Op;
use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record};

use grader_harness::programs::RandomProgram;

use super::support::{op_names, same_outputs};
use crate::subject::{eliminate_common_subexpressions, example_input, wasteful};

/// How many call nodes a graph has after merging repeats (the grader's own count).
fn distinct_calls(graph: &Graph) -> usize {
    let mut canonical: Vec<usize> = (0..graph.nodes().len()).collect();
    let mut seen: Vec<(Op, Vec<Arg>, usize)> = Vec::new();
    for id in graph.ids() {
        let node = graph.node(id);
        let Some(op) = node.op() else { continue };
        let args: Vec<Arg> = node
            .args()
            .iter()
            .map(|a| match a {
                Arg::Node(input) => Arg::Node(graph.ids().nth(canonical[input.index()]).expect("an earlier node")),
                Arg::Scalar(s) => Arg::Scalar(*s),
            })
            .collect();
        match seen.iter().find(|(o, a, _)| o == op && *a == args) {
            Some(&(_, _, earlier)) => canonical[id.index()] = earlier,
            None => seen.push((op.clone(), args, id.index())),
        }
    }
    seen.len()
}

/// Fails unless `pass` computes what `graph` does with no repeated call left.
fn merges_every_repeat(graph: &Graph, pass: &Graph, batches: &[Vec<Tensor>]) -> Result<(), Failure> {
    for inputs in batches {
        same_outputs(graph, pass, inputs)?;
    }
    let mut ops = op_names(pass);
    ops.sort_unstable();
    record("the ops your pass kept, sorted", format!("{ops:?}"));
    let mut keys = HashSet::new();
    for node in pass.nodes() {
        if let Some(op) = node.op() {
            ensure(keys.insert((op.clone(), node.args().to_vec())), || {
                format!("%{} repeats an earlier node with the same op and arguments:\n{pass}", node.name)
            })?;
        }
    }
    let expected = distinct_calls(graph);
    ensure(pass.op_count() == expected, || {
        format!("the graph has {expected} distinct calls, yours has {}:\n{pass}", pass.op_count())
    })
}

/// `wasteful` computes `tanh(x * 2)` twice; once is enough.
pub fn merges_repeated_expressions(ctx: &Context) -> CheckResult {
    let x = example_input(3, ctx.seed);
    let graph = dynamo::explain(|x: Tensor| wasteful(&x)).call(&x)?.graphs[0].clone();
    let pass = eliminate_common_subexpressions(&graph)?;
    merges_every_repeat(&graph, &pass, &[vec![x]])?;
    Ok(format!("{} ops became {}: {:?}", graph.op_count(), pass.op_count(), op_names(&pass)))
}

/// Random graphs with repeated steps: the same outputs, every repeat merged.
pub fn cse_keeps_outputs_on_random_graphs(ctx: &Context) -> CheckResult {
    let cases = 64;
    for_all(ctx, cases, RandomProgram::strategy(16), |program| {
        let (graph, _) = program.trace()?;
        let pass = eliminate_common_subexpressions(&graph)?;
        let batches: Vec<Vec<Tensor>> =
            program.batch_sizes(&graph).into_iter().map(|rows| program.inputs(rows)).collect();
        merges_every_repeat(&graph, &pass, &batches)
    })?;
    Ok(format!(
        "{cases} random graphs, dynamic ones at two batch sizes: identical outputs, every repeated expression computed once"
    ))
}
