//! The `eager` backend: capture only. The graph runs node by node on the eager kernels, so any
//! difference from plain eager execution is a capture bug, never a compiler one.

use super::{Backend, CompiledGraph};
use crate::error::Result;
use crate::fx::{Graph, Interpreter};
use crate::tensor::Tensor;

// ANCHOR: eager_backend
/// Runs captured graphs as they are, through [`Interpreter`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Eager;

impl Backend for Eager {
    fn name(&self) -> &str {
        "eager"
    }

    fn compile(&self, graph: &Graph, _example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        crate::wires::trip(crate::wires::Wire::EagerBackend);
        Ok(Box::new(Interpreter::new(graph.clone())))
    }
}
// ANCHOR_END: eager_backend

impl CompiledGraph for Interpreter {
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Interpreter::run(self, inputs)
    }
}
