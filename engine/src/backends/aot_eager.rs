//! The `aot_eager` backend: decompose composite ops into primitives (what AOTAutograd hands to a
//! compiler), then run the result eagerly. Differences from `eager` point at a decomposition.

use std::sync::Arc;

use super::{Backend, CompiledGraph};
use crate::aot;
use crate::compile_mode::Mode;
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

    /// The joint graph partitioned, and each half interpreted.
    fn compile_for_training(
        &self,
        graph: &Graph,
        example_inputs: &[Tensor],
        requires_grad: &[bool],
        mode: Mode,
    ) -> Result<Box<dyn CompiledGraph>> {
        if mode != Mode::Default {
            return self.compile_in_mode(graph, example_inputs, mode);
        }
        let interpret = |g: &Graph| -> Result<aot::CompiledFn> {
            let interpreter = Interpreter::new(g.clone());
            Ok(Arc::new(move |inputs: &[Tensor]| interpreter.run(inputs)))
        };
        Ok(Box::new(aot::aot_module(graph, requires_grad, interpret, interpret)?))
    }
}
// ANCHOR_END: aot_eager_backend
