//! One call's capture: what the tracer hands over at each graph break and at the end, and the
//! record of it that `explain` reads.

use std::cell::RefCell;
use std::sync::Arc;

use super::cache::Cache;
use super::options::Options;
use crate::error::Result;
use crate::fx::proxy::{BreakReason, CaptureHooks, Traced};
use crate::fx::{Graph, NodeKind};
use crate::logs::{self, Artifact};
use crate::tensor::Tensor;

/// The graphs one call ran and the breaks between them, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallRecord {
    pub graphs: Vec<Graph>,
    pub breaks: Vec<BreakReason>,
}

/// The tracer's hooks for one call of a compiled function.
pub(crate) struct Capture {
    options: Options,
    cache: Arc<Cache>,
    record: RefCell<CallRecord>,
    /// Whether the record keeps a copy of each graph (for `explain`; a plain call does not pay
    /// for the copy).
    keep_graphs: bool,
}

impl Capture {
    pub fn new(options: Options, cache: Arc<Cache>, keep_graphs: bool) -> Capture {
        Capture { options, cache, record: RefCell::new(CallRecord::default()), keep_graphs }
    }

    pub fn take_record(&self) -> CallRecord {
        self.record.take()
    }

    /// Runs one captured graph: through the cache and backend when it has ops; a graph of
    /// placeholders only just hands its inputs back.
    pub fn run_graph(&self, traced: Traced) -> Result<Vec<Tensor>> {
        let inputs: Vec<Tensor> =
            traced.inputs.iter().map(|t| t.clone().expect("every placeholder of a capture is bound")).collect();
        if traced.graph.op_count() == 0 {
            return Ok(traced.graph.outputs().iter().map(|&o| input_of(&traced.graph, &inputs, o)).collect());
        }
        if self.keep_graphs {
            self.record.borrow_mut().graphs.push(traced.graph.clone());
        }
        let compiled = self.cache.lookup_or_compile(&traced, &inputs, &self.options)?;
        compiled.run(&inputs)
    }
}

/// The input bound to placeholder `node`.
fn input_of(graph: &Graph, inputs: &[Tensor], node: crate::fx::NodeId) -> Tensor {
    debug_assert!(matches!(graph.node(node).kind, NodeKind::Placeholder { .. }));
    let index = graph.placeholders().iter().position(|&p| p == node).expect("a graph without ops returns inputs");
    inputs[index].clone()
}

impl CaptureHooks for Capture {
    fn run_partial(&self, traced: Traced, reason: &BreakReason) -> Result<Vec<Tensor>> {
        logs::log(Artifact::GraphBreaks, || {
            format!("graph break in `{}` at {}: {}", self.options.name, reason.location.short(), reason.reason)
        });
        self.cache.count_break();
        self.record.borrow_mut().breaks.push(reason.clone());
        self.run_graph(traced)
    }

    fn allows_breaks(&self) -> bool {
        !self.options.fullgraph
    }
}
