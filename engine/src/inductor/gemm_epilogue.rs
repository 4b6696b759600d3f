//! Folding a bias add and a ReLU into the matrix product before them, the analogue of the
//! `addmm` and `_addmm_activation` patterns Inductor matches after lowering `linear`, and of its
//! GEMM templates' epilogues: `relu(x @ w + b)` becomes one cuBLASLt launch that adds the bias
//! and clamps while the product is still in registers, instead of a GEMM that writes the product
//! and a kernel that reads it back.
//!
//! Lowering calls [`absorb`] for each op under max-autotune on a GPU; the op is folded when it
//! reads the matmul lowered just before it, nothing else reads that product, and the epilogue
//! cuBLASLt offers can express it: a bias that is one value per column, then a ReLU.

use super::ir::{BufferName, IrId, LoweredGraph, NodeBody, View};
use crate::layout::{Layout, numel};
use crate::op::{BinaryOp, Op, UnaryOp};

/// Folds `op` (on `operands`: each view, and whether the op is its only reader) into the
/// epilogue of the last IR node when that node is a matmul it can extend; returns the view of
/// the result (the matmul's buffer), or `None` to lower `op` as usual.
pub(crate) fn absorb(
    out: &mut LoweredGraph,
    op: &Op,
    operands: &[(View, bool)],
    shape: &[usize],
    name: &str,
) -> Option<View> {
    let last = out.nodes.len().checked_sub(1)?;
    let node = &mut out.nodes[last];
    let NodeBody::Matmul { a, epilogue, .. } = &mut node.body else { return None };
    let product = View { buffer: BufferName::Node(IrId(last)), layout: Layout::contiguous(&node.shape) };
    // An empty product or inner dimension is no GEMM at all: nothing to fold into.
    let empty = numel(shape) == 0 || a.layout.shape().last() == Some(&0);
    if node.shape != shape || empty {
        return None;
    }
    let is_product = |(view, only_reader): &(View, bool)| *view == product && *only_reader;
    match (op, operands) {
        (Op::Binary(BinaryOp::Add), [x, y]) if epilogue.bias.is_none() && !epilogue.relu => {
            let bias = match (is_product(x), is_product(y)) {
                (true, false) => &y.0,
                (false, true) => &x.0,
                _ => return None,
            };
            let columns = *shape.last()?;
            let vector = bias.layout.shape() == [columns] && bias.layout.strides() == [1];
            if !vector || bias.buffer == product.buffer {
                return None;
            }
            epilogue.bias = Some(bias.clone());
        }
        (Op::Unary(UnaryOp::Relu), [x]) if is_product(x) && !epilogue.relu => epilogue.relu = true,
        _ => return None,
    }
    epilogue.absorbed.push(name.to_string());
    Some(product)
}

#[cfg(test)]
mod tests {
    use crate::fx::SymBindings;
    use crate::fx::proxy::Tracer;
    use crate::inductor::ir::{NodeBody, PointwiseOp};
    use crate::inductor::lowering::lower_with;
    use crate::tensor::{Tensor, TensorMeta};

    fn lowered(f: impl Fn(&[Tensor]) -> crate::Result<Tensor>) -> crate::inductor::ir::LoweredGraph {
        let tracer = Tracer::new();
        let inputs: Vec<Tensor> = [&[8, 16][..], &[32, 16], &[32]]
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let meta = TensorMeta { shape: s.to_vec(), ..Default::default() };
                tracer.placeholder(&format!("in{i}"), meta, crate::layout::contiguous_strides(s))
            })
            .collect();
        let out = f(&inputs).unwrap();
        let graph = crate::aot::decompose(&tracer.finish(&[out]).unwrap().graph).unwrap();
        lower_with(&graph, &SymBindings::new(), true).unwrap()
    }

    #[test]
    fn linear_then_relu_is_one_gemm() {
        let g = lowered(|t| t[0].linear(&t[1], Some(&t[2]))?.relu());
        assert_eq!(g.nodes.len(), 1);
        let NodeBody::Matmul { epilogue, .. } = &g.nodes[0].body else { panic!("{:?}", g.nodes[0].body) };
        assert!(epilogue.bias.is_some() && epilogue.relu, "{epilogue:?}");
    }

    #[test]
    fn a_product_read_twice_or_an_exact_gelu_stays_outside() {
        let g = lowered(|t| {
            let y = t[0].matmul(&t[1].t()?)?;
            y.add(&t[2])?.mul(&y)
        });
        assert!(g.nodes.iter().any(|n| matches!(n.body, NodeBody::Pointwise { op: PointwiseOp::Binary(_), .. })));
        let g = lowered(|t| t[0].linear(&t[1], Some(&t[2]))?.gelu());
        let NodeBody::Matmul { epilogue, .. } = &g.nodes[0].body else { panic!() };
        assert!(epilogue.bias.is_some() && !epilogue.relu);
        assert!(g.nodes.len() > 1, "the GELU is its own node");
    }
}
