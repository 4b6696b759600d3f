//! The derivative formulas, the engine's `derivatives.yaml`: for each op of the catalogue, in the
//! catalogue's order (`op/mod.rs`), the gradient of each operand given the gradient `g` of the
//! output, written with `Tensor` ops.
//!
//! PyTorch writes each formula beside the op's entry in `derivatives.yaml`. The engine's op
//! catalogue sits below tensors (`op` cannot call `Tensor` methods: `tests/layers.rs`), so the
//! formulas live here, one arm per catalogue variant, in the same order: reading this file beside
//! `op/mod.rs` is reading the two tables side by side. Being tensor ops, every formula runs on every
//! device, and, while fx traces, records itself into the graph (the joint graph of [`crate::aot`]).
//!
//! Names in the formulas: `x` (or `a`, `b`) the saved operands, `y` the saved output, `g` the
//! output's gradient. `needs[i]` says whether operand `i` wants a gradient: a formula is only
//! evaluated for those, so a traced backward holds no dead nodes.

use std::f32::consts::{FRAC_2_SQRT_PI, PI};

use crate::error::{Error, Result, SourceLocation};
use crate::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use crate::tensor::{Operand, Tensor};

/// The values an op's derivative may read: its operands and its output, outside the tape (so
/// that a node never holds itself through its output).
pub(crate) struct Saved {
    pub(super) operands: Vec<SavedOperand>,
    pub(super) output: Tensor,
}

pub(super) enum SavedOperand {
    Tensor(Tensor),
    Scalar(f32),
}

impl Saved {
    /// Operand `i` as the op received it.
    pub fn operand(&self, i: usize) -> Operand<'_> {
        match &self.operands[i] {
            SavedOperand::Tensor(t) => Operand::Tensor(t),
            SavedOperand::Scalar(v) => Operand::Scalar(*v),
        }
    }

    /// Operand `i`, which the op's shape rule requires to be a tensor.
    pub fn tensor(&self, i: usize) -> &Tensor {
        match &self.operands[i] {
            SavedOperand::Tensor(t) => t,
            SavedOperand::Scalar(_) => unreachable!("operand {i} of this op is a tensor"),
        }
    }

    /// How many operands the op had.
    pub fn len(&self) -> usize {
        self.operands.len()
    }

    /// The op's result.
    pub fn output(&self) -> &Tensor {
        &self.output
    }
}

/// Whether the op has a derivative at all: comparisons (which return 0/1 masks) do not, so their
/// results never require grad, as PyTorch's boolean results do not; nor does `copy_`, which
/// writes memory (an optimizer's update, under `no_grad`).
pub(super) fn is_differentiable(op: &Op) -> bool {
    !matches!(
        op,
        Op::Binary(BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge)
            | Op::CopyInto
    )
}

/// The node's name as `grad_fn` shows it: `MulBackward`, `LayerNormBackward`.
pub(super) fn node_name(op: &Op) -> String {
    let camel: String = op
        .name()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect();
    format!("{camel}Backward")
}

/// The gradient of each operand of `op` (`None` where `needs` says none is wanted, or for a scalar
/// operand), given the gradient `g` of its output.
pub(super) fn backward(
    op: &Op,
    saved: &Saved,
    g: &Tensor,
    needs: &[bool],
    location: SourceLocation,
) -> Result<Vec<Option<Tensor>>> {
    let x = || saved.tensor(0);
    let y = saved.output();
    // Evaluates operand `i`'s formula only when its gradient is wanted.
    let grad = |i: usize, formula: &dyn Fn() -> Result<Tensor>| -> Result<Option<Tensor>> {
        if needs.get(i) == Some(&true) { formula().map(Some) } else { Ok(None) }
    };
    let one = |formula: &dyn Fn() -> Result<Tensor>| -> Result<Vec<Option<Tensor>>> { Ok(vec![grad(0, formula)?]) };
    match op {
        Op::Unary(u) => one(&|| unary(*u, x(), y, g)),
        Op::Binary(b) => {
            let (a, bb) = (saved.operand(0), saved.operand(1));
            let (da, db) = binary(*b, a, bb, y, g);
            Ok(vec![grad(0, &|| sum_to(da()?, shape(a)))?, grad(1, &|| sum_to(db()?, shape(bb)))?])
        }
        Op::Where => {
            let cond = saved.tensor(0);
            let (a, b) = (saved.operand(1), saved.operand(2));
            Ok(vec![
                None,
                grad(1, &|| sum_to(cond.where_(g, 0.0)?, shape(a)))?,
                grad(2, &|| sum_to(cond.where_(0.0, g)?, shape(b)))?,
            ])
        }
        Op::Reduce { kind, dim, keepdim } => one(&|| {
            let x = x();
            let gk = if *keepdim { g.clone() } else { g.unsqueeze(*dim as isize)? };
            match kind {
                ReduceOp::Sum => gk.expand(x.shape()),
                ReduceOp::Mean => gk.div(x.shape()[*dim] as f32)?.expand(x.shape()),
                // The gradient is shared evenly between the elements equal to the maximum.
                ReduceOp::Max => {
                    let yk = if *keepdim { y.clone() } else { y.unsqueeze(*dim as isize)? };
                    let hits = x.eq(&yk)?;
                    hits.mul(&gk)?.div(&hits.sum(*dim as isize, true)?)
                }
            }
        }),
        Op::Matmul => {
            let (a, b) = (saved.tensor(0), saved.tensor(1));
            Ok(vec![
                grad(0, &|| sum_to(g.matmul(&b.transpose(-2, -1)?)?, a.shape()))?,
                grad(1, &|| sum_to(a.transpose(-2, -1)?.matmul(g)?, b.shape()))?,
            ])
        }
        Op::Reshape { .. } => one(&|| g.reshape(x().shape())),
        Op::Permute { dims } => one(&|| {
            let mut inverse = vec![0; dims.len()];
            for (i, &d) in dims.iter().enumerate() {
                inverse[d] = i;
            }
            g.permute(&inverse)
        }),
        Op::Expand { .. } => one(&|| sum_to(g.clone(), x().shape())),
        Op::Slice { dim, start, end, step } => one(&|| slice_backward(g, x().shape(), *dim, *start, *end, *step)),
        Op::Contiguous => one(&|| Ok(g.clone())),
        // The gradient goes back in the input's dtype (as every gradient does: see `engine.rs`).
        Op::ToDtype { .. } => one(&|| g.to_dtype(x().dtype())),
        Op::ScaledMm { .. } => Err(no_formula(
            "scaled_mm",
            "FP8 products are for inference; train in bf16 (autocast) and quantize the weights afterwards",
            location,
        )),
        Op::CopyInto => unreachable!("copy_ writes memory in place: not differentiable, so never recorded"),
        Op::Cat { dim } => {
            let mut offset = 0;
            let mut grads = Vec::with_capacity(saved.len());
            for i in 0..saved.len() {
                let size = saved.tensor(i).shape()[*dim];
                grads.push(grad(i, &|| g.slice(*dim as isize, offset, offset + size, 1))?);
                offset += size;
            }
            Ok(grads)
        }
        // y * (g - sum(g * y))
        Op::Softmax { dim } => one(&|| y.mul(&g.sub(&g.mul(y)?.sum(*dim as isize, true)?)?)),
        // g - exp(y) * sum(g)
        Op::LogSoftmax { dim } => one(&|| g.sub(&y.exp()?.mul(&g.sum(*dim as isize, true)?)?)),
        Op::LayerNorm { eps } => layer_norm(saved, g, eps.0, needs),
        Op::Linear => {
            let (input, weight) = (saved.tensor(0), saved.tensor(1));
            let out = weight.shape()[0];
            let rows = g.numel() / out.max(1);
            let g2 = || reshaped(g, &[rows, out]);
            let x2 = || reshaped(input, &[rows, weight.shape()[1]]);
            let mut grads = vec![
                grad(0, &|| reshaped(&g2()?.matmul(weight)?, input.shape()))?,
                grad(1, &|| g2()?.t()?.matmul(&x2()?))?,
            ];
            if saved.len() == 3 {
                grads.push(grad(2, &|| g2()?.sum(0, false))?);
            }
            Ok(grads)
        }
        Op::Cond { .. } => Err(no_formula("cond", "branch on a value with where_ instead", location)),
        Op::ScaledDotProductAttention { mask, causal, scale } => {
            let grads = attention_backward(g, saved, *mask, *causal, scale.0, location)?;
            let [dq, dk, dv] = grads;
            let mut out = vec![needs[0].then_some(dq), needs[1].then_some(dk), needs[2].then_some(dv)];
            if saved.len() == 4 {
                if needs[3] {
                    return Err(no_formula(
                        "scaled_dot_product_attention's mask",
                        "detach the mask: attention gives no gradient to it",
                        location,
                    ));
                }
                out.push(None);
            }
            Ok(out)
        }
        Op::ScaledDotProductAttentionBackward { .. } => Err(no_formula(
            "scaled_dot_product_attention_backward",
            "gradients of gradients (double backward) are not supported",
            location,
        )),
        Op::Custom(custom) => Err(no_formula(
            custom.name(),
            "a custom op has no derivative formula; compute it from differentiable ops, or detach its inputs",
            location,
        )),
    }
}

fn no_formula(what: &str, hint: &str, location: SourceLocation) -> Error {
    Error::Autograd { message: format!("the derivative for {what} is not implemented: {hint}"), location }
}

/// The shape of an operand (`[]` for a scalar, which never needs a gradient).
fn shape<'a>(operand: Operand<'a>) -> &'a [usize] {
    match operand {
        Operand::Tensor(t) => t.shape(),
        Operand::Scalar(_) => &[],
    }
}

fn bin<'a, 'b>(op: BinaryOp, a: impl Into<Operand<'a>>, b: impl Into<Operand<'b>>) -> Result<Tensor> {
    Op::Binary(op).apply(&[a.into(), b.into()], SourceLocation::caller())
}

/// `t` with `shape`: itself when it has it already (no node in a traced backward), else a reshape.
fn reshaped(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if t.shape() == shape { Ok(t.clone()) } else { t.reshape(shape) }
}

/// `grad` summed down to `shape`: the gradient of a broadcast is the sum over the copies
/// (PyTorch's `sum_to_size`).
pub(crate) fn sum_to(mut grad: Tensor, shape: &[usize]) -> Result<Tensor> {
    while grad.rank() > shape.len() {
        grad = grad.sum(0, false)?;
    }
    for (d, &size) in shape.iter().enumerate() {
        if size == 1 && grad.shape()[d] != 1 {
            grad = grad.sum(d as isize, true)?;
        }
    }
    Ok(grad)
}

fn unary(op: UnaryOp, x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    match op {
        UnaryOp::Neg => g.neg(),
        UnaryOp::Exp => g.mul(y),
        UnaryOp::Log => g.div(x),
        UnaryOp::Log1p => g.div(&x.add(1.0)?),
        UnaryOp::Sqrt => g.div(&y.mul(2.0)?),
        // -g / (2 x sqrt(x)) = -0.5 g y^3
        UnaryOp::Rsqrt => g.mul(&y.mul(y)?.mul(y)?)?.mul(-0.5),
        UnaryOp::Sin => g.mul(&x.cos()?),
        UnaryOp::Cos => g.mul(&x.sin()?.neg()?),
        UnaryOp::Tanh => g.mul(&y.mul(y)?.neg()?.add(1.0)?),
        UnaryOp::Erf => g.mul(&x.mul(x)?.neg()?.exp()?.mul(FRAC_2_SQRT_PI)?),
        // sign(x) as (x > 0) - (x < 0): 0 at 0, as PyTorch's `sgn`.
        UnaryOp::Abs => g.mul(&x.gt(0.0)?.sub(&x.lt(0.0)?)?),
        // Zero where the output is <= 0 (PyTorch's threshold_backward), the gradient elsewhere.
        UnaryOp::Relu => y.le(0.0)?.where_(0.0, g),
        UnaryOp::Sigmoid => g.mul(&y.mul(&y.neg()?.add(1.0)?)?),
        // d/dx x Φ(x) = Φ(x) + x φ(x)
        UnaryOp::Gelu => {
            let cdf = x.mul(std::f32::consts::FRAC_1_SQRT_2)?.erf()?.add(1.0)?.mul(0.5)?;
            let pdf = x.mul(x)?.mul(-0.5)?.exp()?.mul(1.0 / (2.0 * PI).sqrt())?;
            g.mul(&cdf.add(&x.mul(&pdf)?)?)
        }
    }
}

/// A formula for the gradient of one operand of a binary op, before the sum to its shape.
type Formula<'f> = Box<dyn Fn() -> Result<Tensor> + 'f>;

/// The formulas for `a` and `b` of `a op b = y`. Comparisons have none (they are not recorded).
fn binary<'f>(
    op: BinaryOp,
    a: Operand<'f>,
    b: Operand<'f>,
    y: &'f Tensor,
    g: &'f Tensor,
) -> (Formula<'f>, Formula<'f>) {
    match op {
        BinaryOp::Add => (Box::new(move || Ok(g.clone())), Box::new(move || Ok(g.clone()))),
        BinaryOp::Sub => (Box::new(move || Ok(g.clone())), Box::new(move || g.neg())),
        BinaryOp::Mul => (Box::new(move || g.mul(b)), Box::new(move || g.mul(a))),
        // d/db a/b = -a / b^2 = -y / b
        BinaryOp::Div => (Box::new(move || g.div(b)), Box::new(move || g.mul(y)?.div(b)?.neg())),
        // The larger operand gets the gradient; a tie shares it in halves (as PyTorch's).
        BinaryOp::Maximum => (
            Box::new(move || g.mul(&bin(BinaryOp::Gt, a, b)?.add(&bin(BinaryOp::Eq, a, b)?.mul(0.5)?)?)),
            Box::new(move || g.mul(&bin(BinaryOp::Lt, a, b)?.add(&bin(BinaryOp::Eq, a, b)?.mul(0.5)?)?)),
        ),
        BinaryOp::Minimum => (
            Box::new(move || g.mul(&bin(BinaryOp::Lt, a, b)?.add(&bin(BinaryOp::Eq, a, b)?.mul(0.5)?)?)),
            Box::new(move || g.mul(&bin(BinaryOp::Gt, a, b)?.add(&bin(BinaryOp::Eq, a, b)?.mul(0.5)?)?)),
        ),
        // d/da a^b = b a^(b-1) (0 where b == 0, so 0^0 has no NaN); d/db = y ln(a) (0 where a == 0
        // and b >= 0), as PyTorch's pow_backward.
        BinaryOp::Pow => (
            Box::new(move || {
                let d = match b {
                    Operand::Scalar(0.0) => return zeros_from(g, g.shape()),
                    Operand::Scalar(e) => g.mul(e)?.mul(&bin(BinaryOp::Pow, a, e - 1.0)?)?,
                    Operand::Tensor(e) => g.mul(e)?.mul(&bin(BinaryOp::Pow, a, &e.sub(1.0)?)?)?,
                };
                match b {
                    Operand::Tensor(e) => e.eq(0.0)?.where_(0.0, &d),
                    Operand::Scalar(_) => Ok(d),
                }
            }),
            Box::new(move || {
                let Operand::Tensor(e) = b else { unreachable!("a scalar exponent needs no gradient") };
                match a {
                    Operand::Scalar(base) if base == 0.0 => e.ge(0.0)?.where_(0.0, &g.mul(y)?.mul(base.ln())?),
                    Operand::Scalar(base) => g.mul(y)?.mul(base.ln()),
                    Operand::Tensor(base) => {
                        let zero = base.eq(0.0)?.mul(&e.ge(0.0)?)?;
                        zero.where_(0.0, &g.mul(y)?.mul(&base.log()?)?)
                    }
                }
            }),
        ),
        BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
            unreachable!("comparisons are not differentiable, so never recorded")
        }
    }
}

/// A tensor of zeros of `shape` on `like`'s device, made from `like` by ops (so that it runs on
/// every device and, in a trace, is part of the graph rather than a captured constant).
fn zeros_from(like: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let flat = like.reshape(&[like.numel()])?;
    let one = if like.numel() > 0 { flat.slice(0, 0, 1, 1)? } else { flat.sum(0, true)? };
    one.where_(0.0, 0.0)?.reshape(&vec![1; shape.len()])?.expand(shape)
}

/// The gradient of `x.slice(dim, start, end, step)` for `x` of shape `input`: `g` spread back to
/// every `step`-th position from `start`, zeros elsewhere (PyTorch's `slice_backward`).
fn slice_backward(g: &Tensor, input: &[usize], dim: usize, start: usize, end: usize, step: usize) -> Result<Tensor> {
    let d = dim as isize;
    let kept = g.shape()[dim];
    let with_size = |size: usize| {
        let mut s = input.to_vec();
        s[dim] = size;
        s
    };
    // Each kept element followed by `step - 1` zeros, cut to the sliced span `end - start`.
    let spread = if step == 1 || kept == 0 {
        g.clone()
    } else {
        let mut gap_shape = g.shape().to_vec();
        gap_shape.insert(dim + 1, step - 1);
        let gaps = zeros_from(g, &gap_shape)?;
        let interleaved = Tensor::cat(&[&g.unsqueeze(d + 1)?, &gaps], d + 1)?;
        let span = (end - start).min(kept * step);
        interleaved.reshape(&with_size(kept * step))?.slice(d, 0, span, 1)?
    };
    let mut parts = Vec::new();
    let before = zeros_from(g, &with_size(start))?;
    let after_size = input[dim] - start - spread.shape()[dim];
    let after = zeros_from(g, &with_size(after_size))?;
    if start > 0 {
        parts.push(&before);
    }
    parts.push(&spread);
    if after_size > 0 {
        parts.push(&after);
    }
    if parts.len() == 1 { Ok(spread.clone()) } else { Tensor::cat(&parts, d) }
}

/// Layer norm over the last dimension of `x` with `weight` and `bias`: the statistics are
/// recomputed from `x` (PyTorch saves them; here the partitioner decides what to keep).
fn layer_norm(saved: &Saved, g: &Tensor, eps: f32, needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
    let (x, weight) = (saved.tensor(0), saved.tensor(1));
    let d = *x.shape().last().expect("layer_norm's input has rank >= 1");
    let rows = x.numel() / d.max(1);
    let (x2, g2) = (reshaped(x, &[rows, d])?, reshaped(g, &[rows, d])?);
    let centered = x2.sub(&x2.mean(1, true)?)?;
    let rstd = centered.mul(&centered)?.mean(1, true)?.add(eps)?.rsqrt()?;
    let normalized = centered.mul(&rstd)?;
    let dx = if needs[0] {
        // rstd * (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) with ĝ = g * weight
        let gn = g2.mul(weight)?;
        let projection = normalized.mul(&gn.mul(&normalized)?.mean(1, true)?)?;
        Some(reshaped(&rstd.mul(&gn.sub(&gn.mean(1, true)?)?.sub(&projection)?)?, x.shape())?)
    } else {
        None
    };
    let dweight = if needs[1] { Some(g2.mul(&normalized)?.sum(0, false)?) } else { None };
    let dbias = if needs[2] { Some(g2.sum(0, false)?) } else { None };
    Ok(vec![dx, dweight, dbias])
}

/// The gradients of `q`, `k` and `v` from one attention-backward kernel, which recomputes the
/// scores block by block (the flash-attention backward): its packed result is split here.
fn attention_backward(
    g: &Tensor,
    saved: &Saved,
    mask: crate::op::AttentionMask,
    causal: bool,
    scale: f32,
    location: SourceLocation,
) -> Result<[Tensor; 3]> {
    let (q, k, v) = (saved.tensor(0), saved.tensor(1), saved.tensor(2));
    let mut operands = vec![
        Operand::Tensor(g),
        Operand::Tensor(q),
        Operand::Tensor(k),
        Operand::Tensor(v),
        Operand::Tensor(saved.output()),
    ];
    if saved.len() == 4 {
        operands.push(Operand::Tensor(saved.tensor(3)));
    }
    let op = Op::ScaledDotProductAttentionBackward { mask, causal, scale: crate::scalar::Scalar(scale) };
    let packed = op.apply(&operands, location)?;
    let (nq, nk, nv) = (q.numel(), k.numel(), v.numel());
    Ok([
        packed.slice(0, 0, nq, 1)?.reshape(q.shape())?,
        packed.slice(0, nq, nq + nk, 1)?.reshape(k.shape())?,
        packed.slice(0, nq + nk, nq + nk + nv, 1)?.reshape(v.shape())?,
    ])
}
