//! Decomposition of composite ops into primitives, the part of AOTAutograd every backend sees:
//! the graph is re-traced through an interpreter with a decomposition table active, so
//! `softmax` arrives at the compiler as `amax`, `sub`, `exp`, `sum` and `div`.
//!
//! (The joint forward/backward graph, AOTAutograd's other job, comes with training support.)

mod decompositions;

pub use decompositions::decompose_op;

use crate::error::{Error, Result};
use crate::fx::proxy::Tracer;
use crate::fx::{Graph, Interpreter};

// ANCHOR: decompose
/// The same computation as `graph` with every composite op replaced by primitive ops (inside
/// `cond` branches too). Each new node keeps the source location of the composite it came from,
/// and a dynamic graph stays dynamic in the same sizes.
pub fn decompose(graph: &Graph) -> Result<Graph> {
    let tracer = Tracer::with_decompositions(decompose_op);
    let inputs = tracer.placeholders_like(graph);
    let outputs = Interpreter::new(graph.clone()).run(&inputs)?;
    let traced = tracer.finish(&outputs)?;
    if traced.inputs.len() != inputs.len() {
        return Err(Error::Backend {
            backend: "aot".into(),
            message: "a decomposition captured a constant tensor; decompositions must use scalar operands".into(),
        });
    }
    Ok(traced.graph)
}
// ANCHOR_END: decompose
