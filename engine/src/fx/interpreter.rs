//! Running a graph node by node, the analogue of `torch.fx.Interpreter`: each op call runs its
//! eager kernel (or, inside a trace, records itself again, which is how AOT re-traces graphs).
//!
//! A dynamic graph first reads its size symbols from the inputs' shapes (checking the sizes it
//! relies on), then evaluates the size parameters of its reshapes and expands for this call.

use super::graph::{Arg, Graph, NodeKind};
use crate::error::{Error, Result, SourceLocation};
use crate::tensor::{Operand, Tensor};

/// Evaluates a graph on concrete (or symbolic) inputs.
#[derive(Clone, Debug)]
pub struct Interpreter {
    graph: Graph,
}

impl Interpreter {
    /// An interpreter for `graph`.
    pub fn new(graph: Graph) -> Self {
        Interpreter { graph }
    }

    /// The graph being interpreted.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs the graph: placeholders take `inputs` in order, every call node applies its op, and
    /// the output nodes' values are returned.
    #[track_caller]
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        crate::wires::trip(crate::wires::Wire::FxInterpreter);
        run_graph(&self.graph, inputs, SourceLocation::caller())
    }
}

/// Runs `graph` on `inputs` as [`Interpreter::run`] does; `here` names the caller in errors.
pub(crate) fn run_graph(graph: &Graph, inputs: &[Tensor], here: SourceLocation) -> Result<Vec<Tensor>> {
    let shapes: Vec<&[usize]> = inputs.iter().map(Tensor::shape).collect();
    let bindings =
        graph.symbol_bindings(&shapes).map_err(|m| Error::Capture { message: m.to_string(), location: here })?;
    let mut values: Vec<Option<Tensor>> = vec![None; graph.nodes().len()];
    for (&id, input) in graph.placeholders().iter().zip(inputs) {
        values[id.index()] = Some(input.clone());
    }
    // Like FX's interpreter, free each value after its last use, so that memory stays what eager
    // execution needs rather than growing with the graph.
    let mut last_use: Vec<usize> = (0..graph.nodes().len()).collect();
    for id in graph.ids() {
        for input in graph.node(id).inputs() {
            last_use[input.index()] = id.index();
        }
    }
    for &output in graph.outputs() {
        last_use[output.index()] = usize::MAX;
    }
    for id in graph.ids() {
        let node = graph.node(id);
        let NodeKind::Call { args, .. } = &node.kind else { continue };
        let op = graph.concrete_op(node, &bindings).expect("call nodes have an op");
        let operands: Vec<Operand> = args
            .iter()
            .map(|arg| match arg {
                Arg::Node(input) => Operand::Tensor(values[input.index()].as_ref().expect("inputs come first")),
                Arg::Scalar(s) => Operand::Scalar(s.0),
            })
            .collect();
        let value = op.apply(&operands, node.location.unwrap_or(here))?;
        for input in node.inputs() {
            if last_use[input.index()] == id.index() {
                values[input.index()] = None;
            }
        }
        values[id.index()] = Some(value);
    }
    Ok(graph.outputs().iter().map(|o| values[o.index()].clone().expect("outputs are computed")).collect())
}
