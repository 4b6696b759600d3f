//! fx's entry in the dispatcher ([`crate::tensor::dispatch`]), the analogue of the proxy mode
//! that `make_fx` pushes: while a trace is active ops are recorded, symbolic tensors are made
//! concrete by graph breaks, and `cond` branches run through the interpreter.

use super::{captures_autograd, concretize, note_grad, record, replace_override, set_paused, values_for_display};
use crate::error::{Result, SourceLocation};
use crate::fx::interpreter::run_graph;
use crate::op::{Op, Subgraph};
use crate::tensor::autograd::LeafGrad;
use crate::tensor::dispatch::{self, DispatchMode};
use crate::tensor::{Operand, Tensor};

struct FxMode;

impl DispatchMode for FxMode {
    fn record(&self, op: &Op, operands: &[Operand], location: SourceLocation) -> Option<Result<Tensor>> {
        record(op, operands, location)
    }

    fn concretize(&self, tensor: &Tensor, reason: &str, location: SourceLocation) -> Result<Tensor> {
        concretize(tensor, reason, location)
    }

    fn values_for_display(&self, tensor: &Tensor) -> Option<Tensor> {
        values_for_display(tensor)
    }

    fn run_subgraph(&self, graph: &Subgraph, inputs: &[Tensor], location: SourceLocation) -> Result<Vec<Tensor>> {
        run_graph(graph, inputs, location)
    }

    fn pause(&self) -> bool {
        set_paused(true)
    }

    fn resume(&self) {
        set_paused(false);
    }

    fn override_location(&self, location: Option<SourceLocation>) -> Option<SourceLocation> {
        replace_override(location)
    }

    fn captures_autograd(&self) -> bool {
        captures_autograd()
    }

    fn note_grad(&self, leaf: LeafGrad) {
        note_grad(leaf);
    }
}

/// Plugs fx into the dispatcher; called before fx makes a symbolic tensor or a subgraph.
pub(crate) fn register() {
    dispatch::register(&FxMode);
}
