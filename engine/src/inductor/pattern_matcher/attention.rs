//! Naive attention into `scaled_dot_product_attention`, the analogue of Inductor's
//! `fx_passes/fuse_attention.py` (its `_sfdp_pattern_*` list): the ways people write
//! `softmax(q @ k^T * scale [+ mask]) @ v`, each one pattern, all replaced by the fused op.
//!
//! The variants are every combination of how the scores are scaled (multiplied, divided, `q`
//! scaled first, not at all) and how they are masked (not at all, an added mask, a `where`
//! keeping the scores where the mask is set, a `where` filling `-inf` where it is set). The
//! softmax is matched in its decomposed form, so `softmax(-1)` and a hand-written
//! `exp(x - max) / sum` are the same. `k^T` may be any value: a transpose of `k` is looked
//! through, anything else is transposed back by a new (free) permute.

use super::{Builder, Match, Pattern, Rewrite, any, bind, call, commutative, op_is, same, scalar};
use crate::error::Result;
use crate::fx::{Arg, Graph, Node, NodeId};
use crate::op::{AttentionMask, BinaryOp, Op, ReduceOp, UnaryOp};
use crate::scalar::Scalar;

fn is_matmul(n: &Node) -> bool {
    op_is(n, &Op::Matmul)
}
fn is_mul(n: &Node) -> bool {
    op_is(n, &Op::Binary(BinaryOp::Mul))
}
fn is_div(n: &Node) -> bool {
    op_is(n, &Op::Binary(BinaryOp::Div))
}
fn is_add(n: &Node) -> bool {
    op_is(n, &Op::Binary(BinaryOp::Add))
}
fn is_sub(n: &Node) -> bool {
    op_is(n, &Op::Binary(BinaryOp::Sub))
}
fn is_exp(n: &Node) -> bool {
    op_is(n, &Op::Unary(UnaryOp::Exp))
}
fn is_where(n: &Node) -> bool {
    op_is(n, &Op::Where)
}
/// A reduction of `kind` over the last dim, keeping it (what softmax's decomposition records).
fn last_dim(n: &Node, kind: ReduceOp) -> bool {
    matches!(n.op(), Some(Op::Reduce { kind: k, dim, keepdim: true }) if *k == kind && dim + 1 == n.meta.shape.len())
}
fn is_row_max(n: &Node) -> bool {
    last_dim(n, ReduceOp::Max)
}
fn is_row_sum(n: &Node) -> bool {
    last_dim(n, ReduceOp::Sum)
}

/// How the scores are scaled: a name for the log, and the pattern of the scaled scores.
fn scalings() -> [(&'static str, Pattern); 4] {
    let scores = || call("matmul", is_matmul, [any("q"), any("kt")]);
    [
        ("q @ k^T * scale", commutative("mul", is_mul, [scores(), scalar("scale")])),
        ("q @ k^T / scale", call("div", is_div, [scores(), scalar("divisor")])),
        (
            "(q * scale) @ k^T",
            call("matmul", is_matmul, [commutative("mul", is_mul, [any("q"), scalar("scale")]), any("kt")]),
        ),
        ("q @ k^T", scores()),
    ]
}

/// How the scaled scores are masked: a name, the mask kind, and the pattern around `scaled`.
fn maskings(scaled: Pattern) -> [(&'static str, Pattern); 4] {
    [
        ("", scaled.clone()),
        (" + mask", commutative("add", is_add, [scaled.clone(), any("mask")])),
        (", where(mask, scores, -inf)", call("where", is_where, [any("mask"), scaled.clone(), scalar("fill")])),
        (", where(mask, -inf, scores)", call("where", is_where, [any("fill_where"), scalar("fill"), scaled])),
    ]
}

// ANCHOR: softmax_pattern
/// `exp(x - max(x)) / sum(exp(x - max(x)))` over the last dim, `x` matching `input`.
fn softmax(input: Pattern) -> Pattern {
    let shifted = call("sub", is_sub, [bind("x", input), call("amax", is_row_max, [same("x")])]);
    let exp = bind("e", call("exp", is_exp, [shifted]));
    call("div", is_div, [exp, call("sum", is_row_sum, [same("e")])])
}
// ANCHOR_END: softmax_pattern

// ANCHOR: rewrites
/// The attention rewrites, one per way of scaling times one per way of masking.
pub fn attention_rewrites() -> Vec<Rewrite> {
    let mut rewrites = Vec::new();
    for (scale_name, scaled) in scalings() {
        for (mask_name, masked) in maskings(scaled) {
            rewrites.push(Rewrite {
                name: format!("attention: softmax({scale_name}{mask_name}) @ v"),
                pattern: call("matmul", is_matmul, [softmax(masked), any("v")]),
                check: fits,
                replace,
            });
        }
    }
    rewrites
}
// ANCHOR_END: rewrites

/// What the fused op is called with for a match: q, the node holding k^T, v, the mask and its
/// kind (`invert` when the mask marks the keys to drop), and the scale.
struct Parts {
    q: NodeId,
    kt: NodeId,
    v: NodeId,
    mask: Option<(NodeId, AttentionMask, bool)>,
    scale: f32,
}

fn parts(found: &Match) -> Option<Parts> {
    let scale = match (found.scalar("scale"), found.scalar("divisor")) {
        (Some(s), _) => s,
        (None, Some(d)) => 1.0 / d,
        (None, None) => 1.0,
    };
    let mask = match (found.value("mask"), found.value("fill_where"), found.scalar("fill")) {
        (Some(m), None, None) => Some((m, AttentionMask::Additive, false)),
        (Some(m), None, Some(f)) if f == f32::NEG_INFINITY => Some((m, AttentionMask::Boolean, false)),
        (None, Some(m), Some(f)) if f == f32::NEG_INFINITY => Some((m, AttentionMask::Boolean, true)),
        (None, None, None) => None,
        _ => return None, // a `where` filling something other than -inf is not a mask
    };
    Some(Parts { q: found.value("q")?, kt: found.value("kt")?, v: found.value("v")?, mask, scale })
}

/// The op for these parts.
fn op_of(parts: &Parts) -> Op {
    let mask = parts.mask.map_or(AttentionMask::None, |(_, kind, _)| kind);
    Op::ScaledDotProductAttention { mask, causal: false, scale: Scalar(parts.scale) }
}

/// Whether the fused op takes these operands and gives the root's shape: q, k and v must agree
/// without broadcasting (the naive form's matmul may broadcast), the scale be finite.
fn fits(graph: &Graph, found: &Match) -> bool {
    let Some(parts) = parts(found) else { return false };
    let shape = |id: NodeId| graph.node(id).meta.shape.clone();
    let mut k = shape(parts.kt);
    let rank = k.len();
    if rank < 2 || !parts.scale.is_finite() {
        return false;
    }
    k.swap(rank - 2, rank - 1);
    let (q, v) = (shape(parts.q), shape(parts.v));
    let mask = parts.mask.map(|(m, ..)| shape(m));
    let mut shapes = vec![Some(q.as_slice()), Some(k.as_slice()), Some(v.as_slice())];
    shapes.extend(mask.as_deref().map(Some));
    let root = found.nodes()[0];
    let here = graph.node(root).location.expect("call nodes have a location");
    op_of(&parts).infer_shape(&shapes, here).is_ok_and(|out| out == graph.node(root).meta.shape)
}

/// Builds `scaled_dot_product_attention(q, k, v [, mask])`.
fn replace(found: &Match, b: &mut Builder) -> Result<NodeId> {
    let parts = parts(found).expect("checked by `fits`");
    let rank = b.shape(parts.kt).len();
    let mut swap: Vec<usize> = (0..rank).collect();
    swap.swap(rank - 2, rank - 1);
    let transposed = Op::Permute { dims: swap.clone() };
    let k = match b.op(parts.kt) {
        Some(op) if *op == transposed => b.value(b.input(parts.kt, 0)),
        _ => b.call(transposed, vec![Arg::Node(b.value(parts.kt))])?,
    };
    let mut args = vec![Arg::Node(b.value(parts.q)), Arg::Node(k), Arg::Node(b.value(parts.v))];
    if let Some((mask, _, invert)) = parts.mask {
        let mask = b.value(mask);
        let keep = if invert {
            b.call(Op::Binary(BinaryOp::Eq), vec![Arg::Node(mask), Arg::Scalar(Scalar(0.0))])?
        } else {
            mask
        };
        args.push(Arg::Node(keep));
    }
    b.call(op_of(&parts), args)
}
