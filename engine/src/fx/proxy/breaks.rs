//! Graph breaks, the part of the tracer that TorchDynamo's graph-break handling models: code that
//! needs a value the trace does not have calls [`concretize`]. A dynamo capture then runs the
//! graph so far through its [`CaptureHooks`], with every still-live symbolic tensor as an output
//! (liveness is read from weak references to the tensors handed out), and goes on in a new, empty
//! graph; every other trace returns [`Error::GraphBreak`].
//!
//! The live tensors do not change: each is a value id that the trace now maps to a concrete
//! result, *carried* into the next graph as a placeholder when first used.

use std::sync::Arc;

use super::{TRACES, TraceState, Traced, with_trace};
use crate::error::{Error, Result, SourceLocation};
use crate::fx::{Graph, NodeId, NodeKind};
use crate::tensor::Tensor;

/// A graph break: why tracing needed a concrete value, and the learner's line where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakReason {
    /// What needed the value, for example `Tensor::item() needs the tensor's value`.
    pub reason: String,
    /// The learner's line.
    pub location: SourceLocation,
}

/// How a trace started by dynamo hands its graphs over at a graph break.
pub(crate) trait CaptureHooks {
    /// Compiles and runs the graph traced so far (its outputs are the live values) and returns
    /// one concrete tensor per output. Only called when [`CaptureHooks::allows_breaks`].
    fn run_partial(&self, traced: Traced, reason: &BreakReason) -> Result<Vec<Tensor>>;

    /// Whether breaks are allowed at all (`false` under `fullgraph(true)`).
    fn allows_breaks(&self) -> bool;

    /// A static graph already compiled for the start of this code, for the trace to follow
    /// instead of building its own (see `cached_graph.rs`); `None` to build one. Asked once, when the
    /// trace starts.
    fn graph_to_follow(&self) -> Option<Arc<Graph>>;

    /// Whether the trace puts the concrete tensors it captures on autograd's tape, so that a
    /// `backward()` in it is traced (compiled autograd). Asked once, when the trace starts.
    fn captures_autograd(&self) -> bool;
}

/// A live value that the graph run at a break computes: which output holds it, and the name of
/// its node (which the placeholder carrying it into the next graph takes).
struct Pending {
    value: u64,
    output: usize,
    name: String,
}

impl TraceState {
    /// The concrete value of one of this trace's symbolic values, when it is already known (an
    /// input, a captured tensor, or a value an earlier graph computed).
    fn known_value(&self, value: u64) -> Option<Tensor> {
        if let Some((tensor, _)) = self.carried.get(&value) {
            return Some(tensor.clone());
        }
        let node = self.values.node(value)?;
        let index = self.placeholders().iter().position(|&p| p == node)?;
        self.bound[index].clone()
    }

    /// The graph so far, returning every live value it computed, ready to run at a break; also
    /// says which output holds each such value. Live values that are placeholders need no
    /// output: their tensors are carried over directly.
    fn partial_graph(&mut self) -> (Traced, Vec<Pending>) {
        let mut computed: Vec<(u64, NodeId)> = Vec::new();
        for (value, node) in self.values.live() {
            let Some(node) = node else { continue };
            let name = self.node(node).name.clone();
            match &self.node(node).kind {
                NodeKind::Call { .. } => computed.push((value, node)),
                NodeKind::Placeholder { .. } => {
                    let index = self.placeholders().iter().position(|&p| p == node).expect("a placeholder");
                    let tensor = self.bound[index].clone().expect("captured placeholders are bound");
                    self.carried.insert(value, (tensor, name));
                }
            }
        }
        let mut outputs: Vec<NodeId> = computed.iter().map(|&(_, node)| node).collect();
        outputs.sort();
        outputs.dedup();
        let pending = computed
            .into_iter()
            .map(|(value, node)| Pending {
                value,
                output: outputs.binary_search(&node).expect("every computed value is an output"),
                name: self.node(node).name.clone(),
            })
            .collect();
        (self.take_graph(outputs), pending)
    }
}

/// Whether the innermost trace may break its graph (a dynamo capture without `fullgraph`).
pub(crate) fn breaks_allowed() -> bool {
    let hooks = TRACES.with(|t| t.borrow().last().and_then(|s| s.hooks.clone()));
    hooks.is_some_and(|h| h.allows_breaks())
}

/// A concrete tensor with `tensor`'s value. A symbolic tensor whose value is not known yet needs
/// the graph so far to run: a graph break in a dynamo capture, an error in any other trace.
/// `reason` says what needed the value.
pub(crate) fn concretize(tensor: &Tensor, reason: &str, location: SourceLocation) -> Result<Tensor> {
    let Some(symbolic) = tensor.symbolic() else { return Ok(tensor.clone()) };
    let (trace, value) = (symbolic.trace, symbolic.value);
    let innermost = TRACES.with(|t| t.borrow().last().map(|s| s.id));
    let Some(known) = with_trace(trace, |s| s.known_value(value)) else {
        return Err(Error::Capture {
            message: format!(
                "{reason}, but this tensor escaped the compiled function that traced it; tensors seen inside a \
                 compiled function exist only during that call, so return them instead of storing them"
            ),
            location,
        });
    };
    if let Some(tensor) = known {
        // A `cond` branch's input may be bound to a symbolic tensor of the enclosing trace.
        return concretize(&tensor, reason, location);
    }
    let break_reason = BreakReason { reason: reason.to_string(), location };
    let hooks = with_trace(trace, |s| s.hooks.clone()).flatten();
    let Some(hooks) = hooks.filter(|h| innermost == Some(trace) && h.allows_breaks()) else {
        return Err(Error::GraphBreak { reason: break_reason.reason, location });
    };
    break_graph(trace, hooks.as_ref(), &break_reason)?;
    Ok(with_trace(trace, |s| s.known_value(value)).flatten().expect("a live value is carried across the break"))
}

// ANCHOR: break_graph
/// Runs the graph so far through `hooks` and starts a new one in which every live value is known.
fn break_graph(trace: u64, hooks: &dyn CaptureHooks, reason: &BreakReason) -> Result<()> {
    let (traced, pending) = with_trace(trace, |s| {
        s.paused = true;
        s.partial_graph()
    })
    .expect("the trace is active");
    let result = hooks.run_partial(traced, reason);
    with_trace(trace, |s| {
        s.paused = false;
        s.resumed_at = Some(reason.location);
        if let Ok(values) = &result {
            for p in pending {
                s.carried.insert(p.value, (values[p.output].clone(), p.name));
            }
        }
    });
    result.map(drop)
}
// ANCHOR_END: break_graph

/// An explicit graph break with no value needed, for a side effect that must happen between the
/// graphs (`engine::print!`). Returns `Ok` outside a trace.
pub(crate) fn break_for_side_effect(reason: &str, location: SourceLocation) -> Result<()> {
    let Some((trace, hooks)) =
        TRACES.with(|t| t.borrow().last().filter(|s| !s.paused).map(|s| (s.id, s.hooks.clone())))
    else {
        return Ok(());
    };
    let reason = BreakReason { reason: reason.to_string(), location };
    match hooks.filter(|h| h.allows_breaks()) {
        Some(hooks) => break_graph(trace, hooks.as_ref(), &reason),
        None => Err(Error::GraphBreak { reason: reason.reason, location }),
    }
}

/// Runs `f` with `location` as the line of the current statement, so that a value printed by
/// `Display` inside it is attributed to the learner's line.
pub(crate) fn at_statement<R>(location: SourceLocation, f: impl FnOnce() -> R) -> R {
    let trace = TRACES.with(|t| t.borrow().last().map(|s| s.id));
    let previous = trace.and_then(|id| with_trace(id, |s| s.statement.replace(location)).flatten());
    let result = f();
    if let Some(id) = trace {
        with_trace(id, |s| s.statement = previous);
    }
    result
}

/// The values of a tensor for `Display`. Inside a dynamo capture this may break the graph; where
/// that is not allowed, the error is kept for the end of the trace and `None` is returned (the
/// tensor then prints its metadata).
pub(crate) fn values_for_display(tensor: &Tensor) -> Option<Tensor> {
    let symbolic = tensor.symbolic()?;
    let (trace, value) = (symbolic.trace, symbolic.value);
    // Attribute the break to the printing statement when a macro told us its line, otherwise to
    // the line that computed the tensor.
    let location = with_trace(trace, |s| {
        let computed_at = s.values.node(value).and_then(|node| s.node(node).location);
        s.statement.or(computed_at).or(s.resumed_at)
    })
    .flatten()
    .unwrap_or_else(SourceLocation::caller);
    match concretize(tensor, "formatting a tensor's values with `{}` (Display) needs them", location) {
        Ok(value) => Some(value),
        Err(error) => {
            with_trace(trace, |s| {
                s.pending_error.get_or_insert(error);
            });
            None
        }
    }
}
