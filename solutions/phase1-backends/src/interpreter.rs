//! Exercise `interpreter`: a backend that runs a graph node by node, like `torch.fx.Interpreter`.

use std::collections::HashMap;

use engine::backends::{Backend, CompiledGraph};
use engine::fx::{Arg, Graph, NodeId, NodeKind};
use engine::{Error, Operand, Result, SourceLocation, Tensor};

// ANCHOR: interpret
/// **Exercise `interpreter`, part 1.** Run `graph` on `inputs`: bind the placeholders to
/// `inputs` in order, then walk the nodes in order, applying each call node's op
/// ([`engine::op::Op::apply`]) to its arguments, and keep every value in an environment keyed by
/// [`NodeId`]. Return the values of the graph's outputs, in order. A wrong number of inputs is an
/// error, not a panic.
///
/// A *dynamic* graph (sizes like `f32[s0, 8]`) runs at any batch size, but a reshape or an expand
/// in it holds the sizes of the call that traced it. Bind the symbols to this call's sizes first
/// ([`Graph::bind_symbols`]), then take each node's op with those sizes filled in
/// ([`Graph::concrete_op`]) rather than `node.op()`.
///
/// Book: `book/src/phase1/exercises.md`, section "interpreter". Check: `cargo grader check phase1`.
pub fn interpret(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    // ANCHOR: solution
    let here = SourceLocation::caller();
    if inputs.len() != graph.placeholders().len() {
        return Err(Error::Backend {
            backend: "interpreter".into(),
            message: format!("the graph takes {} inputs, got {}", graph.placeholders().len(), inputs.len()),
        });
    }
    // The sizes of this call, for the symbols of a dynamic graph.
    let shapes: Vec<&[usize]> = graph.placeholders().iter().zip(inputs).map(|(_, input)| input.shape()).collect();
    let bindings = graph
        .bind_symbols(&shapes)
        .map_err(|mismatch| Error::Backend { backend: "interpreter".into(), message: mismatch.to_string() })?;
    let mut env: HashMap<NodeId, Tensor> = graph.placeholders().iter().copied().zip(inputs.iter().cloned()).collect();
    for id in graph.ids() {
        let node = graph.node(id);
        let (Some(op), NodeKind::Call { args, .. }) = (graph.concrete_op(node, &bindings), &node.kind) else {
            continue;
        };
        let operands: Vec<Operand> = args
            .iter()
            .map(|arg| match arg {
                Arg::Node(input) => Operand::Tensor(&env[input]),
                Arg::Scalar(s) => Operand::Scalar(s.0),
            })
            .collect();
        let value = op.apply(&operands, node.location.unwrap_or(here))?;
        env.insert(id, value);
    }
    Ok(graph.outputs().iter().map(|id| env[id].clone()).collect())
    // ANCHOR_END: solution
}
// ANCHOR_END: interpret

// ANCHOR: graph_interpreter
/// **Exercise `interpreter`, part 2.** A backend whose compiled graphs run through
/// [`interpret`].
#[derive(Clone, Copy, Debug, Default)]
pub struct GraphInterpreter;

impl Backend for GraphInterpreter {
    fn name(&self) -> &str {
        "interpreter"
    }

    /// Returns something that runs `graph` with [`interpret`]: a closure taking `&[Tensor]` is a
    /// [`CompiledGraph`].
    fn compile(&self, graph: &Graph, _example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        // ANCHOR: solution
        let graph = graph.clone();
        Ok(Box::new(move |inputs: &[Tensor]| interpret(&graph, inputs)))
        // ANCHOR_END: solution
    }
}
// ANCHOR_END: graph_interpreter
