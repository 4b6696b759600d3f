//! Matrix products, attention and the neural-network composites (`linear`, `softmax`,
//! `log_softmax`, `layer_norm`): single ops eagerly, composites decomposed into primitives by AOT.

use super::normalize_dim;
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::op::{AttentionMask, Op};
use crate::scalar::Scalar;
use crate::tensor::{Operand, Tensor};

/// The mask of [`Tensor::scaled_dot_product_attention`], broadcastable to the scores'
/// `[..., L, S]`: PyTorch's `attn_mask`, boolean or additive.
#[derive(Clone, Copy, Debug)]
pub enum AttnMask<'a> {
    /// Nonzero where a query may attend to a key (a `torch.bool` mask, stored as `f32`).
    Boolean(&'a Tensor),
    /// Added to the scaled scores (`-inf` removes a key).
    Additive(&'a Tensor),
}

impl Tensor {
    // ANCHOR: sdpa
    /// `softmax(self @ key^T * scale [+ mask]) @ value`, as `torch.nn.functional.
    /// scaled_dot_product_attention(query, key, value, attn_mask, is_causal=causal, scale=scale)`:
    /// `self` is the query `[..., L, E]`, `key` is `[..., S, E]`, `value` is `[..., S, Ev]`, and the
    /// result is `[..., L, Ev]`. `scale` defaults to `1/sqrt(E)`; `causal` lets query `i` see only
    /// keys `j <= i`. One kernel, which never stores the `[L, S]` scores: memory grows with the
    /// sequence length, not with its square. A row whose keys are all masked is NaN, as in
    /// PyTorch's math path.
    #[track_caller]
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        mask: Option<AttnMask>,
        causal: bool,
        scale: Option<f32>,
    ) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let head_dim = self.shape().last().copied().unwrap_or(0);
        let scale = scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
        if !scale.is_finite() {
            let message = format!("the scale must be finite, got {scale} (head_dim {head_dim})");
            return Err(Error::InvalidArgument { op: "scaled_dot_product_attention", message, location });
        }
        let (kind, mask) = match mask {
            None => (AttentionMask::None, None),
            Some(AttnMask::Boolean(m)) => (AttentionMask::Boolean, Some(m)),
            Some(AttnMask::Additive(m)) => (AttentionMask::Additive, Some(m)),
        };
        let mut rest = vec![Operand::Tensor(key), Operand::Tensor(value)];
        rest.extend(mask.map(Operand::Tensor));
        let op = Op::ScaledDotProductAttention { mask: kind, causal, scale: Scalar(scale) };
        self.apply(op, &rest, location)
    }
    // ANCHOR_END: sdpa

    /// Matrix product over the last two dims; leading (batch) dims broadcast. Both operands need
    /// rank 2 or more.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.apply(Op::Matmul, &[Operand::Tensor(other)], SourceLocation::caller())
    }

    /// `(self * scale_a) @ (b * scale_b)` of two 8-bit-float matrices `self[m, k]` and `b[k, n]`,
    /// accumulated in `f32` and stored as `out_dtype` (`f32`, `bf16` or `f16`):
    /// `torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=...)`. The scales are one-element
    /// `f32` tensors, per tensor: convert a matrix `w` as `w / s` to `f8e4m3` (`s` chosen so the
    /// largest magnitude lands near 448) and pass `s` as its scale. On GPUs of compute
    /// capability 8.9 and newer it runs on the FP8 tensor cores through cuBLASLt; elsewhere it is
    /// an [`Error::Unsupported`].
    #[track_caller]
    pub fn scaled_mm(&self, b: &Tensor, scale_a: &Tensor, scale_b: &Tensor, out_dtype: DType) -> Result<Tensor> {
        crate::wires::trip(crate::wires::Wire::ScaledMm);
        let rest = [Operand::Tensor(b), Operand::Tensor(scale_a), Operand::Tensor(scale_b)];
        self.apply(Op::ScaledMm { out_dtype }, &rest, SourceLocation::caller())
    }

    /// `self @ weight.T + bias`, as `torch.nn.functional.linear`: `weight` is `[out, in]`.
    #[track_caller]
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let mut rest = vec![Operand::Tensor(weight)];
        rest.extend(bias.map(Operand::Tensor));
        self.apply(Op::Linear, &rest, SourceLocation::caller())
    }

    /// Softmax along `dim` (negative counts from the end).
    #[track_caller]
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dim = normalize_dim("softmax", dim, self.rank(), location)?;
        self.apply(Op::Softmax { dim }, &[], location)
    }

    /// Log of the softmax along `dim`, computed stably.
    #[track_caller]
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let dim = normalize_dim("log_softmax", dim, self.rank(), location)?;
        self.apply(Op::LogSoftmax { dim }, &[], location)
    }

    /// Layer norm over the last dimension with `weight` and `bias` of that size.
    #[track_caller]
    pub fn layer_norm(&self, weight: &Tensor, bias: &Tensor, eps: f32) -> Result<Tensor> {
        let rest = [Operand::Tensor(weight), Operand::Tensor(bias)];
        self.apply(Op::LayerNorm { eps: Scalar(eps) }, &rest, SourceLocation::caller())
    }
}
