//! The decomposition table: each composite op written in primitive ops, the way PyTorch's
//! `torch._decomp` writes them in Python over ATen ops.

use std::f32::consts::FRAC_1_SQRT_2;

use crate::error::{Result, SourceLocation};
use crate::fx::Graph;
use crate::op::{BinaryOp, Op, OpClass, ReduceOp, UnaryOp};
use crate::tensor::{Operand, Tensor};

fn tensor<'a>(operands: &[Operand<'a>], i: usize) -> &'a Tensor {
    match operands[i] {
        Operand::Tensor(t) => t,
        Operand::Scalar(_) => unreachable!("composites take tensor operands"),
    }
}

/// The primitive-op form of `op` applied to `operands`, or `None` when `op` is already primitive.
pub fn decompose_op(op: &Op, operands: &[Operand], location: SourceLocation) -> Option<Result<Tensor>> {
    let x = || tensor(operands, 0);
    Some(match op {
        Op::Unary(UnaryOp::Gelu) => gelu(x(), location),
        Op::Softmax { dim } => softmax(x(), *dim, false, location),
        Op::LogSoftmax { dim } => softmax(x(), *dim, true, location),
        Op::LayerNorm { eps } => layer_norm(x(), tensor(operands, 1), tensor(operands, 2), eps.0, location),
        Op::Linear => {
            crate::eager::linear(x(), tensor(operands, 1), operands.get(2).map(|_| tensor(operands, 2)), location)
        }
        Op::Cond { true_graph, false_graph } => {
            if is_primitive(true_graph) && is_primitive(false_graph) {
                return None;
            }
            let decomposed = (super::decompose(true_graph), super::decompose(false_graph));
            match decomposed {
                (Ok(t), Ok(f)) => prim(Op::Cond { true_graph: t.into(), false_graph: f.into() }, operands, location),
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        }
        _ => return None,
    })
}

/// True when no node of `graph` (or of its branches) has a decomposition left to apply.
fn is_primitive(graph: &Graph) -> bool {
    graph.nodes().iter().filter_map(|n| n.op()).all(|op| match op {
        Op::Cond { true_graph, false_graph } => is_primitive(true_graph) && is_primitive(false_graph),
        op => op.class() != OpClass::Composite,
    })
}

/// Applies a primitive op at the composite's location.
fn prim(op: Op, operands: &[Operand], location: SourceLocation) -> Result<Tensor> {
    op.apply(operands, location)
}

fn binary(op: BinaryOp, a: &Tensor, b: Operand, location: SourceLocation) -> Result<Tensor> {
    prim(Op::Binary(op), &[Operand::Tensor(a), b], location)
}

fn reduce(kind: ReduceOp, x: &Tensor, dim: usize, location: SourceLocation) -> Result<Tensor> {
    prim(Op::Reduce { kind, dim, keepdim: true }, &[Operand::Tensor(x)], location)
}

/// `0.5 * x * (1 + erf(x / sqrt(2)))`
fn gelu(x: &Tensor, location: SourceLocation) -> Result<Tensor> {
    let scaled = binary(BinaryOp::Mul, x, Operand::Scalar(FRAC_1_SQRT_2), location)?;
    let erf = prim(Op::Unary(UnaryOp::Erf), &[Operand::Tensor(&scaled)], location)?;
    let one_plus = binary(BinaryOp::Add, &erf, Operand::Scalar(1.0), location)?;
    let half_x = binary(BinaryOp::Mul, x, Operand::Scalar(0.5), location)?;
    binary(BinaryOp::Mul, &half_x, Operand::Tensor(&one_plus), location)
}

// ANCHOR: softmax
/// `exp(x - max) / sum(exp(x - max))`, or for log-softmax `(x - max) - log(sum(exp(x - max)))`.
fn softmax(x: &Tensor, dim: usize, log: bool, location: SourceLocation) -> Result<Tensor> {
    let max = reduce(ReduceOp::Max, x, dim, location)?;
    let shifted = binary(BinaryOp::Sub, x, Operand::Tensor(&max), location)?;
    let exp = prim(Op::Unary(UnaryOp::Exp), &[Operand::Tensor(&shifted)], location)?;
    let sum = reduce(ReduceOp::Sum, &exp, dim, location)?;
    if log {
        let log_sum = prim(Op::Unary(UnaryOp::Log), &[Operand::Tensor(&sum)], location)?;
        binary(BinaryOp::Sub, &shifted, Operand::Tensor(&log_sum), location)
    } else {
        binary(BinaryOp::Div, &exp, Operand::Tensor(&sum), location)
    }
}
// ANCHOR_END: softmax

/// `(x - mean) * rsqrt(var + eps) * weight + bias` over the last dimension.
fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f32, location: SourceLocation) -> Result<Tensor> {
    let last = x.rank() - 1;
    let mean = reduce(ReduceOp::Mean, x, last, location)?;
    let centered = binary(BinaryOp::Sub, x, Operand::Tensor(&mean), location)?;
    let squared = binary(BinaryOp::Mul, &centered, Operand::Tensor(&centered), location)?;
    let var = reduce(ReduceOp::Mean, &squared, last, location)?;
    let var_eps = binary(BinaryOp::Add, &var, Operand::Scalar(eps), location)?;
    let inv_std = prim(Op::Unary(UnaryOp::Rsqrt), &[Operand::Tensor(&var_eps)], location)?;
    let normalized = binary(BinaryOp::Mul, &centered, Operand::Tensor(&inv_std), location)?;
    let scaled = binary(BinaryOp::Mul, &normalized, Operand::Tensor(weight), location)?;
    binary(BinaryOp::Add, &scaled, Operand::Tensor(bias), location)
}
