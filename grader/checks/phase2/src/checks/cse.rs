//! Checks of `cse`: the pass keeps the outputs bit for bit and leaves no two call nodes with the
//! same op and arguments.

use std::collections::HashSet;

use engine::fx::{Arg, Graph};
use engine::op::Op;
use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record};

use super::support::{op_names, random_program, same_outputs, steps};
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
fn merges_every_repeat(graph: &Graph, pass: &Graph, inputs: &[Tensor]) -> Result<(), Failure> {
    same_outputs(graph, pass, inputs)?;
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
    merges_every_repeat(&graph, &pass, &[x])?;
    Ok(format!("{} ops became {}: {:?}", graph.op_count(), pass.op_count(), op_names(&pass)))
}

/// Random graphs with repeated steps: the same outputs, every repeat merged.
pub fn keeps_outputs_on_random_graphs(ctx: &Context) -> CheckResult {
    let cases = 64;
    for_all(ctx, cases, (1usize..4, 1usize..5, 0u64..1000, steps(16)), |(m, n, seed, steps)| {
        let (graph, inputs) = random_program(m, n, seed, &steps)?;
        let pass = eliminate_common_subexpressions(&graph)?;
        merges_every_repeat(&graph, &pass, &inputs)
    })?;
    Ok(format!("{cases} random graphs: identical outputs, every repeated expression computed once"))
}
