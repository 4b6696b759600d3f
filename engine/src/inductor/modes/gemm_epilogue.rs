//! Folding a bias add and a ReLU into the matrix product before them, the analogue of the
//! `addmm` and `_addmm_activation` patterns Inductor matches after lowering `linear`, and of its
//! GEMM templates' epilogues: `relu(x @ w + b)` becomes one GEMM that adds the bias and clamps
//! while the product is still in registers (one cuBLASLt launch on a GPU, the CPU GEMMs' output
//! loops), instead of a GEMM that writes the product and a kernel that reads it back.
//!
//! The FP8 product (`scaled_mm`, an extern kernel) takes a bias the same way, as its fifth
//! operand (`torch._scaled_mm`'s `bias`).
//!
//! Lowering offers each op to [`Epilogues`] (a lowering `Fold`) on the CPU, and under max-autotune
//! on a GPU: the targets whose GEMMs apply an epilogue ask for it ([`fold`]). On a GPU in the other
//! modes only half-precision products fold ([`fold_half_precision`]): those run on cuBLASLt by
//! default (see `gemm_choice`), whose epilogues apply them.
//! The op is folded when it reads the matmul lowered just before it, nothing else reads that
//! product, the epilogue can express it (a bias that is one value per column, then a ReLU), and
//! folding saves a kernel: a bias add whose value flows on into other pointwise ops (a GELU) stays where
//! it is, fused into their kernel, since folding it would only split that kernel's reads of the
//! product in two.

use crate::fx::{Graph, NodeId};
use crate::inductor::ir::{BufferName, IrId, LoweredGraph, NodeBody, View};
use crate::inductor::lowering::Fold;
use crate::layout::{Layout, numel};
use crate::op::{BinaryOp, Op, UnaryOp};

/// What lowering needs to know about the graph to fold epilogues.
pub(crate) struct Epilogues {
    /// How often each node's value is read (by live nodes, or as an output).
    uses: Vec<usize>,
    /// Whether a node's value reaches a generated kernel (through views), which a bias add could
    /// be fused into instead.
    into_kernel: Vec<bool>,
    /// Whether a node's only reader is a ReLU (folded too, so the bias add is worth folding).
    into_relu: Vec<bool>,
    /// Fold only into products of bf16 or f16 operands.
    half_precision_only: bool,
}

/// The GEMM-epilogue fold for `graph` (decomposed; `live` says which nodes the outputs need), what
/// a target hands lowering.
pub(crate) fn fold(graph: &Graph, live: &[bool]) -> Box<dyn Fold> {
    Box::new(Epilogues::of(graph, live))
}

/// [`fold`] into half-precision products only.
pub(crate) fn fold_half_precision(graph: &Graph, live: &[bool]) -> Box<dyn Fold> {
    Box::new(Epilogues { half_precision_only: true, ..Epilogues::of(graph, live) })
}

impl Epilogues {
    /// The facts about `graph` (decomposed; `live` says which nodes the outputs need).
    fn of(graph: &Graph, live: &[bool]) -> Epilogues {
        let n = graph.nodes().len();
        let mut users: Vec<Vec<NodeId>> = vec![Vec::new(); n];
        let mut uses = vec![0; n];
        for out in graph.outputs() {
            uses[out.index()] += 1;
        }
        for id in graph.ids().filter(|id| live[id.index()]) {
            for input in graph.node(id).inputs() {
                uses[input.index()] += 1;
                users[input.index()].push(id);
            }
        }
        // Users come after the nodes they read: walk backwards so that a view's answer is known.
        let mut into_kernel = vec![false; n];
        for id in graph.ids().collect::<Vec<_>>().into_iter().rev() {
            into_kernel[id.index()] = users[id.index()].iter().any(|u| match graph.node(*u).op() {
                Some(Op::Reshape { .. } | Op::Permute { .. } | Op::Expand { .. } | Op::Slice { .. }) => {
                    into_kernel[u.index()]
                }
                Some(Op::Matmul | Op::Cond { .. }) | None => false,
                Some(_) => true,
            });
        }
        let into_relu = users
            .iter()
            .map(|u| matches!(u[..], [only] if graph.node(only).op() == Some(&Op::Unary(UnaryOp::Relu))))
            .collect();
        Epilogues { uses, into_kernel, into_relu, half_precision_only: false }
    }
}

impl Fold for Epilogues {
    /// Folds node `id`'s `op` (on `operands`: each operand's node and view) into the epilogue of
    /// the last IR node when that node is a matmul it can extend; returns the view of the result
    /// (the matmul's buffer), or `None` to lower `op` as usual.
    fn absorb(
        &self,
        out: &mut LoweredGraph,
        id: NodeId,
        name: &str,
        op: &Op,
        operands: &[(NodeId, View)],
        shape: &[usize],
    ) -> Option<View> {
        let last = out.nodes.len().checked_sub(1)?;
        let node = &out.nodes[last];
        if self.half_precision_only && !node.dtype.is_half() {
            return None;
        }
        let product = View { buffer: BufferName::Node(IrId(last)), layout: Layout::contiguous(&node.shape) };
        // An empty product or inner dimension is no GEMM at all: nothing to fold into.
        let inner = match &node.body {
            NodeBody::Matmul { a, .. } => a.layout.shape().last().copied(),
            NodeBody::ExternKernel { op: Op::ScaledMm { .. }, inputs, .. } => inputs[0].layout.shape().last().copied(),
            _ => return None,
        };
        if node.shape != shape || numel(shape) == 0 || inner == Some(0) {
            return None;
        }
        let is_product = |(n, view): &(NodeId, View)| *view == product && self.uses[n.index()] == 1;
        // The bias of an add of the product and a vector of one value per column (of the product's
        // dtype, so that the add's result is the product's), when folding it saves a kernel.
        let bias_of = |x: &(NodeId, View), y: &(NodeId, View)| -> Option<View> {
            let saves_a_kernel = !self.into_kernel[id.index()] || self.into_relu[id.index()];
            let bias = match (is_product(x), is_product(y)) {
                (true, false) => &y.1,
                (false, true) => &x.1,
                _ => return None,
            };
            let columns = *shape.last()?;
            let vector = bias.layout.shape() == [columns] && bias.layout.strides() == [1];
            let dtype = out.buffer_dtype(bias.buffer) == out.nodes[last].dtype;
            (vector && dtype && saves_a_kernel && bias.buffer != product.buffer).then(|| bias.clone())
        };
        let bias = match (op, operands) {
            (Op::Binary(BinaryOp::Add), [x, y]) => bias_of(x, y),
            _ => None,
        };
        match (&mut out.nodes[last].body, op, operands) {
            (NodeBody::Matmul { epilogue, .. }, Op::Binary(BinaryOp::Add), _)
                if epilogue.bias.is_none() && !epilogue.relu =>
            {
                epilogue.bias = Some(bias?);
                epilogue.absorbed.push(name.to_string());
            }
            (NodeBody::Matmul { epilogue, .. }, Op::Unary(UnaryOp::Relu), [x]) if is_product(x) && !epilogue.relu => {
                epilogue.relu = true;
                epilogue.absorbed.push(name.to_string());
            }
            // `torch._scaled_mm`'s `bias`: cuBLASLt's FP8 products add a bf16 or f16 one (the
            // output's dtype) before rounding the result, as its bf16 products do.
            (NodeBody::ExternKernel { op: Op::ScaledMm { out_dtype }, inputs, .. }, Op::Binary(BinaryOp::Add), _)
                if inputs.len() == 4 && out_dtype.is_half() =>
            {
                inputs.push(bias?);
            }
            _ => return None,
        }
        Some(product)
    }
}

#[cfg(test)]
mod tests {
    use crate::fx::{SymBindings, trace};
    use crate::inductor::ir::{NodeBody, PointwiseOp};
    use crate::inductor::lowering::lower_with;
    use crate::tensor::Tensor;

    /// `f` on x `[8, 16]`, w `[32, 16]`, b `[32]`, traced, decomposed and lowered with epilogues.
    fn lowered(f: impl Fn(&[Tensor]) -> crate::Result<Tensor>) -> crate::inductor::ir::LoweredGraph {
        let inputs = [Tensor::randn(&[8, 16], 0), Tensor::randn(&[32, 16], 1), Tensor::randn(&[32], 2)];
        let traced = trace(&inputs, |t| Ok(vec![f(t)?])).unwrap();
        let graph = crate::aot::decompose(&traced.graph).unwrap();
        lower_with(&graph, &SymBindings::new(), Some(super::fold)).unwrap()
    }

    #[test]
    fn a_bias_added_to_an_fp8_product_is_its_fifth_operand() {
        use crate::dtype::DType;
        let inputs = [
            Tensor::randn(&[8, 16], 0).to_dtype(DType::F8E4M3).unwrap(),
            Tensor::randn(&[32, 16], 1).to_dtype(DType::F8E4M3).unwrap(),
            Tensor::scalar(0.5),
            Tensor::scalar(0.25),
            Tensor::randn(&[32], 2).to_dtype(DType::BF16).unwrap(),
            Tensor::randn(&[32], 3),
        ];
        let lowered = |f: fn(&[Tensor]) -> crate::Result<Tensor>| {
            let traced = trace(&inputs, |t| Ok(vec![f(t)?])).unwrap();
            let graph = crate::aot::decompose(&traced.graph).unwrap();
            lower_with(&graph, &SymBindings::new(), Some(super::fold_half_precision)).unwrap()
        };
        fn product(t: &[Tensor]) -> crate::Result<Tensor> {
            t[0].scaled_mm(&t[1].t()?, &t[2], &t[3], DType::BF16)
        }
        let operands = |g: &crate::inductor::ir::LoweredGraph| match &g.nodes[0].body {
            NodeBody::ExternKernel { inputs, .. } => inputs.len(),
            other => panic!("{other:?}"),
        };
        let g = lowered(|t| product(t)?.add(&t[4]));
        assert_eq!((g.nodes.len(), operands(&g)), (1, 5));
        // A float32 bias makes the sum float32, not the product's bf16; a bias feeding a GELU
        // stays fused with it.
        let g = lowered(|t| product(t)?.add(&t[5]));
        assert_eq!((g.nodes.len(), operands(&g)), (2, 4));
        let g = lowered(|t| product(t)?.add(&t[4])?.gelu());
        assert_eq!(operands(&g), 4);
    }

    #[test]
    fn linear_then_relu_is_one_gemm() {
        let g = lowered(|t| t[0].linear(&t[1], Some(&t[2]))?.relu());
        assert_eq!(g.nodes.len(), 1);
        let NodeBody::Matmul { epilogue, .. } = &g.nodes[0].body else { panic!("{:?}", g.nodes[0].body) };
        assert!(epilogue.bias.is_some() && epilogue.relu, "{epilogue:?}");
    }

    #[test]
    fn a_bias_feeding_a_gelu_or_a_product_read_twice_stays_outside() {
        let g = lowered(|t| {
            let y = t[0].matmul(&t[1].t()?)?;
            y.add(&t[2])?.mul(&y)
        });
        assert!(g.nodes.iter().any(|n| matches!(n.body, NodeBody::Pointwise { op: PointwiseOp::Binary(_), .. })));
        // The bias add stays fused with the GELU's kernel, which then reads the product once.
        let g = lowered(|t| t[0].linear(&t[1], Some(&t[2]))?.gelu());
        let NodeBody::Matmul { epilogue, .. } = &g.nodes[0].body else { panic!() };
        assert!(epilogue.is_none(), "{epilogue:?}");
        // A bias whose sum is returned (or read by a matmul) is folded.
        let g = lowered(|t| t[0].linear(&t[1], Some(&t[2])));
        let NodeBody::Matmul { epilogue, .. } = &g.nodes[0].body else { panic!() };
        assert!(epilogue.bias.is_some() && g.nodes.len() == 1);
    }
}
