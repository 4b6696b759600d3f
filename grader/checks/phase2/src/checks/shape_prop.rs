//! Checks of `shape_propagation`: the learner's broadcasting rule against the engine's, and
//! propagated shapes against the shapes the trace recorded.

use engine::fx::Graph;
use engine::layout::broadcast_shapes;
use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record, wires};
use proptest::prelude::*;

use crate::subject::{Attention, broadcast, example_input, propagate};
use grader_harness::programs::RandomProgram;

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![Just(1usize), 2usize..5], 0..4)
}

/// Broadcasting on random pairs of shapes: the same result as the engine, and an error (that
/// names both shapes) exactly when the engine refuses.
pub fn broadcast_follows_the_rules(ctx: &Context) -> CheckResult {
    let cases = 300;
    for_all(ctx, cases, (shape(), shape()), |(a, b)| {
        let call = format!("broadcast(&{a:?}, &{b:?})");
        let got = broadcast(&a, &b);
        record(&call, got.as_ref().map_or_else(|_| "refused".to_string(), |s| format!("{s:?}")));
        match (got, wires::exempt(|| broadcast_shapes(&a, &b))) {
            (Ok(got), Some(expected)) => {
                ensure(got == expected, || format!("{call} returned {got:?}, expected {expected:?}"))
            }
            (Err(message), None) => {
                ensure(message.contains(&format!("{a:?}")) && message.contains(&format!("{b:?}")), || {
                    format!("{call} refused, rightly, but the message should name both shapes: {message:?}")
                })
            }
            (Ok(got), None) => {
                Err(Failure::fail(format!("{call} returned {got:?}, but these shapes do not broadcast")))
            }
            (Err(message), Some(expected)) => {
                Err(Failure::fail(format!("{call} refused ({message}), expected {expected:?}")))
            }
        }
    })?;
    Ok(format!("{cases} random shape pairs broadcast as the engine does"))
}

fn placeholder_shapes(graph: &Graph) -> Vec<Vec<usize>> {
    graph.placeholders().iter().map(|&p| graph.node(p).meta.shape.clone()).collect()
}

/// The checks of `propagate` run past the wires on the engine's shape rules: the given
/// `shape_rule`, which `propagate` is to call for every op but the pointwise ones, asks the
/// engine's `infer_shape`, and matmul's rule broadcasts its batch dimensions with
/// `broadcast_shapes` (the models and traces the checks build reach them too). Broadcasting
/// itself, where a learner could reach the engine's rule through matmul's, is judged with the
/// wires armed, in [`broadcast_follows_the_rules`], and the exercise is done only when that check
/// passes too.
fn past_the_shape_wires(check: impl FnOnce() -> CheckResult) -> CheckResult {
    wires::exempt(check)
}

/// Fails unless propagating `inputs` through `graph` gives `expected` (one shape per node).
fn agrees(graph: &Graph, inputs: &[Vec<usize>], expected: &Graph) -> Result<(), Failure> {
    let got = propagate(graph, inputs)?;
    record("the shapes you propagated", format!("{got:?}"));
    for (i, node) in expected.nodes().iter().enumerate() {
        let shape = got.get(i).ok_or_else(|| {
            Failure::fail(format!(
                "propagate returned {} shapes for a graph of {} nodes",
                got.len(),
                expected.nodes().len()
            ))
        })?;
        ensure(*shape == node.meta.shape, || {
            format!("node %{} has shape {:?}, you propagated {shape:?}, in\n{graph}", node.name, node.meta.shape)
        })?;
    }
    ensure(got.len() == expected.nodes().len(), || format!("{} shapes for {} nodes", got.len(), expected.nodes().len()))
}

/// Random graphs of broadcasting, reductions, softmax, matmul and `where_`: every node's shape.
pub fn propagates_every_node(ctx: &Context) -> CheckResult {
    past_the_shape_wires(|| {
        let cases = 64;
        for_all(ctx, cases, RandomProgram::strategy(14), |program| {
            let (graph, _) = program.trace()?;
            agrees(&graph, &placeholder_shapes(&graph), &graph)
        })?;
        Ok(format!("every node of {cases} random graphs has the shape the trace recorded"))
    })
}

/// The attention graph traced with 4 tokens, propagated with other token counts, against graphs
/// traced with those counts: shapes without running anything.
pub fn propagates_new_input_shapes(ctx: &Context) -> CheckResult {
    past_the_shape_wires(|| {
        let model = Attention::new(ctx.seed);
        let trace = |tokens: usize| -> Result<Graph, Failure> {
            Ok(dynamo::explain(|x: Tensor| model.forward(&x)).call(&example_input(tokens, ctx.seed))?.graphs[0].clone())
        };
        let graph = trace(4)?;
        // Token counts drawn from the seed: one, a few, many.
        let counts =
            [1 + (ctx.seed % 3) as usize, 5 + ((ctx.seed / 3) % 7) as usize, 20 + ((ctx.seed / 21) % 30) as usize];
        for tokens in counts {
            let expected = trace(tokens)?;
            agrees(&graph, &placeholder_shapes(&expected), &expected)?;
        }
        Ok(format!("the graph traced with 4 tokens, propagated with {counts:?} tokens, matches their traces"))
    })
}

/// Too few input shapes, and shapes that do not fit the graph's ops, are errors.
pub fn rejects_bad_input_shapes(ctx: &Context) -> CheckResult {
    past_the_shape_wires(|| {
        let model = Attention::new(ctx.seed);
        let graph = dynamo::explain(|x: Tensor| model.forward(&x)).call(&example_input(3, ctx.seed))?.graphs[0].clone();
        let mut shapes = placeholder_shapes(&graph);
        // A feature size other than the weight's, drawn from the seed.
        let width = shapes[0][1];
        let wrong = vec![3, width + 1 + (ctx.seed % 9) as usize];
        let too_few = propagate(&graph, &shapes[1..]).is_err();
        shapes[0] = wrong.clone();
        let mismatched = propagate(&graph, &shapes).is_err();
        record(
            format!("errors for too few inputs and for an input of shape {wrong:?}"),
            format!("{too_few} {mismatched}"),
        );
        ensure(too_few, || "one input shape too few must be an error".to_string())?;
        ensure(mismatched, || {
            format!(
                "an input of shape {wrong:?} cannot meet the block's {width}-wide weights: propagate must return an error"
            )
        })?;
        Ok("a wrong input count and a wrong input shape are errors, not panics".into())
    })
}
