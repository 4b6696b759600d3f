//! Tracing with symbolic tensors, the analogue of FX proxies and `make_fx`: while a [`Tracer`] is
//! active on this thread, every op on a tensor records a node instead of running a kernel, and
//! returns a symbolic tensor that stands for the node's value.
//!
//! Dynamo uses a tracer to capture a closure; AOT uses one with a decomposition table to re-trace
//! a graph into primitive ops. Concrete tensors that meet a trace (a model's weights captured by
//! the closure) are lifted into placeholders, as Dynamo lifts parameters into graph inputs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::graph::{Arg, Graph, NodeId};
use crate::error::{Error, Result, SourceLocation};
use crate::op::{Op, OpClass};
use crate::scalar::Scalar;
use crate::tensor::{Operand, Symbolic, Tensor, TensorMeta};

/// A decomposition table: returns the composite op's value built from other ops, or `None` to
/// record the op as it is.
pub type Decomposition = fn(&Op, &[Operand], SourceLocation) -> Option<Result<Tensor>>;

/// The graph under construction and the bookkeeping that maps tensors to its nodes.
struct TraceState {
    id: u64,
    graph: Graph,
    /// The node currently holding each symbolic value of this trace.
    values: HashMap<u64, NodeId>,
    next_value: u64,
    /// Concrete tensors already lifted to placeholders, compared by identity.
    lifted: Vec<(Tensor, NodeId)>,
    /// The concrete tensor bound to each placeholder, in placeholder order (`None` when the
    /// placeholder was declared from metadata only).
    bound: Vec<Option<Tensor>>,
    paused: bool,
    decompositions: Option<Decomposition>,
    /// While a composite is being decomposed, the nodes it produces carry its location.
    location_override: Option<SourceLocation>,
}

thread_local! {
    /// Active traces, innermost last. Only the innermost one records.
    static TRACES: RefCell<Vec<TraceState>> = const { RefCell::new(Vec::new()) };
}

static NEXT_TRACE_ID: AtomicU64 = AtomicU64::new(1);

/// What a finished trace produced.
#[derive(Debug)]
pub struct Traced {
    /// The recorded graph, with its outputs set.
    pub graph: Graph,
    /// The concrete tensor for each placeholder, in order; `None` for placeholders declared with
    /// [`Tracer::placeholder`].
    pub inputs: Vec<Option<Tensor>>,
}

/// An active trace on this thread. Dropping it without [`Tracer::finish`] abandons the graph.
pub struct Tracer {
    id: u64,
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer::new()
    }
}

impl Tracer {
    /// Starts recording ops on this thread.
    pub fn new() -> Tracer {
        Tracer::start(None)
    }

    /// Starts recording ops, replacing each composite op by its decomposition from `table`.
    pub fn with_decompositions(table: Decomposition) -> Tracer {
        Tracer::start(Some(table))
    }

    fn start(decompositions: Option<Decomposition>) -> Tracer {
        let id = NEXT_TRACE_ID.fetch_add(1, Ordering::Relaxed);
        TRACES.with(|t| {
            t.borrow_mut().push(TraceState {
                id,
                graph: Graph::new(),
                values: HashMap::new(),
                next_value: 0,
                lifted: Vec::new(),
                bound: Vec::new(),
                paused: false,
                decompositions,
                location_override: None,
            })
        });
        Tracer { id }
    }

    fn with_state<R>(&self, f: impl FnOnce(&mut TraceState) -> R) -> R {
        TRACES.with(|t| {
            let mut traces = t.borrow_mut();
            let state = traces.iter_mut().find(|s| s.id == self.id).expect("a live Tracer has its state");
            f(state)
        })
    }

    /// Declares a graph input from metadata alone and returns the symbolic tensor standing for it.
    pub fn placeholder(&self, name: &str, meta: TensorMeta, strides: Vec<usize>) -> Tensor {
        self.with_state(|s| {
            let id = s.graph.add_placeholder(name, meta, strides);
            s.bound.push(None);
            s.symbolic(id)
        })
    }

    /// Declares a graph input bound to a concrete tensor (named after it, or `arg<N>`) and
    /// returns the symbolic tensor standing for it.
    #[track_caller]
    pub fn input(&self, tensor: &Tensor) -> Result<Tensor> {
        let location = SourceLocation::caller();
        self.with_state(|s| {
            if tensor.is_symbolic() {
                return Err(Error::Capture {
                    message: "a compiled function's input must be a concrete tensor, not one from inside another trace"
                        .into(),
                    location,
                });
            }
            let name = tensor.name().map(str::to_string).unwrap_or_else(|| format!("arg{}", s.bound.len()));
            Ok(s.lift(tensor, &name))
        })
    }

    /// Ends the trace: the graph returns `outputs` (concrete ones are lifted to placeholders).
    #[track_caller]
    pub fn finish(self, outputs: &[Tensor]) -> Result<Traced> {
        let location = SourceLocation::caller();
        let ids = self.with_state(|s| outputs.iter().map(|t| s.node_of(t, location)).collect::<Result<Vec<_>>>())?;
        let state = TRACES.with(|t| {
            let mut traces = t.borrow_mut();
            let index = traces.iter().position(|s| s.id == self.id).expect("a live Tracer has its state");
            traces.remove(index)
        });
        let mut graph = state.graph;
        graph.set_outputs(ids);
        Ok(Traced { graph, inputs: state.bound })
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        // Ignore a thread-local already torn down at thread exit.
        let _ = TRACES.try_with(|t| t.borrow_mut().retain(|s| s.id != self.id));
    }
}

impl TraceState {
    /// A new symbolic tensor for the value of `node`.
    fn symbolic(&mut self, node: NodeId) -> Tensor {
        let value = self.next_value;
        self.next_value += 1;
        self.values.insert(value, node);
        let meta = self.graph.node(node).meta.clone();
        Tensor::from_symbolic(Symbolic { trace: self.id, value, meta })
    }

    /// The placeholder for a concrete tensor, adding one the first time it is seen.
    fn lift(&mut self, tensor: &Tensor, name: &str) -> Tensor {
        let node = self.lifted_node(tensor, name);
        self.symbolic(node)
    }

    fn lifted_node(&mut self, tensor: &Tensor, name: &str) -> NodeId {
        if let Some((_, id)) = self.lifted.iter().find(|(t, _)| Arc::ptr_eq(&t.repr, &tensor.repr)) {
            return *id;
        }
        let strides = tensor.strides().expect("lifted tensors are concrete").to_vec();
        let id = self.graph.add_placeholder(name, tensor.meta(), strides);
        self.lifted.push((tensor.clone(), id));
        self.bound.push(Some(tensor.clone()));
        id
    }

    /// The node a tensor stands for in this trace: its own node if symbolic, a lifted placeholder
    /// if concrete.
    fn node_of(&mut self, tensor: &Tensor, location: SourceLocation) -> Result<NodeId> {
        match tensor.symbolic() {
            None => {
                let name = tensor.name().unwrap_or("captured").to_string();
                Ok(self.lifted_node(tensor, &name))
            }
            Some(s) if s.trace == self.id => Ok(self.values[&s.value]),
            Some(_) => Err(Error::Capture {
                message: "this tensor belongs to another compiled function's trace; tensors seen inside a compiled \
                          function exist only during that call, so return it from that function instead"
                    .into(),
                location,
            }),
        }
    }

    fn record(&mut self, op: &Op, operands: &[Operand], location: SourceLocation) -> Result<Tensor> {
        let location = self.location_override.unwrap_or(location);
        let args = operands
            .iter()
            .map(|o| match o {
                Operand::Scalar(v) => Ok(Arg::Scalar(Scalar(*v))),
                Operand::Tensor(t) => self.node_of(t, location).map(Arg::Node),
            })
            .collect::<Result<Vec<_>>>()?;
        let id = self.graph.add_call(op.clone(), args, location)?;
        Ok(self.symbolic(id))
    }
}

/// Records `op` into the innermost active trace; `None` when no trace is recording on this thread
/// (the op then runs eagerly).
pub(crate) fn record(op: &Op, operands: &[Operand], location: SourceLocation) -> Option<Result<Tensor>> {
    let (decompositions, outer_override) = TRACES.with(|t| {
        let traces = t.borrow();
        let top = traces.last().filter(|s| !s.paused)?;
        Some((top.decompositions, top.location_override))
    })?;
    if let (Some(table), OpClass::Composite) = (decompositions, op.class()) {
        // The decomposition records its own ops through this function, so no borrow is held
        // while it runs; its nodes carry the composite's location.
        let effective = outer_override.unwrap_or(location);
        set_override(Some(effective));
        let decomposed = table(op, operands, effective);
        set_override(outer_override);
        if decomposed.is_some() {
            return decomposed;
        }
    }
    Some(TRACES.with(|t| t.borrow_mut().last_mut().expect("checked above").record(op, operands, location)))
}

fn set_override(location: Option<SourceLocation>) {
    TRACES.with(|t| {
        if let Some(top) = t.borrow_mut().last_mut() {
            top.location_override = location;
        }
    });
}

/// True while a trace is recording on this thread: inside a compiled function being captured.
pub fn is_tracing() -> bool {
    TRACES.with(|t| t.borrow().last().is_some_and(|s| !s.paused))
}

/// A concrete tensor with `tensor`'s value. Symbolic tensors have no value while tracing, so
/// asking for one is a graph break; `reason` says what needed the value.
pub(crate) fn concretize(tensor: &Tensor, reason: &str, location: SourceLocation) -> Result<Tensor> {
    if tensor.is_symbolic() {
        return Err(Error::GraphBreak { reason: reason.to_string(), location });
    }
    Ok(tensor.clone())
}
