//! One call's capture: what the tracer hands over at each graph break and at the end, and the
//! record of it that `explain` reads.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cache::{Cache, CallSite, Found};
use super::options::Options;
use crate::backends::CompiledGraph;
use crate::device::Device;
use crate::error::{Error, Result, SourceLocation};
use crate::fx::proxy::{BreakReason, CaptureHooks, Traced};
use crate::fx::{Arg, Graph, NodeKind};
use crate::host_overhead::{self, Cost};
use crate::logs::{self, Artifact};
use crate::op::Op;
use crate::tensor::{Tensor, autograd};
use crate::trace_structured::{self, CompileId};
use serde_json::json;

/// The graphs one call ran and the breaks between them, in order, and (when timed) where its
/// host time went.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallRecord {
    pub graphs: Vec<Graph>,
    pub breaks: Vec<BreakReason>,
    pub times: CallTimes,
}

/// Where the host time of one call of a compiled function went, from
/// [`Compiled::call_timed`](super::Compiled::call_timed): the parts of a cached call that
/// `bench compiled` reports separately. Guards and run are summed over the call's graphs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CallTimes {
    /// Tracing the closure into graphs (everything not counted below).
    pub trace: Duration,
    /// Checking each traced graph against the cache's guards and finding its compiled form
    /// (compiling it on a miss).
    pub guards: Duration,
    /// Running the compiled graphs: the call plans (on a GPU, queuing their work).
    pub run: Duration,
}

/// The tracer's hooks for one call of a compiled function.
pub(crate) struct Capture {
    options: Arc<Options>,
    cache: Arc<Cache>,
    record: RefCell<CallRecord>,
    /// Whether the record keeps a copy of each graph (for `explain`; a plain call does not pay
    /// for the copy).
    keep_graphs: bool,
    /// Whether lookups and runs are timed (a plain call reads no clock).
    timed: bool,
    /// The graph the call's trace follows, handed over when the trace starts.
    follow: Cell<Option<Arc<Graph>>>,
    /// When tracing of the current graph began: the call's start, then the end of the last graph
    /// run (a graph that compiles counts its tracing as compile time).
    traced_since: Cell<Instant>,
    /// Where the call was made, for the compile trace.
    called_at: SourceLocation,
    /// The last graph run: which compile made it, and whether it compiled in this call.
    last: Cell<(Option<CompileId>, bool)>,
}

impl Capture {
    /// The hooks for one call, which this counts.
    pub fn new(
        options: Arc<Options>,
        cache: Arc<Cache>,
        called_at: SourceLocation,
        keep_graphs: bool,
        timed: bool,
    ) -> Capture {
        // `explain` shows the graphs a call traced, so it traces them whole.
        let follow = Cell::new(cache.start_call(!keep_graphs));
        let traced_since = Cell::new(Instant::now());
        Capture {
            options,
            cache,
            record: RefCell::new(CallRecord::default()),
            keep_graphs,
            timed,
            follow,
            traced_since,
            called_at,
            last: Cell::new((None, false)),
        }
    }

    pub fn take_record(&self) -> CallRecord {
        self.record.take()
    }

    /// Runs one captured graph: through the cache and backend when it has ops; a graph of
    /// placeholders only just hands its inputs back.
    pub fn run_graph(&self, mut traced: Traced) -> Result<Vec<Tensor>> {
        // Moved out, not cloned (collected in place, into the same buffer).
        let inputs: Vec<Tensor> = std::mem::take(&mut traced.inputs)
            .into_iter()
            .map(|t| t.expect("every placeholder of a capture is bound"))
            .collect();
        let graph = traced.recorded();
        if graph.calls() == 0 {
            return Ok(graph.outputs().iter().map(|&o| input_of(graph, &inputs, o)).collect());
        }
        if self.keep_graphs {
            self.record.borrow_mut().graphs.push(graph.clone());
        }
        host_overhead::pay(Cost::GraphCall, inputs.first().map_or(Device::Cpu, Tensor::device));
        // A graph that updates state outside itself (an optimizer's writes, a traced backward's
        // gradients) runs outside autograd: what it computes needs no backward.
        let run = |compiled: &dyn CompiledGraph| {
            if traced.updates_state { autograd::no_grad(|| compiled.run(&inputs)) } else { compiled.run(&inputs) }
        };
        let start = Instant::now();
        let site = CallSite { called_at: self.called_at, tracing: start - self.traced_since.get() };
        let Found { compiled, id, compiled_now } =
            self.cache.lookup_or_compile(&traced, &inputs, &self.options, &site)?;
        self.last.set((id, compiled_now));
        if !self.timed {
            let outputs = run(&*compiled)?;
            self.cache.count_deferred(&self.options.name, id);
            self.traced_since.set(Instant::now());
            return written_back(graph, &inputs, self.checked(graph, outputs)?);
        }
        let looked_up = Instant::now();
        let outputs = run(&*compiled)?;
        let ran = Instant::now();
        self.cache.count_deferred(&self.options.name, id);
        self.traced_since.set(ran);
        let times = &mut self.record.borrow_mut().times;
        times.guards += looked_up - start;
        times.run += ran - looked_up;
        written_back(graph, &inputs, self.checked(graph, outputs)?)
    }

    /// What a compiled graph returned, checked against the graph: one concrete tensor per output,
    /// each of the traced shape. A backend is user code (phase 1 writes some), and what it returns
    /// stands in for the traced values from here on, so a wrong count or shape is the backend's
    /// error, said here, not a panic further on.
    fn checked(&self, graph: &Graph, outputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let wrong = |message: String| Error::Backend { backend: self.options.backend.name().to_string(), message };
        if outputs.len() != graph.outputs().len() {
            return Err(wrong(format!(
                "the compiled graph returned {} tensor(s) for a graph with {} output(s); return one tensor per \
                 output of the graph, in order (`graph.outputs()`)",
                outputs.len(),
                graph.outputs().len()
            )));
        }
        for (i, (tensor, &node)) in outputs.iter().zip(graph.outputs()).enumerate() {
            let expected = &graph.node(node).meta.shape;
            if tensor.is_symbolic() || tensor.shape() != expected.as_slice() {
                let what = if tensor.is_symbolic() {
                    "a symbolic tensor".to_string()
                } else {
                    format!("shape {:?}", tensor.shape())
                };
                return Err(wrong(format!(
                    "output {i} of the compiled graph is {what}, but the graph's output `{}` is a concrete tensor \
                     of shape {expected:?}",
                    graph.node(node).name
                )));
            }
        }
        Ok(outputs)
    }

    /// Counts `total` as the call's host time: what lookups and runs did not take was tracing.
    pub fn finish_timing(&self, total: Duration) {
        let times = &mut self.record.borrow_mut().times;
        times.trace = total.saturating_sub(times.guards + times.run);
    }
}

/// The outputs of a graph that ran, after making sure each `copy_` output (a write into an input,
/// at the end of the outputs) reached the input's memory: a backend that returned the value in a
/// buffer of its own (instead of writing in place, as the interpreter and Inductor do) has it
/// copied in now.
fn written_back(graph: &Graph, inputs: &[Tensor], outputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    for (&node, value) in graph.outputs().iter().zip(&outputs) {
        let NodeKind::Call { op: Op::CopyInto, args } = &graph.node(node).kind else { continue };
        let Some(Arg::Node(target)) = args.first() else { continue };
        let target = input_of(graph, inputs, *target);
        if !target.shares_memory(value) {
            autograd::no_grad(|| target.copy_(value))?;
        }
    }
    Ok(outputs)
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
        let outputs = self.run_graph(traced)?;
        // A break is traced once, with the compile of the graph that ends at it.
        if let (Some(id), true) = self.last.get() {
            trace_structured::emit_for(Some(id), "graph_break", || {
                json!({
                    "function": &*self.options.name,
                    "reason": reason.reason,
                    "location": reason.location.to_string(),
                })
            });
        }
        Ok(outputs)
    }

    fn allows_breaks(&self) -> bool {
        !self.options.fullgraph
    }

    fn graph_to_follow(&self) -> Option<Arc<Graph>> {
        self.follow.take()
    }

    fn captures_autograd(&self) -> bool {
        self.options.compiled_autograd
    }
}
