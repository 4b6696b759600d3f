//! Making a graph dynamic after the fact: re-trace it with some input sizes replaced by symbols.
//! This is how automatic dynamic shapes work here: a graph is always traced with concrete sizes,
//! and once a size has changed between calls, the graph is re-traced with that size symbolic so
//! that the symbolic shape rules decide which other sizes follow it.

use super::graph::{Graph, NodeKind};
use super::interpreter::run_graph;
use super::proxy::Tracer;
use crate::error::{Result, SourceLocation};
use crate::tensor::Tensor;

impl Graph {
    /// The same graph with the sizes at `dims[i]` of placeholder `i` symbolic (as far as
    /// [`Graph::add_dynamic_placeholder`] allows), every other size propagated symbolically: what
    /// Dynamo's automatic dynamic shapes does to a recompiled frame.
    #[track_caller]
    pub fn with_dynamic_dims(&self, dims: &[Vec<usize>]) -> Result<Graph> {
        crate::wires::trip(crate::wires::Wire::WithDynamicDims);
        self.generalized(dims)
    }

    /// [`Graph::with_dynamic_dims`], for the engine's own use (dynamo's cache, `cond`'s branches),
    /// past its trip wire.
    #[track_caller]
    pub(crate) fn generalized(&self, dims: &[Vec<usize>]) -> Result<Graph> {
        let here = SourceLocation::caller();
        let tracer = Tracer::new();
        let inputs: Vec<Tensor> = self
            .placeholders()
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let node = self.node(p);
                let NodeKind::Placeholder { strides } = &node.kind else {
                    unreachable!("placeholders() lists placeholders")
                };
                let wanted = dims.get(i).map_or(&[][..], Vec::as_slice);
                tracer.symbolic_placeholder(&node.name, node.meta.clone(), strides.clone(), wanted)
            })
            .collect();
        let outputs = run_graph(self, &inputs, here)?;
        Ok(tracer.finish(&outputs)?.graph)
    }

    /// For each placeholder, the dims whose sizes are symbolic.
    pub fn dynamic_dims(&self) -> Vec<Vec<usize>> {
        self.placeholders()
            .iter()
            .map(|&p| {
                self.node(p)
                    .sym_shape
                    .dims()
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| !d.is_static())
                    .map(|(i, _)| i)
                    .collect()
            })
            .collect()
    }
}
