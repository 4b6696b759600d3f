//! The dispatcher's hook for the layer above, the analogue of PyTorch's Python and proxy
//! dispatch keys: before an op reaches an eager kernel, a registered [`DispatchMode`] may take it (fx's
//! tracer records it into a graph instead), and higher-order ops whose bodies are fx graphs run
//! through it.
//!
//! Tensors and eager kernels sit below fx in the engine's layers, so this layer cannot call the
//! tracer by name. fx registers its mode once, the first time it starts a trace or builds a
//! [`Subgraph`](crate::op::Subgraph), the way `torch.library` registrations plug kernels into
//! the dispatcher from above. Before that no symbolic tensor and no subgraph can exist, so every
//! op runs eagerly.

use std::sync::OnceLock;

use crate::error::{Result, SourceLocation};
use crate::op::{Op, Subgraph};
use crate::tensor::autograd::LeafGrad;
use crate::tensor::{Operand, Tensor};

/// What the layer above the eager kernels (fx) provides to the dispatcher.
pub(crate) trait DispatchMode: Sync {
    /// Records `op` into the active trace on this thread; `None` when nothing is tracing (the op
    /// then runs eagerly).
    fn record(&self, op: &Op, operands: &[Operand], location: SourceLocation) -> Option<Result<Tensor>>;

    /// A concrete tensor with the values of the symbolic `tensor` (a graph break in a capture),
    /// or an error saying why there is none; `reason` says what needs the values.
    fn concretize(&self, tensor: &Tensor, reason: &str, location: SourceLocation) -> Result<Tensor>;

    /// The values of a symbolic tensor for `Display`, or `None` when they cannot be had (the
    /// trace then reports why at its end).
    fn values_for_display(&self, tensor: &Tensor) -> Option<Tensor>;

    /// Runs a subgraph on concrete inputs (a `cond` branch, run eagerly).
    fn run_subgraph(&self, graph: &Subgraph, inputs: &[Tensor], location: SourceLocation) -> Result<Vec<Tensor>>;

    /// Stops the innermost trace on this thread from recording, if one is recording; returns
    /// whether it did (then [`Mode::resume`] undoes it).
    fn pause(&self) -> bool;

    /// Lets the innermost trace record again after [`Mode::pause`].
    fn resume(&self);

    /// Makes the innermost trace record every op with `location` (or with its own caller's
    /// line again, for `None`); returns the setting it replaces.
    fn override_location(&self, location: Option<SourceLocation>) -> Option<SourceLocation>;

    /// Whether the innermost recording trace puts the concrete tensors it captures on autograd's
    /// tape (a compiled function with compiled autograd): then a `backward()` inside it is traced
    /// into its graph instead of breaking it.
    fn captures_autograd(&self) -> bool;

    /// Tells the innermost trace that a traced backward left a symbolic gradient in `leaf`'s
    /// `.grad`, which the graph must compute and the capture hand to the leaf when it has run.
    fn note_grad(&self, leaf: LeafGrad);
}

/// While it lives, ops run on the eager kernels even inside a trace: autograd's backward of
/// concrete values run from traced code (a `backward()` that broke the graph) computes them now.
pub(crate) struct Untraced {
    paused: bool,
}

/// Pauses the trace recording on this thread, if any, until the guard drops.
pub(crate) fn untraced() -> Untraced {
    Untraced { paused: mode().is_some_and(|m| m.pause()) }
}

impl Drop for Untraced {
    fn drop(&mut self) {
        if self.paused
            && let Some(mode) = mode()
        {
            mode.resume();
        }
    }
}

static MODE: OnceLock<&'static dyn DispatchMode> = OnceLock::new();

/// Registers the mode of the layer above; later registrations are ignored (there is one fx).
pub(crate) fn register(mode: &'static dyn DispatchMode) {
    MODE.get_or_init(|| mode);
}

/// The registered mode, if fx has started a trace or built a subgraph in this process.
pub(crate) fn mode() -> Option<&'static dyn DispatchMode> {
    MODE.get().copied()
}
