//! Lowering, the analogue of TorchInductor's `lowering.py` and `GraphLowering`: each primitive
//! node of a decomposed graph becomes one loop-level [`IrNode`]; view ops become new strided views
//! of the same buffer, so broadcasting, permutes and slices cost index arithmetic, not copies.
//!
//! A `copy_` into a graph input (an optimizer's update of a captured parameter) becomes a copy
//! node that stores into the input's own memory ([`IrNode::into_input`]); later readers of the
//! node read its source, and no node may read the input after it is written.

use super::index::Affine;
use super::ir::{
    BufferName, FallbackArg, GraphInput, IrId, IrNode, Load, LoweredGraph, NodeBody, Operand, PointwiseOp, View,
};
use crate::error::{Error, Result};
use crate::fx::{Arg, Graph, Node, NodeId, NodeKind, SymBindings};
use crate::layout::{Layout, contiguous_strides};
use crate::op::{Op, ViewOf};

/// Lowers a decomposed graph (see [`crate::aot::decompose`]) to loop-level IR, with every
/// size of a dynamic graph evaluated for `bindings` (a static graph takes empty bindings). Nodes
/// whose values nothing returned depends on are dropped (dead-code elimination), as Inductor
/// drops them from the FX graph before lowering.
pub fn lower(graph: &Graph, bindings: &SymBindings) -> Result<LoweredGraph> {
    lower_with(graph, bindings, None)
}

/// A rewrite that lowering offers each op before lowering it: folding the op into the IR node
/// lowered just before it. A target whose GEMMs apply a bias and a ReLU as they write their
/// output folds those ops into the matmul's epilogue this way (`modes::gemm_epilogue`).
pub(crate) trait Fold {
    /// Folds node `id`'s `op` (on `operands`: each operand's node and view, of shape `shape`)
    /// into the last node of `out`, returning the view of the result; `None` to lower it as usual.
    fn absorb(
        &self,
        out: &mut LoweredGraph,
        id: NodeId,
        name: &str,
        op: &Op,
        operands: &[(NodeId, View)],
        shape: &[usize],
    ) -> Option<View>;
}

/// Makes the fold for a graph, given which of its nodes the outputs need.
pub(crate) type FoldFor = fn(&Graph, &[bool]) -> Box<dyn Fold>;

/// [`lower`], with each op offered to the fold `fold` makes for the graph first.
pub(crate) fn lower_with(graph: &Graph, bindings: &SymBindings, fold: Option<FoldFor>) -> Result<LoweredGraph> {
    let live = live_nodes(graph);
    let fold = fold.map(|make| make(graph, &live));
    let mut lowering = Lowering {
        graph,
        values: vec![None; graph.nodes().len()],
        out: LoweredGraph::default(),
        fold,
        written: Vec::new(),
    };
    for id in graph.ids() {
        let node = graph.node(id);
        let shape = node.sym_shape.eval(bindings).ok_or_else(|| unsupported(node, "a size symbol is not bound"))?;
        let view = match &node.kind {
            NodeKind::Placeholder { strides } => {
                // Inputs with symbolic sizes are contiguous; static ones keep their traced strides.
                let strides = if node.sym_shape.is_static() { strides.clone() } else { contiguous_strides(&shape) };
                lowering.placeholder(node, shape, strides)
            }
            NodeKind::Call { .. } if !live[id.index()] => continue,
            NodeKind::Call { args, .. } => {
                let op = graph.concrete_op(node, bindings).expect("call nodes have an op");
                lowering.call(id, &op, args, shape)?
            }
        };
        lowering.values[id.index()] = Some(view);
    }
    let outputs = graph.outputs().iter().map(|o| lowering.output(*o)).collect();
    Ok(LoweredGraph { outputs, ..lowering.out })
}

/// Which nodes the outputs depend on.
fn live_nodes(graph: &Graph) -> Vec<bool> {
    let mut live = vec![false; graph.nodes().len()];
    for out in graph.outputs() {
        live[out.index()] = true;
    }
    for id in graph.ids().collect::<Vec<_>>().into_iter().rev() {
        if live[id.index()] {
            for input in graph.node(id).inputs() {
                live[input.index()] = true;
            }
        }
    }
    live
}

struct Lowering<'g> {
    graph: &'g Graph,
    /// The view through which each graph node's value is read.
    values: Vec<Option<View>>,
    out: LoweredGraph,
    /// The target's fold, if it has one.
    fold: Option<Box<dyn Fold>>,
    /// The graph inputs written so far by `copy_` nodes, with the graph node and the IR node
    /// writing each.
    written: Vec<(usize, NodeId, IrId)>,
}

impl Lowering<'_> {
    fn value(&self, id: NodeId) -> &View {
        self.values[id.index()].as_ref().expect("graph nodes only read earlier nodes")
    }

    /// What the graph returns for node `id`: for a `copy_`, the written input's memory (its IR
    /// node's buffer, which lives there), so that the caller sees the write was done in place.
    fn output(&self, id: NodeId) -> View {
        match self.written.iter().find(|(_, node, _)| *node == id) {
            Some(&(_, _, ir)) => View { buffer: BufferName::Node(ir), layout: Layout::contiguous(&self.out[ir].shape) },
            None => self.value(id).clone(),
        }
    }

    fn placeholder(&mut self, node: &Node, shape: Vec<usize>, strides: Vec<usize>) -> View {
        let index = self.out.inputs.len();
        let layout = Layout::new(shape.clone(), strides.clone(), 0);
        self.out.inputs.push(GraphInput { name: node.name.clone(), shape, strides, dtype: node.meta.dtype });
        View { buffer: BufferName::Input(index), layout }
    }

    /// Appends an IR node for `origin` and returns the dense view of its output.
    fn push(&mut self, id: NodeId, op: &Op, shape: Vec<usize>, body: NodeBody) -> View {
        let index = IrId(self.out.nodes.len());
        let origin = self.graph.node(id);
        self.out.nodes.push(IrNode {
            origin: id,
            origin_name: origin.name.clone(),
            // A custom op's name has a namespace (`mylib::soft_clip`); kernel names take the
            // function's part, which is a C identifier.
            op_name: op.name().rsplit("::").next().unwrap_or_default(),
            location: origin.location,
            shape: shape.clone(),
            dtype: origin.meta.dtype,
            body,
            into_input: None,
        });
        View { buffer: BufferName::Node(index), layout: Layout::contiguous(&shape) }
    }

    /// A dense copy of `source`, for views the memory cannot express (a reshape of a transpose).
    fn copy(&mut self, origin: NodeId, op: &Op, source: &View) -> View {
        let shape = source.layout.shape().to_vec();
        let load = Load { buffer: source.buffer, index: Affine::of_view(&source.layout, &shape) };
        let body = NodeBody::Pointwise { op: PointwiseOp::Copy, operands: vec![Operand::Load(load)] };
        self.push(origin, op, shape, body)
    }

    /// A dense copy of `source` converted to `dtype` (an operand of `cat` in another dtype).
    fn convert(&mut self, origin: NodeId, source: &View, dtype: crate::dtype::DType) -> View {
        let shape = source.layout.shape().to_vec();
        let load = Load { buffer: source.buffer, index: Affine::of_view(&source.layout, &shape) };
        let op = Op::ToDtype { dtype };
        let body = NodeBody::Pointwise { op: PointwiseOp::ToDtype(dtype), operands: vec![Operand::Load(load)] };
        let view = self.push(origin, &op, shape, body);
        if let BufferName::Node(n) = view.buffer {
            self.out.nodes[n.0].dtype = dtype;
        }
        view
    }

    fn call(&mut self, id: NodeId, op: &Op, args: &[Arg], shape: Vec<usize>) -> Result<View> {
        let node = self.graph.node(id);
        for arg in args {
            if let Arg::Node(a) = arg
                && let BufferName::Input(i) = self.value(*a).buffer
                && let Some((_, writer, _)) = self.written.iter().find(|(input, ..)| *input == i)
            {
                let why = format!(
                    "it reads input `{}` after `{}` wrote it in place; read the value written instead",
                    self.out.inputs[i].name,
                    self.graph.node(*writer).name
                );
                return Err(unsupported(node, &why));
            }
        }
        if let Some(fold) = &self.fold {
            let operands: Vec<(NodeId, View)> = args
                .iter()
                .filter_map(|a| match a {
                    Arg::Node(n) => Some((*n, self.value(*n).clone())),
                    Arg::Scalar(_) => None,
                })
                .collect();
            if let Some(view) = fold.absorb(&mut self.out, id, &node.name, op, &operands, &shape) {
                return Ok(view);
            }
        }
        let source = || match &args[0] {
            Arg::Node(id) => Ok(self.value(*id).clone()),
            Arg::Scalar(_) => Err(unsupported(node, "its first operand must be a tensor")),
        };
        let pointwise = |op: PointwiseOp| {
            let operands = args
                .iter()
                .map(|a| match a {
                    Arg::Node(id) => {
                        let view = self.value(*id);
                        Operand::Load(Load { buffer: view.buffer, index: Affine::of_view(&view.layout, &shape) })
                    }
                    Arg::Scalar(s) => Operand::Constant(s.0),
                })
                .collect();
            NodeBody::Pointwise { op, operands }
        };
        Ok(match op {
            Op::Unary(u) => {
                let body = pointwise(PointwiseOp::Unary(*u));
                self.push(id, op, shape, body)
            }
            Op::Binary(b) => {
                let body = pointwise(PointwiseOp::Binary(*b));
                self.push(id, op, shape, body)
            }
            Op::Where => {
                let body = pointwise(PointwiseOp::Where);
                self.push(id, op, shape, body)
            }
            Op::Custom(custom) => {
                let body = pointwise(PointwiseOp::Custom(custom.clone()));
                self.push(id, op, shape, body)
            }
            // A conversion is a copy whose store rounds to the new dtype; inside a fused chain it
            // rounds the value too (see `PointwiseOp::ToDtype`).
            Op::ToDtype { dtype } => {
                let body = pointwise(PointwiseOp::ToDtype(*dtype));
                self.push(id, op, shape, body)
            }
            Op::Cond { .. } => {
                let args = args
                    .iter()
                    .map(|a| match a {
                        Arg::Node(id) => FallbackArg::Tensor(self.value(*id).clone()),
                        Arg::Scalar(s) => FallbackArg::Scalar(s.0),
                    })
                    .collect();
                self.push(id, op, shape, NodeBody::Fallback { op: op.clone(), args })
            }
            Op::Reduce { kind, dim, .. } => {
                let input = source()?;
                let input_shape = input.layout.shape().to_vec();
                let load = Load { buffer: input.buffer, index: Affine::of_view(&input.layout, &input_shape) };
                self.push(id, op, shape, NodeBody::Reduction { kind: *kind, dim: *dim, input: load, input_shape })
            }
            Op::Matmul => {
                let (a, b) = match (&args[0], &args[1]) {
                    (Arg::Node(a), Arg::Node(b)) => (self.value(*a).clone(), self.value(*b).clone()),
                    _ => return Err(unsupported(node, "matmul needs two tensors")),
                };
                self.push(id, op, shape, NodeBody::Matmul { a, b, epilogue: Default::default() })
            }
            Op::ScaledDotProductAttention { .. }
            | Op::ScaledDotProductAttentionBackward { .. }
            | Op::Cat { .. }
            | Op::ScaledMm { .. } => {
                let Some(kernel) = extern_kernel(op) else {
                    return Err(unsupported(node, "it has no library kernel: name one in `extern_kernel`"));
                };
                let inputs: Vec<(NodeId, View)> =
                    node.inputs().map(|input| (input, self.value(input).clone())).collect();
                // `cat` joins operands of one dtype: others are converted first, as eager does.
                let inputs: Vec<View> = inputs
                    .into_iter()
                    .map(|(input, view)| {
                        let from = self.graph.node(input).meta.dtype;
                        if matches!(op, Op::Cat { .. }) && from != node.meta.dtype {
                            self.convert(id, &view, node.meta.dtype)
                        } else {
                            view
                        }
                    })
                    .collect();
                let out_strides = match op {
                    Op::ScaledDotProductAttention { .. } => attention_strides(&inputs[0].layout, &shape),
                    _ => contiguous_strides(&shape),
                };
                let layout = Layout::new(shape.clone(), out_strides, 0);
                let body = NodeBody::ExternKernel { kernel, op: op.clone(), inputs, out_layout: layout.clone() };
                View { layout, ..self.push(id, op, shape, body) }
            }
            Op::Permute { .. } | Op::Expand { .. } | Op::Slice { .. } | Op::Reshape { .. } => {
                let v = source()?;
                match op.view_of(&v.layout) {
                    ViewOf::Layout(layout) => View { buffer: v.buffer, layout },
                    ViewOf::CopyFirst => {
                        let dense = self.copy(id, op, &v);
                        let ViewOf::Layout(layout) = op.view_of(&dense.layout) else {
                            unreachable!("a view of a fresh dense copy needs no copy")
                        };
                        View { buffer: dense.buffer, layout }
                    }
                    ViewOf::NotAView => unreachable!("the arm matched view ops"),
                }
            }
            Op::Contiguous => {
                let v = source()?;
                if v.layout.is_contiguous() { v } else { self.copy(id, op, &v) }
            }
            Op::CopyInto => return self.copy_into(id, op, args, shape),
            Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::LayerNorm { .. } | Op::Linear => {
                return Err(unsupported(node, "composite ops must be decomposed first (aot::decompose)"));
            }
        })
    }

    /// `copy_(target, source)`: a copy node storing the source into the target input's memory.
    /// Readers of the node read the source itself, which holds the same values.
    fn copy_into(&mut self, id: NodeId, op: &Op, args: &[Arg], shape: Vec<usize>) -> Result<View> {
        let node = self.graph.node(id);
        let (Arg::Node(target), Arg::Node(source)) = (&args[0], &args[1]) else {
            return Err(unsupported(node, "copy_ takes two tensors"));
        };
        let target_view = self.value(*target).clone();
        let input = match target_view.buffer {
            BufferName::Input(i) if matches!(self.graph.node(*target).kind, NodeKind::Placeholder { .. }) => i,
            _ => return Err(unsupported(node, "copy_ in a graph writes only into a graph input")),
        };
        if !target_view.layout.is_contiguous() || target_view.layout.offset() != 0 {
            return Err(unsupported(node, "copy_ writes only into a dense graph input"));
        }
        if self.written.iter().any(|(i, ..)| *i == input) {
            return Err(unsupported(node, "the graph writes this input twice; write it once"));
        }
        let mut source = self.value(*source).clone();
        let dense = Layout::contiguous(&shape);
        // A view of the target itself (its transpose) is read at other elements than the ones
        // written: it is copied out first.
        if source.buffer == BufferName::Input(input) && source.layout != dense {
            source = self.copy(id, op, &source);
        }
        let load = Load { buffer: source.buffer, index: Affine::of_view(&source.layout, &shape) };
        let body = NodeBody::Pointwise { op: PointwiseOp::Copy, operands: vec![Operand::Load(load)] };
        let written = self.push(id, op, shape, body);
        let BufferName::Node(ir) = written.buffer else { unreachable!("push makes a node buffer") };
        self.out.nodes[ir.0].into_input = Some(input);
        self.written.push((input, id, ir));
        Ok(source)
    }
}

/// The library kernel `op` lowers to, as a [`NodeBody::ExternKernel`] (Inductor's
/// `ir.ExternKernel`): attention, `cat` and the scaled FP8 product.
pub(crate) fn extern_kernel(op: &Op) -> Option<&'static str> {
    match op {
        Op::Cat { .. } => Some("cat"),
        Op::ScaledMm { .. } => Some("scaled_mm"),
        Op::ScaledDotProductAttention { .. } => Some("flash_attention"),
        Op::ScaledDotProductAttentionBackward { .. } => Some("flash_attention_backward"),
        _ => None,
    }
}

/// The strides attention's output of `shape` (`[batch, heads, queries, value_dim]`) is written
/// with when its query is `q`: when q's heads sit inside its rows (`[batch, queries, heads, dim]`
/// in memory, the layout of a projection split into heads by a reshape and a transpose), the
/// output takes that layout too, so that transposing the heads back and merging them, as the
/// output projection reads them, is a view rather than a copy. Any other q gives a dense output.
/// PyTorch's cuDNN attention allocates its output to match q's layout the same way.
fn attention_strides(q: &Layout, shape: &[usize]) -> Vec<usize> {
    let s = q.strides();
    let rows_hold_heads = shape.len() == 4 && shape[1] > 1 && shape[2] > 1 && s[3] == 1 && s[1] < s[2];
    if !rows_hold_heads {
        return contiguous_strides(shape);
    }
    let (heads, queries, dim) = (shape[1], shape[2], shape[3]);
    vec![queries * heads * dim, dim, heads * dim, 1]
}

/// Whether `op` lowers to a node that reads its operands from memory as they are, never into a
/// generated kernel that could compute an operand inline: a product, a branch
/// ([`NodeBody::Fallback`]) or an [`extern_kernel`].
pub(crate) fn reads_operands_from_memory(op: &Op) -> bool {
    matches!(op, Op::Matmul | Op::Cond { .. }) || extern_kernel(op).is_some()
}

fn unsupported(node: &Node, why: &str) -> Error {
    let location = node.location.map(|l| format!(" at {l}")).unwrap_or_default();
    Error::Backend { backend: "inductor".into(), message: format!("cannot lower `{}`{location}: {why}", node.name) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fx::proxy::Tracer;
    use crate::tensor::{Tensor, TensorMeta};

    fn trace(shapes: &[&[usize]], f: impl Fn(&[Tensor]) -> Result<Tensor>) -> Graph {
        let tracer = Tracer::new();
        let inputs: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let meta = TensorMeta { shape: s.to_vec(), ..Default::default() };
                tracer.placeholder(&format!("in{i}"), meta, crate::layout::contiguous_strides(s))
            })
            .collect();
        let out = f(&inputs).unwrap();
        tracer.finish(&[out]).unwrap().graph
    }

    fn lower(graph: &Graph) -> Result<LoweredGraph> {
        super::lower(graph, &SymBindings::new())
    }

    #[test]
    fn views_cost_no_nodes() {
        let g = trace(&[&[3, 4], &[4]], |t| t[0].t()?.slice(0, 1, 4, 2)?.t()?.add(&t[1].slice(0, 0, 2, 1)?));
        let lowered = lower(&g).unwrap();
        assert_eq!(lowered.nodes.len(), 1);
        let NodeBody::Pointwise { operands, .. } = &lowered.nodes[0].body else { panic!() };
        let Operand::Load(a) = &operands[0] else { panic!() };
        assert_eq!(a.index, Affine { offset: 1, coeffs: vec![4, 2] });
    }

    #[test]
    fn a_reshape_of_a_transpose_copies() {
        let g = trace(&[&[3, 4]], |t| t[0].t()?.reshape(&[12])?.exp());
        let lowered = lower(&g).unwrap();
        let ops: Vec<&str> = lowered.nodes.iter().map(|n| n.op_name).collect();
        assert_eq!(ops, ["reshape", "exp"]);
        assert!(matches!(lowered.nodes[0].body, NodeBody::Pointwise { op: PointwiseOp::Copy, .. }));
    }

    #[test]
    fn dead_nodes_are_dropped() {
        let g = trace(&[&[4]], |t| {
            let _unused = t[0].exp()?;
            t[0].neg()
        });
        let ops: Vec<&str> = lower(&g).unwrap().nodes.iter().map(|n| n.op_name).collect();
        assert_eq!(ops, ["neg"]);
    }

    #[test]
    fn composites_are_refused() {
        let g = trace(&[&[3, 4]], |t| t[0].softmax(-1));
        let err = lower(&g).unwrap_err().to_string();
        assert!(err.contains("must be decomposed"), "{err}");
    }
}
