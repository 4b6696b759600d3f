//! What several checks share: random traced programs, and the grader's own answers to compare
//! the learner's with.

use engine::fx::proxy::Tracer;
use engine::fx::{Graph, Interpreter};
use engine::{Result, Tensor};
use grader_harness::{Failure, Tolerance, assert_close};
use proptest::prelude::*;

/// One step of a random program: an op kind, two operand picks and a scalar.
pub type Step = (u8, u8, u8, f32);

/// Steps for [`random_program`].
pub fn steps(max: usize) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), -2.0f32..2.0), 1..max)
}

/// Traces a random program over inputs of shapes `[m, n]`, `[n]` and `[m, 1]`: each step applies
/// an op (pointwise, broadcasting, reduction, softmax, matmul, `where_`) to earlier values, and
/// steps whose shapes do not fit are left out. Some steps repeat earlier ones exactly and most
/// values are never used, so the graph has both dead code and common subexpressions. Returns the
/// graph and its inputs.
pub fn random_program(m: usize, n: usize, seed: u64, steps: &[Step]) -> Result<(Graph, Vec<Tensor>)> {
    let inputs = [Tensor::randn(&[m, n], seed), Tensor::randn(&[n], seed + 1), Tensor::randn(&[m, 1], seed + 2)];
    let tracer = Tracer::new();
    let mut values = inputs.iter().map(|t| tracer.input(t)).collect::<Result<Vec<_>>>()?;
    for &(kind, a, b, c) in steps {
        let (x, y) = (&values[a as usize % values.len()], &values[b as usize % values.len()]);
        let c = (c * 4.0).round() / 4.0;
        let value = match kind % 11 {
            0 => x.relu(),
            1 => x.tanh(),
            2 => x.add(y),
            3 => x.mul(y),
            4 => x.sub(c),
            5 => x.sum(-1, true),
            6 => x.softmax(-1),
            7 => x.maximum(y),
            8 => x.gt(c).and_then(|mask| mask.where_(x, y)),
            9 => y.t().and_then(|yt| x.matmul(&yt)),
            _ => x.mul(2.0),
        };
        if let Ok(value) = value {
            values.push(value);
        }
    }
    let outputs = [values[values.len() - 1].clone(), values[values.len() / 2].clone()];
    let traced = tracer.finish(&outputs)?;
    Ok((traced.graph, inputs.to_vec()))
}

/// Fails unless `pass` (the learner's transformed graph) gives `original`'s outputs on
/// `inputs`, bit for bit: a pass must never change what a graph computes.
pub fn same_outputs(original: &Graph, pass: &Graph, inputs: &[Tensor]) -> Result<(), Failure> {
    let expected = Interpreter::new(original.clone()).run(inputs)?;
    let actual = Interpreter::new(pass.clone())
        .run(inputs)
        .map_err(|e| Failure::fail(format!("your graph does not run on the original's inputs: {e}\n{pass}")))?;
    if actual.len() != expected.len() {
        return Err(Failure::fail(format!(
            "the original returns {} values, your graph {}:\n{pass}",
            expected.len(),
            actual.len()
        )));
    }
    for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert_close(&format!("output {i}"), a, e, Tolerance::EXACT)
            .map_err(|f| Failure::fail(format!("{f}\noriginal:\n{original}\nyours:\n{pass}")))?;
    }
    Ok(())
}

/// Which nodes some output needs, by index.
pub fn live_nodes(graph: &Graph) -> Vec<bool> {
    let ids: Vec<_> = graph.ids().collect();
    let mut live = vec![false; ids.len()];
    for &o in graph.outputs() {
        live[o.index()] = true;
    }
    for &id in ids.iter().rev() {
        if live[id.index()] {
            for input in graph.node(id).inputs() {
                live[input.index()] = true;
            }
        }
    }
    live
}

/// The op names of a graph's call nodes, in order.
pub fn op_names(graph: &Graph) -> Vec<&'static str> {
    graph.nodes().iter().filter_map(|n| n.op().map(|op| op.name())).collect()
}
