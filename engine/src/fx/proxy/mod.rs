//! Tracing with symbolic tensors, the analogue of FX proxies and `make_fx`: while a [`Tracer`] is
//! active on this thread, every op on a tensor records a node instead of running a kernel, and
//! returns a symbolic tensor that stands for the node's value.
//!
//! Dynamo uses a tracer to capture a closure; AOT uses one with a decomposition table to re-trace
//! a graph into primitive ops; `cond` uses one per branch. Concrete tensors that meet a trace (a
//! model's weights captured by the closure) are lifted into placeholders, as Dynamo lifts
//! parameters into graph inputs.
//!
//! **Graph breaks** (`breaks.rs`): code that needs a value the trace does not have makes a dynamo
//! capture run the graph so far and go on in a new graph.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

mod breaks;
mod follow;
mod mode;

pub use breaks::BreakReason;
pub(crate) use breaks::{
    CaptureHooks, at_statement, break_for_side_effect, breaks_allowed, concretize, values_for_display,
};
pub(crate) use mode::register as register_mode;

use rustc_hash::FxHashMap;

use super::graph::{Arg, Graph, Node, NodeId};
use crate::error::{Error, Result, SourceLocation};
use crate::layout::contiguous_strides;
use crate::op::{Op, OpClass, Subgraph};
use crate::scalar::Scalar;
use crate::tensor::{Operand, Repr, Symbolic, Tensor, TensorMeta};
use follow::Follow;

/// A decomposition table: returns the composite op's value built from other ops, or `None` to
/// record the op as it is.
pub type Decomposition = fn(&Op, &[Operand], SourceLocation) -> Option<Result<Tensor>>;

/// Where a placeholder's value comes from, which decides how guards name it and whether its
/// sizes may become dynamic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputOrigin {
    /// Argument number `i` of the compiled function.
    Argument(usize),
    /// A tensor the traced code captured rather than received: a model's weight (as Dynamo lifts
    /// parameters), or a tensor made on the host in the middle of the trace.
    Captured,
    /// A value an earlier graph of the same call computed, carried across a graph break.
    Carried,
    /// Declared from metadata with [`Tracer::placeholder`], or an operand of a `cond` branch.
    Declared,
}

/// The graph under construction and the bookkeeping that maps tensors to its nodes.
struct TraceState {
    id: u64,
    graph: Graph,
    /// A cached graph this trace is matching op for op instead of building `graph` (which stays
    /// empty meanwhile): see `follow.rs`.
    follow: Option<Follow>,
    /// The node currently holding each symbolic value of this trace (touched for every recorded
    /// op, on the per-call path of every compiled function).
    values: ValueNodes,
    next_value: u64,
    /// Every symbolic tensor handed out, to find the live ones at a graph break.
    handles: Vec<(u64, Weak<Repr>)>,
    /// Values an earlier graph computed, with the name of the node that computed them; lifted
    /// into the current graph when first used.
    carried: FxHashMap<u64, (Tensor, String)>,
    /// Tensors already lifted to placeholders, compared by identity.
    lifted: Vec<(Tensor, NodeId)>,
    /// The tensor bound to each placeholder, in placeholder order (`None` when the placeholder
    /// was declared from metadata only).
    bound: Vec<Option<Tensor>>,
    origins: Vec<InputOrigin>,
    paused: bool,
    decompositions: Option<Decomposition>,
    /// While a composite is being decomposed, the nodes it produces carry its location.
    location_override: Option<SourceLocation>,
    hooks: Option<Rc<dyn CaptureHooks>>,
    /// For a `cond` branch: the enclosing traces, whose tensors the branch may read (lifted as
    /// inputs of the branch).
    ancestors: Vec<u64>,
    /// The line of the last graph break, where the current graph resumed.
    resumed_at: Option<SourceLocation>,
    /// The learner's line of the statement running now, when a macro told us (`print!`).
    statement: Option<SourceLocation>,
    /// An error noticed where it could not be returned (inside `Display`), reported at the end.
    pending_error: Option<Error>,
}

/// The node of each symbolic value of a trace. Values are numbered densely from 0, so a vector
/// indexed by value maps them, with no hashing.
#[derive(Default)]
struct ValueNodes(Vec<Option<NodeId>>);

impl ValueNodes {
    fn get(&self, value: &u64) -> Option<&NodeId> {
        self.0.get(*value as usize)?.as_ref()
    }

    fn insert(&mut self, value: u64, node: NodeId) {
        let index = value as usize;
        if index >= self.0.len() {
            self.0.resize(index + 1, None);
        }
        self.0[index] = Some(node);
    }

    fn clear(&mut self) {
        self.0.iter_mut().for_each(|v| *v = None);
    }
}

thread_local! {
    /// Active traces, innermost last. Only the innermost one records.
    static TRACES: RefCell<Vec<TraceState>> = const { RefCell::new(Vec::new()) };
}

static NEXT_TRACE_ID: AtomicU64 = AtomicU64::new(1);

/// What a finished trace (or the part of one before a graph break) produced.
#[derive(Debug)]
pub struct Traced {
    /// The recorded graph, with its outputs set.
    pub graph: Graph,
    /// The tensor for each placeholder, in order; `None` for placeholders declared with
    /// [`Tracer::placeholder`].
    pub inputs: Vec<Option<Tensor>>,
    /// Where each placeholder's value comes from.
    pub origins: Vec<InputOrigin>,
    /// The line of the graph break this graph resumed after (`None` for a call's first graph):
    /// the analogue of Dynamo's resume functions, each with its own cache.
    pub resumed_at: Option<SourceLocation>,
    /// Set when a dynamo capture's trace repeated a cached graph node for node: that graph, not
    /// copied (`graph` is then empty). Such a trace never leaves the crate.
    pub(crate) repeated: Option<Arc<Graph>>,
}

impl Traced {
    /// The graph this trace recorded: the cached graph it repeated, or its own.
    pub(crate) fn recorded(&self) -> &Graph {
        self.repeated.as_deref().unwrap_or(&self.graph)
    }
}

/// An active trace on this thread. Dropping it without [`Tracer::finish`] abandons the graph.
///
/// A tracer records the ops of the thread that started it (its state is thread-local), so it
/// cannot be sent to another thread:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// send(engine::fx::proxy::Tracer::new());
/// ```
pub struct Tracer {
    id: u64,
    /// Not `Send` or `Sync`: dropping or finishing it on another thread would end that thread's
    /// innermost trace instead.
    _this_thread: PhantomData<*const ()>,
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer::new()
    }
}

impl Tracer {
    /// Starts recording ops on this thread. A graph break is an error in this trace.
    pub fn new() -> Tracer {
        Tracer::start(None, None, Vec::new())
    }

    /// Starts recording ops, replacing each composite op by its decomposition from `table`.
    pub fn with_decompositions(table: Decomposition) -> Tracer {
        Tracer::start(Some(table), None, Vec::new())
    }

    /// Starts a dynamo capture: graph breaks go to `hooks`.
    pub(crate) fn capture(hooks: Rc<dyn CaptureHooks>) -> Tracer {
        Tracer::start(None, Some(hooks), Vec::new())
    }

    /// Starts tracing a `cond` branch inside the innermost trace, which it may read tensors from.
    pub(crate) fn branch() -> Tracer {
        let ancestors = TRACES.with(|t| {
            t.borrow().last().map(|s| s.ancestors.iter().copied().chain([s.id]).collect()).unwrap_or_default()
        });
        Tracer::start(None, None, ancestors)
    }

    fn start(
        decompositions: Option<Decomposition>,
        hooks: Option<Rc<dyn CaptureHooks>>,
        ancestors: Vec<u64>,
    ) -> Tracer {
        // The ops this trace sees reach it through the dispatcher.
        mode::register();
        let id = NEXT_TRACE_ID.fetch_add(1, Ordering::Relaxed);
        TRACES.with(|t| {
            let follow = hooks.as_ref().and_then(|h| h.graph_to_follow()).map(Follow::new);
            t.borrow_mut().push(TraceState {
                id,
                graph: Graph::new(),
                follow,
                values: ValueNodes::default(),
                next_value: 0,
                handles: Vec::with_capacity(32),
                carried: FxHashMap::default(),
                lifted: Vec::new(),
                bound: Vec::new(),
                origins: Vec::new(),
                paused: false,
                decompositions,
                location_override: None,
                hooks,
                ancestors,
                resumed_at: None,
                statement: None,
                pending_error: None,
            })
        });
        Tracer { id, _this_thread: PhantomData }
    }

    fn with_state<R>(&self, f: impl FnOnce(&mut TraceState) -> R) -> R {
        with_trace(self.id, f).expect("a live Tracer has its state")
    }

    /// Declares a graph input from metadata alone and returns the symbolic tensor standing for it.
    pub fn placeholder(&self, name: &str, meta: TensorMeta, strides: Vec<usize>) -> Tensor {
        self.with_state(|s| {
            s.stop_following();
            let id = s.graph.add_placeholder(name, meta, strides);
            s.declared(id)
        })
    }

    /// Declares one input per placeholder of `graph`, with the same names, layouts and symbolic
    /// sizes, and returns the symbolic tensors standing for them: how a graph is re-traced.
    pub fn placeholders_like(&self, graph: &Graph) -> Vec<Tensor> {
        self.with_state(|s| {
            s.stop_following();
            s.graph.add_placeholders_like(graph).into_iter().map(|id| s.declared(id)).collect()
        })
    }

    /// Declares an input whose sizes at `dims` are symbolic (see [`Graph::add_dynamic_placeholder`]).
    pub fn dynamic_placeholder(&self, name: &str, meta: TensorMeta, strides: Vec<usize>, dims: &[usize]) -> Tensor {
        self.with_state(|s| {
            s.stop_following();
            let id = s.graph.add_dynamic_placeholder(name, meta, strides, dims);
            s.declared(id)
        })
    }

    /// Declares argument `index` of the traced function, bound to a concrete tensor (named after
    /// it, or `arg<N>`), and returns the symbolic tensor standing for it.
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
            let argument = s.origins.iter().filter(|o| matches!(o, InputOrigin::Argument(_))).count();
            let node = s.add_input(tensor, &name, InputOrigin::Argument(argument));
            Ok(s.symbolic(node))
        })
    }

    /// Declares an operand of a `cond` branch: a placeholder for `tensor` (a tensor of the
    /// enclosing trace, or a concrete one) that later uses of the same tensor also read.
    pub(crate) fn operand(&self, tensor: &Tensor) -> Tensor {
        self.with_state(|s| {
            let name = format!("arg{}", s.bound.len());
            let node = s.add_input(tensor, &name, InputOrigin::Declared);
            s.symbolic(node)
        })
    }

    /// Ends the trace: the graph returns `outputs` (concrete ones are lifted to placeholders).
    #[track_caller]
    pub fn finish(self, outputs: &[Tensor]) -> Result<Traced> {
        let location = SourceLocation::caller();
        let ids = self.with_state(|s| outputs.iter().map(|t| s.node_of(t, location)).collect::<Result<Vec<_>>>())?;
        let mut state = TRACES.with(|t| {
            let mut traces = t.borrow_mut();
            let index = traces.iter().position(|s| s.id == self.id).expect("a live Tracer has its state");
            traces.remove(index)
        });
        if let Some(error) = state.pending_error.take() {
            return Err(error);
        }
        Ok(state.take_graph(ids))
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        // Ignore a thread-local already torn down at thread exit.
        let _ = TRACES.try_with(|t| t.borrow_mut().retain(|s| s.id != self.id));
    }
}

/// Runs `f` on the state of trace `id`, if it is active.
fn with_trace<R>(id: u64, f: impl FnOnce(&mut TraceState) -> R) -> Option<R> {
    TRACES.with(|t| t.borrow_mut().iter_mut().find(|s| s.id == id).map(f))
}

impl TraceState {
    /// Node `id` of the graph so far (the followed graph's while it is followed).
    fn node(&self, id: NodeId) -> &Node {
        match &self.follow {
            Some(follow) => follow.node(id),
            None => self.graph.node(id),
        }
    }

    /// The placeholders of the graph so far (while a graph is followed, its placeholders, of which
    /// the trace has met a prefix).
    fn placeholders(&self) -> &[NodeId] {
        match &self.follow {
            Some(follow) => follow.placeholders(),
            None => self.graph.placeholders(),
        }
    }

    /// Stops following: the graph so far is built as a plain trace would have built it.
    fn stop_following(&mut self) {
        if let Some(follow) = self.follow.take() {
            self.graph = follow.rebuild();
        }
    }

    /// A new symbolic tensor for the value of `node`.
    fn symbolic(&mut self, node: NodeId) -> Tensor {
        let value = self.next_value;
        self.next_value += 1;
        self.values.insert(value, node);
        let meta = self.node(node).meta.clone();
        let tensor = Tensor::from_symbolic(Symbolic { trace: self.id, value, meta });
        self.handles.push((value, Arc::downgrade(&tensor.repr)));
        tensor
    }

    fn declared(&mut self, node: NodeId) -> Tensor {
        self.bound.push(None);
        self.origins.push(InputOrigin::Declared);
        self.symbolic(node)
    }

    /// A new placeholder bound to `tensor`; later uses of the same tensor read it too.
    fn add_input(&mut self, tensor: &Tensor, name: &str, origin: InputOrigin) -> NodeId {
        let meta = tensor.meta();
        let strides = tensor.strides().map_or_else(|| contiguous_strides(&meta.shape), <[usize]>::to_vec);
        let followed = self.follow.as_mut().and_then(|f| f.input(name, &meta, &strides));
        if followed.is_none() {
            self.stop_following();
        }
        let id = followed.unwrap_or_else(|| self.graph.add_placeholder(name, meta, strides));
        if !self.lifted.iter().any(|(t, _)| Arc::ptr_eq(&t.repr, &tensor.repr)) {
            self.lifted.push((tensor.clone(), id));
        }
        self.bound.push(Some(tensor.clone()));
        self.origins.push(origin);
        id
    }

    /// The placeholder for a tensor from outside this graph, adding one the first time it is seen.
    fn lifted_node(&mut self, tensor: &Tensor, name: &str, origin: InputOrigin) -> NodeId {
        match self.lifted.iter().find(|(t, _)| Arc::ptr_eq(&t.repr, &tensor.repr)) {
            Some((_, id)) => *id,
            None => self.add_input(tensor, name, origin),
        }
    }

    /// The node a tensor stands for in this trace: its own node if symbolic, a lifted placeholder
    /// if concrete, carried across a break, or read from the enclosing trace by a `cond` branch.
    fn node_of(&mut self, tensor: &Tensor, location: SourceLocation) -> Result<NodeId> {
        match tensor.symbolic() {
            None => {
                let name = tensor.name().unwrap_or("captured").to_string();
                Ok(self.lifted_node(tensor, &name, InputOrigin::Captured))
            }
            Some(s) if s.trace == self.id => {
                if let Some(&node) = self.values.get(&s.value) {
                    return Ok(node);
                }
                let (value, name) = self.carried.get(&s.value).cloned().ok_or_else(|| Error::Capture {
                    message: "a symbolic tensor outlived the graph that computed it".into(),
                    location,
                })?;
                let node = self.lifted_node(&value, &name, InputOrigin::Carried);
                self.values.insert(s.value, node);
                Ok(node)
            }
            Some(s) if self.ancestors.contains(&s.trace) => {
                Ok(self.lifted_node(tensor, &format!("arg{}", self.bound.len()), InputOrigin::Declared))
            }
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
        if let Some(id) = self.follow.as_mut().and_then(|f| f.call(op, &args, location)) {
            return Ok(self.symbolic(id));
        }
        self.stop_following();
        let id = self.graph.add_call(op.clone(), args, location)?;
        Ok(self.symbolic(id))
    }

    /// Moves the graph out with `outputs` set, leaving an empty graph for the trace to go on in.
    fn take_graph(&mut self, outputs: Vec<NodeId>) -> Traced {
        let repeated = self.follow.as_ref().and_then(|f| f.finished(&outputs));
        if repeated.is_none() {
            self.stop_following();
        }
        self.follow = None;
        let mut graph = std::mem::take(&mut self.graph);
        if repeated.is_none() {
            graph.set_outputs(outputs).expect("a trace's outputs are nodes of its graph");
        }
        self.values.clear();
        self.lifted.clear();
        Traced {
            graph,
            inputs: std::mem::take(&mut self.bound),
            origins: std::mem::take(&mut self.origins),
            resumed_at: self.resumed_at,
            repeated,
        }
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
    let fitted;
    let op = match op {
        Op::Cond { .. } => match fit_cond(op, operands, location) {
            Ok(f) => {
                fitted = f;
                &fitted
            }
            Err(e) => return Some(Err(e)),
        },
        _ => op,
    };
    if let (Some(table), OpClass::Composite | OpClass::HigherOrder) = (decompositions, op.class()) {
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

/// The `cond` with each branch exactly as dynamic as the operand it receives in the innermost
/// trace, so that a dynamic graph's branches run for every size the graph runs for.
fn fit_cond(op: &Op, operands: &[Operand], location: SourceLocation) -> Result<Op> {
    let Op::Cond { true_graph, false_graph } = op else { return Ok(op.clone()) };
    let wanted = TRACES.with(|t| {
        let mut traces = t.borrow_mut();
        let top = traces.last_mut().expect("record checked for a trace");
        operands[1..]
            .iter()
            .map(|o| match o {
                Operand::Tensor(t) => top.node_of(t, location).map(|n| {
                    let shape = &top.node(n).sym_shape;
                    (0..shape.rank()).filter(|&d| !shape.dims()[d].is_static()).collect()
                }),
                Operand::Scalar(_) => Ok(Vec::new()),
            })
            .collect::<Result<Vec<Vec<usize>>>>()
    })?;
    let fit = |g: &Subgraph| -> Result<Subgraph> {
        if g.dynamic_dims() == wanted { Ok(g.clone()) } else { g.with_dynamic_dims(&wanted).map(Subgraph::from) }
    };
    Ok(Op::Cond { true_graph: fit(true_graph)?, false_graph: fit(false_graph)? })
}

fn set_override(location: Option<SourceLocation>) {
    TRACES.with(|t| {
        if let Some(top) = t.borrow_mut().last_mut() {
            top.location_override = location;
        }
    });
}

/// Captures `f` on `inputs` into a graph, the analogue of `make_fx`: each input becomes a
/// placeholder (bound to that tensor in [`Traced::inputs`]), every op `f` applies is recorded, and
/// the tensors it returns are the graph's outputs. This is how `Compiled::call` traces, without
/// the cache, guards or graph breaks (a break is an error here).
///
/// ```
/// use engine::{fx, Tensor};
/// let x = Tensor::randn(&[2, 3], 0);
/// let traced = fx::trace(&[x], |xs| Ok(vec![xs[0].relu()?.sum(-1, false)?]))?;
/// assert_eq!(traced.graph.op_count(), 2);
/// # Ok::<(), engine::Error>(())
/// ```
pub fn trace(inputs: &[Tensor], f: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>) -> Result<Traced> {
    let tracer = Tracer::new();
    let symbolic = inputs.iter().map(|t| tracer.input(t)).collect::<Result<Vec<_>>>()?;
    let outputs = f(&symbolic)?;
    tracer.finish(&outputs)
}

/// True while a trace is recording on this thread: inside a compiled function being captured.
pub fn is_tracing() -> bool {
    TRACES.with(|t| t.borrow().last().is_some_and(|s| !s.paused))
}
