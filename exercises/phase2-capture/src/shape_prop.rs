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
    todo!()
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
    todo!()
}
// ANCHOR_END: propagate
