//! Folding a bias add and a ReLU into the matrix product before them, the analogue of the
//! `addmm` and `_addmm_activation` patterns Inductor matches after lowering `linear`, and of its
//! GEMM templates' epilogues: `relu(x @ w + b)` becomes one GEMM that adds the bias and clamps
//! while the product is still in registers (one cuBLASLt launch on a GPU, the CPU GEMMs' output
//! loops), instead of a GEMM that writes the product and a kernel that reads it back.
//!
//! The FP8 product (`scaled_mm`, an extern kernel) takes a bias the same way, as its fifth
//! operand (`torch._scaled_mm`'s `bias`).
//!
//! Where the products run on cuBLASLt (half precision outside max-autotune), a residual add
//! folds too: `h + (x @ w + b)`, with `h` a dense tensor of the product's shape and dtype, is
//! one GEMM that reads `h` as its `C` and writes `a @ b + bias + 1 * C` to a buffer of its own, as
//! `torch.addmm(h, x, w)` hands `h` to cuBLAS as `beta * C`. The bias before it folds only
//! because the residual add will, and a residual add whose sum flows on into other pointwise ops
//! (a layer norm) stays in their kernel.
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
use crate::inductor::lowering::{Fold, reads_operands_from_memory};
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
    /// Whether a node's only reader is an add of a tensor of its shape whose sum reaches no
    /// kernel (a residual add that folds too, so the bias add is worth folding).
    into_residual: Vec<bool>,
    /// Fold only into products of bf16 or f16 operands.
    half_precision_only: bool,
    /// Fold residual adds (the GEMMs are cuBLASLt's, which read a `C`).
    residuals: bool,
}

/// The GEMM-epilogue fold for `graph` (decomposed; `live` says which nodes the outputs need), what
/// a target hands lowering.
pub(crate) fn fold(graph: &Graph, live: &[bool]) -> Box<dyn Fold> {
    Box::new(Epilogues::of(graph, live))
}

/// [`fold`] into half-precision products only, residual adds included: what cuBLASLt applies.
pub(crate) fn fold_half_precision(graph: &Graph, live: &[bool]) -> Box<dyn Fold> {
    Box::new(Epilogues { half_precision_only: true, residuals: true, ..Epilogues::of(graph, live) })
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
                // Extern kernels (and outputs) read the value from memory as it is: an add before
                // them would be a kernel of its own.
                Some(op) => !reads_operands_from_memory(op),
                None => false,
            });
        }
        let into_relu = users
            .iter()
            .map(|u| matches!(u[..], [only] if graph.node(only).op() == Some(&Op::Unary(UnaryOp::Relu))))
            .collect();
        let residual_add = |add: NodeId| {
            let node = graph.node(add);
            node.op() == Some(&Op::Binary(BinaryOp::Add))
                && !into_kernel[add.index()]
                && node.inputs().all(|input| graph.node(input).meta.shape == node.meta.shape)
        };
        let into_residual = users.iter().map(|u| matches!(u[..], [only] if residual_add(only))).collect();
        Epilogues { uses, into_kernel, into_relu, into_residual, half_precision_only: false, residuals: false }
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
            let into_residual = self.residuals && self.into_residual[id.index()];
            let saves_a_kernel = !self.into_kernel[id.index()] || self.into_relu[id.index()] || into_residual;
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
        // The residual of an add of the product and a dense tensor of its shape and dtype (the
        // GEMM's `C`), when the sum reaches no kernel it could be fused into instead.
        let residual_of = |x: &(NodeId, View), y: &(NodeId, View)| -> Option<View> {
            let other = match (is_product(x), is_product(y)) {
                (true, false) => &y.1,
                (false, true) => &x.1,
                _ => return None,
            };
            let dense = other.layout.shape() == shape && other.layout.is_contiguous();
            let dtype = out.buffer_dtype(other.buffer) == out.nodes[last].dtype;
            let saves_a_kernel = !self.into_kernel[id.index()];
            (self.residuals && dense && dtype && saves_a_kernel && other.buffer != product.buffer)
                .then(|| other.clone())
        };
        let (bias, residual) = match (op, operands) {
            (Op::Binary(BinaryOp::Add), [x, y]) => (bias_of(x, y), residual_of(x, y)),
            _ => (None, None),
        };
        match (&mut out.nodes[last].body, op, operands) {
            // A bias first; an add after it (or in its place) may be the residual. cuBLASLt adds
            // `C` before its ReLU, so neither follows one.
            (NodeBody::Matmul { epilogue, .. }, Op::Binary(BinaryOp::Add), _)
                if !epilogue.relu && epilogue.residual.is_none() =>
            {
                match bias {
                    Some(bias) if epilogue.bias.is_none() => epilogue.bias = Some(bias),
                    _ => epilogue.residual = Some(Box::new(residual?)),
                }
                epilogue.absorbed.push(name.to_string());
            }
            (NodeBody::Matmul { epilogue, .. }, Op::Unary(UnaryOp::Relu), [x])
                if is_product(x) && !epilogue.relu && epilogue.residual.is_none() =>
            {
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

    /// `f` on bf16 x `[8, 16]`, w `[32, 16]`, b `[32]`, h `[8, 32]`, traced, decomposed and lowered
    /// with the half-precision fold (the one cuBLASLt applies, residuals included).
    fn lowered_bf16(f: impl Fn(&[Tensor]) -> crate::Result<Tensor>) -> crate::inductor::ir::LoweredGraph {
        use crate::dtype::DType;
        let inputs: Vec<Tensor> = [vec![8, 16], vec![32, 16], vec![32], vec![8, 32], vec![32, 8]]
            .iter()
            .enumerate()
            .map(|(i, shape)| Tensor::randn(shape, i as u64).to_dtype(DType::BF16).unwrap())
            .collect();
        let traced = trace(&inputs, |t| Ok(vec![f(t)?])).unwrap();
        let graph = crate::aot::decompose(&traced.graph).unwrap();
        lower_with(&graph, &SymBindings::new(), Some(super::fold_half_precision)).unwrap()
    }

    fn epilogue_of(g: &crate::inductor::ir::LoweredGraph) -> &crate::inductor::ir::Epilogue {
        g.nodes
            .iter()
            .find_map(|n| match &n.body {
                NodeBody::Matmul { epilogue, .. } => Some(epilogue),
                _ => None,
            })
            .expect("a matmul")
    }

    #[test]
    fn a_residual_add_after_a_half_precision_linear_is_the_gemms_c() {
        // `h + linear(x)`, either way round: one GEMM with the bias and the residual.
        for g in [
            lowered_bf16(|t| t[3].add(&t[0].linear(&t[1], Some(&t[2]))?)),
            lowered_bf16(|t| t[0].linear(&t[1], Some(&t[2]))?.add(&t[3])),
            // A batch of sequences, as in a transformer block.
            lowered_bf16(|t| t[3].reshape(&[2, 4, 32])?.add(&t[0].reshape(&[2, 4, 16])?.linear(&t[1], Some(&t[2]))?)),
        ] {
            let e = epilogue_of(&g);
            assert!(g.nodes.len() == 1 && e.bias.is_some() && e.residual.is_some() && !e.relu, "{e:?}");
        }
        // Without a bias, the add is the residual alone.
        let g = lowered_bf16(|t| t[3].add(&t[0].matmul(&t[1].t()?)?));
        assert!(g.nodes.len() == 1 && epilogue_of(&g).bias.is_none() && epilogue_of(&g).residual.is_some());
    }

    #[test]
    fn a_residual_stays_outside_where_c_cannot_take_it() {
        let unfused = |g: &crate::inductor::ir::LoweredGraph| {
            epilogue_of(g).residual.is_none()
                && g.nodes.iter().any(|n| matches!(n.body, NodeBody::Pointwise { op: PointwiseOp::Binary(_), .. }))
        };
        // A sum that flows on into a pointwise op: both adds stay fused with it.
        let g = lowered_bf16(|t| t[3].add(&t[0].linear(&t[1], Some(&t[2]))?)?.mul(2.0));
        assert!(unfused(&g) && epilogue_of(&g).bias.is_none(), "{:?}", epilogue_of(&g));
        // A transposed residual is no C laid out as the product: the bias folds, the add stays.
        let g = lowered_bf16(|t| t[4].t()?.add(&t[0].linear(&t[1], Some(&t[2]))?));
        assert!(unfused(&g) && epilogue_of(&g).bias.is_some());
        // A residual broadcast from one row, or in float32 (the sum is float32, not the product's
        // bf16), is no C either.
        let g = lowered_bf16(|t| t[3].slice(0, 0, 1, 1)?.add(&t[0].linear(&t[1], Some(&t[2]))?));
        assert!(unfused(&g));
        let g = lowered_bf16(|t| t[3].to_dtype(crate::dtype::DType::F32)?.add(&t[0].linear(&t[1], Some(&t[2]))?));
        assert!(unfused(&g));
        // cuBLASLt adds C before its ReLU: a residual after one stays outside.
        let g = lowered_bf16(|t| t[3].add(&t[0].linear(&t[1], Some(&t[2]))?.relu()?));
        assert!(unfused(&g) && epilogue_of(&g).relu);
        // Float32 products fold no residual outside max-autotune (they do not run on cuBLASLt).
        let g = lowered(|t| t[0].matmul(&t[1].t()?)?.add(&t[0].matmul(&t[1].t()?)?));
        assert!(g.nodes.iter().all(|n| match &n.body {
            NodeBody::Matmul { epilogue, .. } => epilogue.residual.is_none(),
            _ => true,
        }));
    }

    #[test]
    fn a_bias_add_read_by_attention_folds_into_the_gemm() {
        // The projections' bias add whose sum only attention (an extern kernel) reads.
        let g = lowered_bf16(|t| {
            let qkv = t[0].linear(&t[1], Some(&t[2]))?.reshape(&[1, 8, 4, 8])?;
            let (q, k, v) = (qkv.slice(3, 0, 2, 1)?, qkv.slice(3, 2, 4, 1)?, qkv.slice(3, 4, 6, 1)?);
            q.scaled_dot_product_attention(&k, &v, None, false, None)
        });
        assert!(epilogue_of(&g).bias.is_some(), "{:?}", epilogue_of(&g));
        assert!(!g.nodes.iter().any(|n| matches!(n.body, NodeBody::Pointwise { .. })), "{:?}", g.nodes);
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
