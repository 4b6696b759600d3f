//! The joint forward and backward graph, the analogue of AOTAutograd's `create_joint`: the forward
//! graph is run on symbolic inputs that require grad while fx traces, so that autograd records its
//! tape; then the autograd engine runs backward from symbolic gradients of the outputs (the
//! *tangents*), and the derivative formulas it calls are recorded too. Composite ops are
//! decomposed on the way, so the joint graph holds primitive ops only.
//!
//! Placeholders: the *primals* (the forward's inputs, named as there), then one tangent per
//! forward output. Outputs: the forward's outputs, then the gradient of each primal that requires
//! grad and receives one.

use std::collections::HashMap;

use super::decompose_op;
use crate::error::{Error, Result};
use crate::fx::proxy::Tracer;
use crate::fx::{Arg, Graph, Interpreter, NodeId, NodeKind};
use crate::layout::contiguous_strides;
use crate::op::Op;
use crate::tensor::Tensor;
use crate::tensor::autograd;

/// A joint graph and how to read its placeholders and outputs.
#[derive(Clone, Debug)]
pub struct JointGraph {
    /// The traced graph: placeholders are the primals then the tangents.
    pub graph: Graph,
    /// How many placeholders are primals (the forward's inputs).
    pub primals: usize,
    /// How many outputs the forward has (each has a tangent placeholder).
    pub forward_outputs: usize,
    /// Per forward output, whether it requires grad (a comparison's mask, or a value computed only
    /// from inputs that require none, does not: its tangent is unused).
    pub differentiable: Vec<bool>,
    /// Per primal, the index among the graph's outputs of its gradient (`None`: it requires no
    /// grad, or no gradient reaches it).
    pub gradients: Vec<Option<usize>>,
}

impl JointGraph {
    /// The tangent placeholders, one per forward output.
    pub fn tangents(&self) -> &[NodeId] {
        &self.graph.placeholders()[self.primals..]
    }

    /// The gradient output nodes, in primal order (those that exist).
    pub fn gradient_nodes(&self) -> Vec<NodeId> {
        self.gradients.iter().flatten().map(|&i| self.graph.outputs()[i]).collect()
    }
}

/// Traces the joint graph of `forward`, whose placeholder `i` requires grad when
/// `requires_grad[i]`. The forward graph must have static sizes.
pub fn joint_graph(forward: &Graph, requires_grad: &[bool]) -> Result<JointGraph> {
    if forward.is_dynamic() {
        return Err(Error::Backend {
            backend: "aot".into(),
            message: "the joint graph is traced for static sizes; this graph has symbolic ones".into(),
        });
    }
    let tracer = Tracer::with_decompositions(decompose_op);
    let declared = tracer.placeholders_like(forward);
    let tangents: Vec<Tensor> = forward
        .outputs()
        .iter()
        .enumerate()
        .map(|(i, &o)| {
            let meta = forward.node(o).meta.clone();
            let strides = contiguous_strides(&meta.shape);
            tracer.placeholder(&format!("tangents_{}", i + 1), meta, strides)
        })
        .collect();
    let primals: Vec<Tensor> = declared.iter().zip(requires_grad).map(|(p, &wants)| p.requires_grad_(wants)).collect();
    let outputs = {
        let _recording = autograd::GradMode::set(true);
        Interpreter::new(forward.clone()).run(&primals)?
    };
    let differentiable: Vec<bool> = outputs.iter().map(Tensor::requires_grad).collect();
    let (roots, root_grads): (Vec<Tensor>, Vec<Tensor>) =
        outputs.iter().zip(&tangents).filter(|(o, _)| o.requires_grad()).map(|(o, t)| (o.clone(), t.clone())).unzip();
    let wanted: Vec<Tensor> = primals.iter().filter(|p| p.requires_grad()).cloned().collect();
    let grads =
        if roots.is_empty() { vec![None; wanted.len()] } else { autograd::grad(&roots, &wanted, &root_grads, false)? };
    let mut results: Vec<Tensor> = outputs.iter().map(Tensor::detach).collect();
    let mut gradients = Vec::with_capacity(primals.len());
    let mut grads = grads.into_iter();
    for primal in &primals {
        gradients.push(match primal.requires_grad().then(|| grads.next().flatten()).flatten() {
            Some(g) => {
                results.push(g);
                Some(results.len() - 1)
            }
            None => None,
        });
    }
    let traced = tracer.finish(&results)?;
    if traced.inputs.len() != primals.len() + tangents.len() {
        return Err(Error::Backend {
            backend: "aot".into(),
            message: "a derivative formula captured a constant tensor; formulas must build tensors from their inputs"
                .into(),
        });
    }
    Ok(JointGraph {
        graph: without_repeats(&traced.graph)?,
        primals: primals.len(),
        forward_outputs: outputs.len(),
        differentiable,
        gradients,
    })
}

/// `graph` with each repeated computation kept once, as PyTorch runs `fx_graph_cse` on the joint
/// graph before partitioning: a derivative formula often recomputes what the forward computed
/// (GELU's `erf(x / sqrt(2))`), and the partitioner should see one node, saved or recomputed once.
/// Every op of a joint graph is pure, so two calls of one op on the same arguments are one value.
fn without_repeats(graph: &Graph) -> Result<Graph> {
    let mut out = Graph::new();
    let mut mapped: Vec<NodeId> = Vec::with_capacity(graph.nodes().len());
    let mut seen: HashMap<(Op, Vec<Arg>), NodeId> = HashMap::new();
    for node in graph.nodes() {
        let id = match &node.kind {
            NodeKind::Placeholder { strides } => out.add_placeholder(&node.name, node.meta.clone(), strides.clone()),
            NodeKind::Call { op, args } => {
                let args: Vec<Arg> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Node(i) => Arg::Node(mapped[i.index()]),
                        Arg::Scalar(s) => Arg::Scalar(*s),
                    })
                    .collect();
                match seen.get(&(op.clone(), args.clone())) {
                    Some(&existing) => existing,
                    None => {
                        let location = node.location.expect("call nodes have a location");
                        let id = out.add_call(op.clone(), args.clone(), location)?;
                        seen.insert((op.clone(), args), id);
                        id
                    }
                }
            }
        };
        mapped.push(id);
    }
    out.set_outputs(graph.outputs().iter().map(|o| mapped[o.index()]).collect())?;
    Ok(out)
}
