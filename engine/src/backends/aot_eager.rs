//! The `aot_eager` backend: decompose composite ops into primitives (what AOTAutograd hands to a
//! compiler), then run the result eagerly. Differences from `eager` point at a decomposition.

use super::{Backend, CompiledGraph};
use crate::aot;
use crate::error::Result;
use crate::fx::{Graph, Interpreter};
use crate::tensor::Tensor;

// ANCHOR: aot_eager_backend
/// Decomposes captured graphs with [`aot::decompose`], then interprets them.
#[derive(Clone, Copy, Debug, Default)]
pub struct AotEager;

impl Backend for AotEager {
    fn name(&self) -> &str {
        "aot_eager"
    }

    fn compile(&self, graph: &Graph, _example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        crate::wires::trip(crate::wires::Wire::AotEagerBackend);
        Ok(Box::new(Interpreter::new(aot::decompose(graph)?)))
    }
}
// ANCHOR_END: aot_eager_backend
