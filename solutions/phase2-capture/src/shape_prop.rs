//! Exercise `shape_propagation`: every node's shape without running anything, the idea behind
//! PyTorch's FakeTensor.

use engine::fx::{Arg, Graph, NodeKind};
use engine::op::Op;
use engine::{Error, Result};

use crate::model::shape_rule;

// ANCHOR: broadcast
/// **Exercise `shape_propagation`, part 1.** The shape two shapes broadcast to: align them at
/// the last dimension (a missing leading dimension counts as 1); at each position the sizes must
/// be equal, or one of them 1, and the result takes the other. `Err` with a message naming both
/// shapes when they do not broadcast.
///
/// Book: `book/src/phase2/exercises.md`, section "shape_propagation". Check: `cargo grader check phase2`.
pub fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    // ANCHOR: solution
    let rank = a.len().max(b.len());
    let size = |s: &[usize], i: usize| if i < rank - s.len() { 1 } else { s[i - (rank - s.len())] };
    (0..rank)
        .map(|i| match (size(a, i), size(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            (x, y) => Err(format!("shapes {a:?} and {b:?} do not broadcast: sizes {x} and {y} at dim {i}")),
        })
        .collect()
    // ANCHOR_END: solution
}
// ANCHOR_END: broadcast

// ANCHOR: propagate
/// **Exercise `shape_propagation`, part 2.** The shape of every node of `graph` when its
/// placeholders have shapes `inputs` (in placeholder order), in node order. Walk the nodes once:
/// a placeholder takes its input's shape; a pointwise op (`Op::Unary`, `Op::Binary`, `Op::Where`)
/// broadcasts its tensor operands with [`broadcast`] (scalar operands have no shape); any other
/// op asks the engine's rule through [`shape_rule`]`(op, &operand_shapes, location)` (given).
/// Wrong input counts and shapes that do not fit are errors.
///
/// Book: `book/src/phase2/exercises.md`, section "shape_propagation". Check: `cargo grader check phase2`.
pub fn propagate(graph: &Graph, inputs: &[Vec<usize>]) -> Result<Vec<Vec<usize>>> {
    // ANCHOR: solution
    let here = engine::SourceLocation::caller();
    if inputs.len() != graph.placeholders().len() {
        return Err(Error::Backend {
            backend: "shape propagation".into(),
            message: format!("the graph takes {} inputs, got {} shapes", graph.placeholders().len(), inputs.len()),
        });
    }
    let mut shapes: Vec<Vec<usize>> = Vec::with_capacity(graph.nodes().len());
    let mut next_input = inputs.iter();
    for node in graph.nodes() {
        let shape = match &node.kind {
            NodeKind::Placeholder { .. } => next_input.next().expect("counted above").clone(),
            NodeKind::Call { op, args } => {
                let operands: Vec<Option<&[usize]>> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Node(id) => Some(shapes[id.index()].as_slice()),
                        Arg::Scalar(_) => None,
                    })
                    .collect();
                let location = node.location.unwrap_or(here);
                match op {
                    Op::Unary(_) | Op::Binary(_) | Op::Where => operands
                        .iter()
                        .flatten()
                        .try_fold(Vec::new(), |acc, s| broadcast(&acc, s))
                        .map_err(|message| Error::InvalidArgument { op: op.name(), message, location })?,
                    _ => shape_rule(op, &operands, location)?,
                }
            }
        };
        shapes.push(shape);
    }
    Ok(shapes)
    // ANCHOR_END: solution
}
// ANCHOR_END: propagate
