//! Exercise `branch`: a data-dependent branch kept in the graph.

use engine::{Result, Tensor, dynamo};

use crate::models::Model;

// ANCHOR: gated
/// **Exercise `branch`.** [`gated_original`](crate::models::gated_original) without its graph
/// break: the same outputs on every input, but one graph. An `if` on a tensor's value needs the
/// value; keep the choice in the graph instead, with `cond` (both branches become subgraphs) or
/// with `where_` (both sides computed, one selected).
///
/// Book: `book/src/phase3/exercises.md`, section "branch". Check: `cargo grader check phase3`.
pub fn gated(m: &Model, x: &Tensor) -> Result<Tensor> {
    todo!()
}
// ANCHOR_END: gated
