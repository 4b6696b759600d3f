//! Guards, the checks Dynamo makes before it reuses a compiled graph: the global state the trace
//! depended on (autocast, the float32 matmul precision: Dynamo's `GLOBAL_STATE` guard), each
//! input's dtype, device, sizes (static ones exactly, symbolic ones through the graph's size
//! symbols) and layout, the scalar constants baked into the trace, and the path the code took.
//!
//! Dynamo checks guards *instead of* tracing again. A Rust closure cannot be inspected, so the
//! engine traces every call (microseconds) and then checks the new trace against each cached
//! graph. The input guards come first because they explain a miss best; the last guard compares
//! the whole trace with the cached graph, which covers constants and control flow. (A trace that
//! followed a cached graph to its end, `fx/proxy/cached_graph.rs`, is that graph: the comparison is then
//! one pointer check.)

use std::fmt;

use crate::device::Device;
use crate::dtype::DType;
use crate::fx::proxy::{InputOrigin, Traced};
use crate::fx::{Arg, Graph, Node, NodeKind};
use crate::precision::{AutocastState, MatmulPrecision, autocast_state, float32_matmul_precision};
use crate::tensor::Tensor;

/// Compares a trace's graph, in its form with the given dims of each input symbolic, with a cached
/// graph: the first difference, if any. (Comparing rather than returning the generalized graph
/// lets a static trace be compared in place, without a copy: a cache hit is on every call's path.)
pub(crate) type Compare<'a> = dyn FnMut(&[Vec<usize>], &Graph) -> Result<Option<String>, String> + 'a;

/// Why a cached graph does not fit a new trace.
#[derive(Clone, Debug)]
pub(crate) struct GuardFailure {
    pub message: String,
    /// `(input, dim)` when the failure is one size.
    pub size: Option<(usize, usize)>,
}

impl GuardFailure {
    fn new(message: String) -> GuardFailure {
        GuardFailure { message, size: None }
    }
}

/// What one input must look like.
#[derive(Clone, Debug)]
struct InputGuard {
    name: String,
    origin: InputOrigin,
    dtype: DType,
    device: Device,
    /// Exact strides of a static input; `None` for an input with symbolic sizes, which must be
    /// contiguous.
    strides: Option<Vec<usize>>,
    /// Whether gradients flow to the input (it requires grad and grad mode is on): a graph
    /// compiled with a backward serves only calls that want one, as Dynamo guards on
    /// `requires_grad` and on grad mode.
    requires_grad: bool,
}

/// Whether `tensor` needs a backward from a graph it enters now: it requires grad and grad mode
/// is on.
pub(crate) fn wants_grad(tensor: &Tensor) -> bool {
    tensor.requires_grad() && crate::tensor::autograd::is_grad_enabled()
}

/// The guards of one cached graph.
#[derive(Clone, Debug)]
pub(crate) struct Guards {
    /// Autocast as the trace saw it: its casts are in the graph.
    autocast: AutocastState,
    /// The float32 matmul precision the graph's GEMMs were chosen for.
    matmul_precision: MatmulPrecision,
    inputs: Vec<InputGuard>,
    /// For each input, the dims the cached graph was re-traced with as symbolic (some may have
    /// been specialized since); a new trace is compared after the same re-trace.
    dynamic_dims: Vec<Vec<usize>>,
}

impl Guards {
    /// The guards of `graph`, the trace re-traced with `dynamic_dims` symbolic, for the inputs it
    /// was traced with.
    pub fn new(graph: &Graph, traced: &Traced, inputs: &[Tensor], dynamic_dims: Vec<Vec<usize>>) -> Guards {
        let guards = graph.placeholders().iter().zip(inputs).zip(&traced.origins).map(|((&p, tensor), &origin)| {
            let node = graph.node(p);
            InputGuard {
                name: node.name.clone(),
                origin,
                dtype: tensor.dtype(),
                device: tensor.device(),
                strides: node.sym_shape.is_static().then(|| tensor.strides().unwrap_or_default().to_vec()),
                requires_grad: wants_grad(tensor),
            }
        });
        Guards {
            autocast: autocast_state(),
            matmul_precision: float32_matmul_precision(),
            inputs: guards.collect(),
            dynamic_dims,
        }
    }

    /// Checks a new trace against the cached `graph` these guards belong to. `compare` compares
    /// the trace's graph, with the given dims symbolic, with a cached graph.
    pub fn check(&self, graph: &Graph, inputs: &[Tensor], compare: &mut Compare<'_>) -> Result<(), GuardFailure> {
        if autocast_state() != self.autocast {
            return Err(GuardFailure::new(format!(
                "global state changed: autocast was {}, now {}",
                self.autocast,
                autocast_state()
            )));
        }
        if float32_matmul_precision() != self.matmul_precision {
            return Err(GuardFailure::new(format!(
                "global state changed: float32 matmul precision was {}, now {}",
                self.matmul_precision,
                float32_matmul_precision()
            )));
        }
        if inputs.len() != self.inputs.len() {
            return Err(GuardFailure::new(format!(
                "the traced code reads {} tensors, the cached graph {}",
                inputs.len(),
                self.inputs.len()
            )));
        }
        for (i, (guard, tensor)) in self.inputs.iter().zip(inputs).enumerate() {
            if tensor.dtype() != guard.dtype {
                return Err(GuardFailure::new(format!(
                    "input {i}: dtype mismatch, expected {}, got {}",
                    guard.dtype,
                    tensor.dtype()
                )));
            }
            if tensor.device() != guard.device {
                return Err(GuardFailure::new(format!(
                    "input {i}: device mismatch, expected {}, got {}",
                    guard.device,
                    tensor.device()
                )));
            }
            if wants_grad(tensor) != guard.requires_grad {
                return Err(GuardFailure::new(format!(
                    "input {i}: requires_grad mismatch, expected {}, got {} (with grad mode {})",
                    guard.requires_grad,
                    tensor.requires_grad(),
                    if crate::tensor::autograd::is_grad_enabled() { "on" } else { "off" }
                )));
            }
        }
        let shapes: Vec<&[usize]> = inputs.iter().map(Tensor::shape).collect();
        if let Err(mismatch) = graph.symbol_bindings(&shapes) {
            let size = mismatch.dim.map(|d| (mismatch.input, d));
            return Err(GuardFailure { message: mismatch.to_string(), size });
        }
        for (i, (guard, tensor)) in self.inputs.iter().zip(inputs).enumerate() {
            let strides = tensor.strides().unwrap_or_default();
            match &guard.strides {
                Some(expected) if expected != strides => {
                    return Err(GuardFailure::new(format!(
                        "input {i}: stride mismatch, expected {expected:?}, got {strides:?}"
                    )));
                }
                None if strides != crate::layout::contiguous_strides(tensor.shape()) => {
                    return Err(GuardFailure::new(format!(
                        "input {i}: expected a contiguous tensor (its sizes are dynamic), got strides {strides:?}"
                    )));
                }
                _ => {}
            }
        }
        match compare(&self.dynamic_dims, graph).map_err(GuardFailure::new)? {
            Some(difference) => Err(GuardFailure::new(difference)),
            None => Ok(()),
        }
    }

    /// The guards as a list for the `guards` log, one per line.
    pub fn describe(&self, graph: &Graph) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        // The global state, listed where it differs from the defaults (it is always checked).
        if !self.autocast.is_off() || self.matmul_precision != MatmulPrecision::Highest {
            lines.push(format!(
                "global state: autocast {}, float32 matmul precision {}",
                self.autocast, self.matmul_precision
            ));
        }
        for (i, (guard, &p)) in self.inputs.iter().zip(graph.placeholders()).enumerate() {
            let origin = match guard.origin {
                InputOrigin::Argument(n) => format!("argument {n}"),
                InputOrigin::Captured => "captured".into(),
                InputOrigin::Carried => "from the previous graph".into(),
                InputOrigin::Declared => "declared".into(),
            };
            let layout = match &guard.strides {
                Some(strides) => format!("strides {strides:?}"),
                None => "contiguous".into(),
            };
            let meta = graph.node(p).meta_text();
            let grad = if guard.requires_grad { ", requires grad" } else { "" };
            lines.push(format!("input {i} `{}` ({origin}): {meta} on {}, {layout}{grad}", guard.name, guard.device));
        }
        for (symbol, info) in graph.symbols() {
            let input = graph.placeholders().iter().position(|&p| p == info.placeholder).unwrap_or_default();
            lines.push(format!("{symbol} >= 2 (the size of input {input}, dim {})", info.dim));
        }
        lines.extend(graph.specializations().iter().map(|s| {
            let kind = if s.value.is_static() { "specialized" } else { "unified" };
            format!("{kind} {s}")
        }));
        for node in graph.nodes() {
            for (k, arg) in node.args().iter().enumerate() {
                if let Arg::Scalar(value) = arg {
                    lines.push(format!("constant {value} as argument {k} of `{}`{}", node.name, at(node)));
                }
            }
        }
        lines.push(format!("the same path through the code: these {} ops in this order", graph.calls()));
        lines
    }
}

fn at(node: &Node) -> String {
    node.location.map(|l| format!(" at {}", l.short())).unwrap_or_default()
}

/// The first way `new` differs from the `cached` graph, in words; `None` when they are equal.
pub(crate) fn first_difference(cached: &Graph, new: &Graph) -> Option<String> {
    // A trace that followed the cached graph to its end hands back that very graph.
    if std::ptr::eq(cached, new) || cached == new {
        return None;
    }
    for (a, b) in cached.nodes().iter().zip(new.nodes()) {
        if a.same_structure(b) {
            continue;
        }
        if let (NodeKind::Call { op: x, args: xs }, NodeKind::Call { op: y, args: ys }) = (&a.kind, &b.kind)
            && x == y
            && xs.len() == ys.len()
        {
            let constant = xs.iter().zip(ys).enumerate().find_map(|(k, pair)| match pair {
                (Arg::Scalar(p), Arg::Scalar(q)) if p != q => Some((k, p, q)),
                _ => None,
            });
            if let Some((k, expected, got)) = constant {
                return Some(format!(
                    "constant mismatch in `{}`{}, argument {k}: expected {expected}, got {got}",
                    x.name(),
                    at(b)
                ));
            }
            if xs == ys {
                return Some(format!(
                    "`{}`{} now has shape {}, the cached graph {}",
                    x.name(),
                    at(b),
                    b.meta_text(),
                    a.meta_text()
                ));
            }
        }
        return Some(format!(
            "the traced code took another path: the cached graph has `{}`{} where this trace has `{}`{}",
            describe(a),
            at(a),
            describe(b),
            at(b)
        ));
    }
    let (shorter, longer) = (cached.nodes().len().min(new.nodes().len()), cached.nodes().len().max(new.nodes().len()));
    if shorter != longer {
        let (which, extra) = if new.nodes().len() > shorter {
            ("this trace goes on with", &new.nodes()[shorter])
        } else {
            ("the cached graph goes on with", &cached.nodes()[shorter])
        };
        return Some(format!("the traced code took another path: {which} `{}`{}", describe(extra), at(extra)));
    }
    Some("the graph returns different values".into())
}

fn describe(node: &Node) -> String {
    match node.op() {
        Some(op) => op.name().to_string(),
        None => format!("input {}", node.name),
    }
}

impl fmt::Display for GuardFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
