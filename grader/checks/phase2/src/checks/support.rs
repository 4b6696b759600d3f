//! What several checks share: the grader's own answers to compare the learner's with.

use engine::fx::{Graph, Interpreter};
use engine::{Result, Tensor};
use grader_harness::{Failure, Tolerance, assert_close};

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
