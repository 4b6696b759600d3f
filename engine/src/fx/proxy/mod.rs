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

use std::borrow::Cow;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod breaks;
mod cached_graph;
mod dispatch_mode;
mod names;
mod side_effects;
mod values;

pub use breaks::BreakReason;
pub(crate) use breaks::{
    CaptureHooks, at_statement, break_for_side_effect, breaks_allowed, concretize, values_for_display,
};
pub(crate) use dispatch_mode::register as register_mode;
pub(crate) use side_effects::{captures_autograd, note_grad};

use rustc_hash::FxHashMap;

use super::graph::{Arg, Graph, Node, NodeId};
use crate::error::{Error, Result, SourceLocation};
use crate::layout::contiguous_strides;
use crate::op::{Op, OpClass, Subgraph};
use crate::scalar::Scalar;
use crate::tensor::{Dims, Operand, Symbolic, Tensor, TensorMeta};
use cached_graph::FollowedGraph;
use names::InputName;
use side_effects::Mutation;
use values::Values;

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
    /// empty meanwhile): see `cached_graph.rs`.
    follow: Option<FollowedGraph>,
    /// Every symbolic tensor handed out, and the node holding its value.
    values: Values,
    /// The arguments of the op being recorded: one buffer for every op of the trace, since a
    /// followed op's arguments are only compared, never kept.
    args: Vec<Arg>,
    /// Values an earlier graph computed, with the name of the node that computed them; lifted
    /// into the current graph when first used.
    carried: FxHashMap<u64, (Tensor, String)>,
    /// The tensor bound to each placeholder, in placeholder order (`None` when the placeholder
    /// was declared from metadata only). A tensor met again reads the placeholder it was first
    /// bound to.
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
    /// Whether concrete tensors this trace captures go on autograd's tape (compiled autograd).
    captures_autograd: bool,
    /// The writes into graph inputs of the graph so far (see `side_effects.rs`).
    mutations: Vec<Mutation>,
    /// Leaves a traced backward left a symbolic gradient in, over the whole trace.
    grads: Vec<crate::tensor::autograd::LeafGrad>,
    /// Whether a backward was traced into the graph so far.
    backward_in_graph: bool,
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
    /// Whether the graph changes state outside itself: it writes tensors from outside the function
    /// (`copy_` nodes, its last outputs) or a backward traced in it computes gradients for leaves.
    /// Such a graph runs as it is, outside autograd, with no backward of its own.
    pub updates_state: bool,
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
        dispatch_mode::register();
        let id = NEXT_TRACE_ID.fetch_add(1, Ordering::Relaxed);
        TRACES.with(|t| {
            let follow = hooks.as_ref().and_then(|h| h.graph_to_follow()).map(FollowedGraph::new);
            let captures_autograd = hooks.as_ref().is_some_and(|h| h.captures_autograd());
            t.borrow_mut().push(TraceState {
                id,
                graph: Graph::new(),
                follow,
                values: Values::default(),
                args: Vec::new(),
                carried: FxHashMap::default(),
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
                captures_autograd,
                mutations: Vec::new(),
                grads: Vec::new(),
                backward_in_graph: false,
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
        crate::wires::trip(crate::wires::Wire::DynamicPlaceholder);
        self.symbolic_placeholder(name, meta, strides, dims)
    }

    /// [`Tracer::dynamic_placeholder`], for the engine's own use (a graph re-traced with dynamic
    /// sizes), past its trip wire.
    pub(crate) fn symbolic_placeholder(
        &self,
        name: &str,
        meta: TensorMeta,
        strides: Vec<usize>,
        dims: &[usize],
    ) -> Tensor {
        self.with_state(|s| {
            s.stop_following();
            let id = s.graph.add_symbolic_placeholder(name, meta, strides, dims);
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
            let name = tensor.name().map_or(InputName::Arg(s.bound.len()), InputName::Given);
            let argument = s.origins.iter().filter(|o| matches!(o, InputOrigin::Argument(_))).count();
            let node = s.add_input(tensor, name, InputOrigin::Argument(argument));
            Ok(s.symbolic(node))
        })
    }

    /// Declares an operand of a `cond` branch: a placeholder for `tensor` (a tensor of the
    /// enclosing trace, or a concrete one) that later uses of the same tensor also read.
    pub(crate) fn operand(&self, tensor: &Tensor) -> Tensor {
        self.with_state(|s| {
            let node = s.add_input(tensor, InputName::Arg(s.bound.len()), InputOrigin::Declared);
            s.symbolic(node)
        })
    }

    /// Ends the trace: the graph returns `outputs` (concrete ones are lifted to placeholders).
    #[track_caller]
    pub fn finish(self, outputs: &[Tensor]) -> Result<Traced> {
        let location = SourceLocation::caller();
        // The graph is taken out where the state lies; dropping `self` then drops the state in
        // place (moving it out first would copy it, on every call of a compiled function).
        self.with_state(|s| {
            let ids = outputs.iter().map(|t| s.node_of(t, location)).collect::<Result<Vec<_>>>()?;
            match s.pending_error.take() {
                Some(error) => Err(error),
                None => Ok(s.take_graph(ids)),
            }
        })
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

    /// A new symbolic tensor for the value of `node` (inlined: see [`TraceState::record`]).
    #[inline(always)]
    fn symbolic(&mut self, node: NodeId) -> Tensor {
        let meta = &self.node(node).meta;
        let (value, shape) = (self.values.next(), Dims::new(&meta.shape));
        let symbolic = Symbolic { trace: self.id, value, shape, dtype: meta.dtype, device: meta.device };
        self.values.add(node, symbolic)
    }

    fn declared(&mut self, node: NodeId) -> Tensor {
        self.bound.push(None);
        self.origins.push(InputOrigin::Declared);
        self.symbolic(node)
    }

    /// A new placeholder bound to `tensor`; later uses of the same tensor read it too.
    fn add_input(&mut self, tensor: &Tensor, name: InputName, origin: InputOrigin) -> NodeId {
        let followed = self.follow.as_mut().and_then(|f| f.input(name, tensor));
        let id = followed.unwrap_or_else(|| {
            self.stop_following();
            let strides = input_strides(tensor).into_owned();
            self.graph.add_placeholder(&name.to_string(), tensor.meta(), strides)
        });
        self.bound.push(Some(tensor.clone()));
        self.origins.push(origin);
        id
    }

    /// The placeholder for a tensor from outside this graph, adding one the first time it is seen.
    fn lifted_node(&mut self, tensor: &Tensor, name: InputName, origin: InputOrigin) -> NodeId {
        let same = |bound: &Option<Tensor>| bound.as_ref().is_some_and(|t| Arc::ptr_eq(&t.repr, &tensor.repr));
        match self.bound.iter().position(same) {
            // A tensor the graph wrote reads as the value written.
            Some(index) => {
                let placeholder = self.placeholders()[index];
                self.written(placeholder).unwrap_or(placeholder)
            }
            None => self.add_input(tensor, name, origin),
        }
    }

    /// The node a tensor stands for in this trace: its own node if symbolic, a lifted placeholder
    /// if concrete, carried across a break, or read from the enclosing trace by a `cond` branch.
    /// (Inlined: see [`TraceState::record`].)
    #[inline(always)]
    fn node_of(&mut self, tensor: &Tensor, location: SourceLocation) -> Result<NodeId> {
        // Nearly every operand is a value of the current graph: that case is answered here, the
        // others out of line.
        if let Some(s) = tensor.symbolic()
            && s.trace == self.id
            && let Some(node) = self.values.node(s.value)
        {
            return Ok(node);
        }
        self.node_of_other(tensor, location)
    }

    /// [`TraceState::node_of`] for a tensor that is not a value of the current graph.
    fn node_of_other(&mut self, tensor: &Tensor, location: SourceLocation) -> Result<NodeId> {
        match tensor.symbolic() {
            None => {
                let name = InputName::Given(tensor.name().unwrap_or("captured"));
                Ok(self.lifted_node(tensor, name, InputOrigin::Captured))
            }
            Some(s) if s.trace == self.id => {
                let (value, name) = self.carried.get(&s.value).cloned().ok_or_else(|| Error::Capture {
                    message: "a symbolic tensor outlived the graph that computed it".into(),
                    location,
                })?;
                let node = self.lifted_node(&value, InputName::Given(&name), InputOrigin::Carried);
                self.values.set_node(s.value, node);
                Ok(node)
            }
            Some(s) if self.ancestors.contains(&s.trace) => {
                Ok(self.lifted_node(tensor, InputName::Arg(self.bound.len()), InputOrigin::Declared))
            }
            Some(_) => Err(Error::Capture {
                message: "this tensor belongs to another compiled function's trace; tensors seen inside a compiled \
                          function exist only during that call, so return it from that function instead"
                    .into(),
                location,
            }),
        }
    }

    /// Whether `op` is rewritten before it is recorded: a `cond` fitted to its operands, or a
    /// composite this trace decomposes.
    fn rewrites(&self, op: &Op) -> bool {
        matches!(op, Op::Cond { .. })
            || self.decompositions.is_some() && matches!(op.class(), OpClass::Composite | OpClass::HigherOrder)
    }

    /// Records `op` on `operands`: matched against the followed graph, or added to the graph.
    ///
    /// This and what it calls for a followed op (`record_with`, `node_of`, `symbolic`,
    /// `Values::add`) are inlined into [`record`]: a cached call runs this once per op, and as
    /// separate frames each handed back a `Result<Tensor>` (88 bytes, the size of [`Error`]) to the
    /// next; inlining them made a cached call's trace about a tenth faster.
    #[inline(always)]
    fn record(&mut self, op: &Op, operands: &[Operand], location: SourceLocation) -> Result<Tensor> {
        let location = self.location_override.unwrap_or(location);
        let mut args = std::mem::take(&mut self.args);
        let recorded = self.record_with(op, operands, location, &mut args);
        self.args = args;
        recorded
    }

    /// [`TraceState::record`], with `args` the buffer for the op's arguments (inlined: see there).
    #[inline(always)]
    fn record_with(
        &mut self,
        op: &Op,
        operands: &[Operand],
        location: SourceLocation,
        args: &mut Vec<Arg>,
    ) -> Result<Tensor> {
        args.clear();
        for operand in operands {
            args.push(match operand {
                Operand::Scalar(v) => Arg::Scalar(Scalar(*v)),
                Operand::Tensor(t) => Arg::Node(self.node_of(t, location)?),
            });
        }
        if let (Op::CopyInto, [Arg::Node(target), ..]) = (op, args.as_slice()) {
            let input = self.copy_target(*target, location)?;
            args[0] = Arg::Node(input);
            let id = self.add_or_follow(op, args, location)?;
            if let Operand::Tensor(tensor) = operands[0] {
                self.note_copy(input, id, tensor);
            }
            return Ok(self.symbolic(id));
        }
        let id = self.add_or_follow(op, args, location)?;
        Ok(self.symbolic(id))
    }

    /// The node for `op` on `args`: the followed graph's, or a new one (inlined: see
    /// [`TraceState::record`]).
    #[inline(always)]
    fn add_or_follow(&mut self, op: &Op, args: &mut Vec<Arg>, location: SourceLocation) -> Result<NodeId> {
        if let Some(id) = self.follow.as_mut().and_then(|f| f.call(op, args, location)) {
            return Ok(id);
        }
        self.stop_following();
        // The graph keeps the arguments: the buffer goes with them.
        self.graph.add_call(op.clone(), std::mem::take(args), location)
    }

    /// Moves the graph out with `outputs` set (and after them the writes into inputs, which the
    /// graph performs), leaving an empty graph for the trace to go on in.
    fn take_graph(&mut self, outputs: Vec<NodeId>) -> Traced {
        let updates_state = self.updates_state();
        self.backward_in_graph = false;
        let outputs = self.with_writes(outputs);
        let repeated = self.follow.as_ref().and_then(|f| f.finished(&outputs));
        if repeated.is_none() {
            self.stop_following();
        }
        self.follow = None;
        let mut graph = std::mem::take(&mut self.graph);
        if repeated.is_none() {
            graph.set_outputs(outputs).expect("a trace's outputs are nodes of its graph");
        }
        self.values.leave_graph();
        Traced {
            graph,
            inputs: std::mem::take(&mut self.bound),
            origins: std::mem::take(&mut self.origins),
            resumed_at: self.resumed_at,
            repeated,
            updates_state,
        }
    }
}

/// The strides a placeholder for `tensor` has: a concrete tensor's own, a symbolic one's
/// contiguous (a traced value has no memory yet).
fn input_strides(tensor: &Tensor) -> Cow<'_, [usize]> {
    tensor.strides().map_or_else(|| Cow::Owned(contiguous_strides(tensor.shape())), Cow::Borrowed)
}

/// Records `op` into the innermost active trace; `None` when no trace is recording on this thread
/// (the op then runs eagerly).
pub(crate) fn record(op: &Op, operands: &[Operand], location: SourceLocation) -> Option<Result<Tensor>> {
    // Most ops, on every call of a compiled function, are recorded under this one borrow; an op
    // the trace rewrites first leaves the trace's decomposition table and location here.
    let mut rewrite = None;
    let recorded = TRACES.with(|t| {
        let mut traces = t.borrow_mut();
        let top = traces.last_mut().filter(|s| !s.paused)?;
        if top.rewrites(op) {
            rewrite = Some((top.decompositions, top.location_override));
            return None;
        }
        Some(top.record(op, operands, location))
    });
    let Some((decompositions, outer_override)) = rewrite else { return recorded };
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
        if g.dynamic_dims() == wanted { Ok(g.clone()) } else { g.generalized(&wanted).map(Subgraph::from) }
    };
    Ok(Op::Cond { true_graph: fit(true_graph)?, false_graph: fit(false_graph)? })
}

/// Pauses (or resumes) the innermost trace on this thread; returns whether its state changed.
pub(crate) fn set_paused(paused: bool) -> bool {
    TRACES.with(|t| t.borrow_mut().last_mut().filter(|s| s.paused != paused).map(|s| s.paused = paused).is_some())
}

/// Sets the innermost trace's location override, returning the one it had.
pub(crate) fn replace_override(location: Option<SourceLocation>) -> Option<SourceLocation> {
    TRACES.with(|t| t.borrow_mut().last_mut().and_then(|top| std::mem::replace(&mut top.location_override, location)))
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
