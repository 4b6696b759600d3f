//! Scaled dot-product attention as one op, the analogue of ATen's
//! `scaled_dot_product_attention`: its mask kinds and its shape rule. The tuned kernels live in
//! `device::cpu::tuned::attention` and `device::cuda::tuned::attention`; the plain ones compose it
//! (`device::provider::composed_attention`).

use std::fmt;

use crate::layout::broadcast_shapes;

/// How the optional fourth operand of [`Op::ScaledDotProductAttention`](super::Op) is read.
///
/// The engine's tensors are `f32`, so a boolean mask is an `f32` tensor read as `value != 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionMask {
    /// No mask: three operands.
    None,
    /// Nonzero means "this query may attend to this key", as a `torch.bool` mask's `True`.
    Boolean,
    /// Added to the scaled scores before the softmax (`-inf` removes a key).
    Additive,
}

impl AttentionMask {
    /// The name printed in graphs (`none`, `boolean`, `additive`).
    pub fn name(self) -> &'static str {
        match self {
            AttentionMask::None => "none",
            AttentionMask::Boolean => "boolean",
            AttentionMask::Additive => "additive",
        }
    }
}

impl fmt::Display for AttentionMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The parameters of one attention call as kernels take them (those of
/// [`Op::ScaledDotProductAttention`](super::Op)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// How the fourth operand, if any, is read.
    pub mask: AttentionMask,
    /// Query `i` sees only keys `j <= i`.
    pub causal: bool,
    /// Multiplies `q @ k^T`.
    pub scale: f32,
}

/// The sizes one attention call works on: `batch` (the product of the leading dims), `q_len`
/// queries against `kv_len` keys, `head_dim` for queries and keys, `value_dim` for values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionSizes {
    /// Product of the leading (batch and head) dims.
    pub batch: usize,
    /// Queries per batch entry (`L`).
    pub q_len: usize,
    /// Keys and values per batch entry (`S`).
    pub kv_len: usize,
    /// Width of a query and a key (`E`).
    pub head_dim: usize,
    /// Width of a value, and of the output (`Ev`).
    pub value_dim: usize,
}

impl AttentionSizes {
    /// The sizes of `q [..., L, E]`, `k [..., S, E]`, `v [..., S, Ev]` (shapes already checked).
    pub fn of(q: &[usize], k: &[usize], v: &[usize]) -> AttentionSizes {
        let rank = q.len();
        AttentionSizes {
            batch: q[..rank - 2].iter().product(),
            q_len: q[rank - 2],
            kv_len: k[rank - 2],
            head_dim: q[rank - 1],
            value_dim: v[rank - 1],
        }
    }

    /// Floating-point operations of the two matrix products (`2·L·S·E + 2·L·S·Ev` per batch
    /// entry), the figure FLOP rates are quoted against.
    pub fn flops(&self) -> f64 {
        2.0 * (self.batch * self.q_len * self.kv_len) as f64 * (self.head_dim + self.value_dim) as f64
    }
}

/// The output shape `[..., L, Ev]`, or what is wrong: `q [..., L, E]`, `k [..., S, E]` and
/// `v [..., S, Ev]` share their leading dims (PyTorch's fused kernels ask the same), and the mask,
/// when there is one, broadcasts to `[..., L, S]`.
pub(super) fn output_shape(shapes: &[&[usize]], mask: AttentionMask, causal: bool) -> Result<Vec<usize>, String> {
    let (q, k, v) = (shapes[0], shapes[1], shapes[2]);
    let rank = q.len();
    if rank < 2 || k.len() != rank || v.len() != rank {
        return Err(format!(
            "expects q, k and v of one rank, at least 2 ([..., seq, head_dim]); got ranks {}, {} and {}",
            rank,
            k.len(),
            v.len()
        ));
    }
    if q[..rank - 2] != k[..rank - 2] || q[..rank - 2] != v[..rank - 2] {
        return Err("q, k and v must have the same leading (batch, head) sizes".into());
    }
    if q[rank - 1] != k[rank - 1] {
        return Err(format!("q's head_dim {} differs from k's {}", q[rank - 1], k[rank - 1]));
    }
    if k[rank - 2] != v[rank - 2] {
        return Err(format!("k has {} keys but v has {} values", k[rank - 2], v[rank - 2]));
    }
    match (mask, shapes.get(3)) {
        (AttentionMask::None, None) => {}
        (AttentionMask::None, Some(_)) => return Err("a mask operand was given with mask kind `none`".into()),
        (_, None) => return Err(format!("mask kind `{mask}` needs a mask operand")),
        (_, Some(m)) => {
            if causal {
                return Err("pass either a mask or causal=true, not both (as PyTorch requires)".into());
            }
            let scores = [&q[..rank - 1], &[k[rank - 2]][..]].concat();
            if broadcast_shapes(m, &scores).as_deref() != Some(&scores[..]) {
                return Err(format!("the mask of shape {m:?} does not broadcast to the scores' shape {scores:?}"));
            }
        }
    }
    let mut out = q.to_vec();
    out[rank - 1] = v[rank - 1];
    Ok(out)
}

/// The packed output shape of the attention backward, `[q.numel() + k.numel() + v.numel()]`, for
/// operands `(grad_out, q, k, v, out [, mask])`, or what is wrong: `q`, `k`, `v` (and the mask)
/// follow the forward's rules, and `grad_out` and `out` have the forward output's shape.
pub(super) fn backward_output_shape(
    shapes: &[&[usize]],
    mask: AttentionMask,
    causal: bool,
) -> Result<Vec<usize>, String> {
    let forward: Vec<&[usize]> = shapes[1..].iter().enumerate().filter(|&(i, _)| i != 3).map(|(_, s)| *s).collect();
    let out = output_shape(&forward, mask, causal)?;
    if shapes[0] != out.as_slice() || shapes[4] != out.as_slice() {
        return Err(format!(
            "grad_out {:?} and out {:?} must have the attention output's shape {out:?}",
            shapes[0], shapes[4]
        ));
    }
    let total: usize = shapes[1..4].iter().map(|s| s.iter().product::<usize>()).sum();
    Ok(vec![total])
}
