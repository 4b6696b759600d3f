//! Autocast's op lists, the analogue of `aten/src/ATen/autocast_mode.cpp`: while autocast is on
//! for a device type ([`crate::precision::autocast`]), the dispatcher casts an op's floating
//! operands before the op runs or is recorded, by the list the op is on:
//!
//! | list | ops here | PyTorch's list | operands become |
//! | --- | --- | --- | --- |
//! | lower precision | `matmul`, `linear`, `scaled_dot_product_attention` | `lower_precision_fp` (`mm`, `bmm`, `matmul`, `linear`, `addmm`, the attention kernels, convolutions) | the autocast dtype |
//! | float32 | `softmax`, `log_softmax`, `layer_norm`, `sum`, `exp`, `log`, `log1p`, `rsqrt`, `pow` | `fp32` and `fp32_set_opt_dtype` (norms, losses, `softmax`, `sum`, `exp`, `log`, `pow`, ...) | `f32` |
//! | everything else | pointwise ops, `mean`, `amax`, views, `cat` | not listed (`cat` is on `promote`, which type promotion already does here) | unchanged: the op runs in its operands' (promoted) dtype |
//!
//! The casts are ordinary `to_dtype` ops, so inside a compiled function they are graph nodes
//! (Dynamo traces autocast the same way), and the autocast state is one of the graph's guards:
//! changing it recompiles.

use crate::dtype::DType;
use crate::error::{Result, SourceLocation};
use crate::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use crate::precision::autocast_state;
use crate::tensor::{Operand, Tensor};

/// Which of autocast's lists an op is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastPolicy {
    /// Runs in the autocast dtype (matrix products and attention: tensor-core work).
    LowerPrecision,
    /// Runs in float32 (reductions, normalisations, exponentials: range- and precision-hungry).
    Float32,
    /// Runs in its operands' dtypes.
    Unchanged,
}

impl CastPolicy {
    /// The list `op` is on.
    pub fn of(op: &Op) -> CastPolicy {
        match op {
            Op::Matmul | Op::Linear | Op::ScaledDotProductAttention { .. } => CastPolicy::LowerPrecision,
            Op::Softmax { .. }
            | Op::LogSoftmax { .. }
            | Op::LayerNorm { .. }
            | Op::Reduce { kind: ReduceOp::Sum, .. }
            | Op::Unary(UnaryOp::Exp | UnaryOp::Log | UnaryOp::Log1p | UnaryOp::Rsqrt)
            | Op::Binary(BinaryOp::Pow) => CastPolicy::Float32,
            _ => CastPolicy::Unchanged,
        }
    }
}

/// The operands `op` runs on under the autocast state now: `None` when nothing is cast (autocast
/// off for the operands' device type, an op on no list, operands already in the wanted dtype),
/// else each tensor operand, cast where it must be (`None` for scalars, which stay as they are,
/// and which do not change a result's dtype; 8-bit floats are left alone).
pub(crate) fn cast_operands(
    op: &Op,
    operands: &[Operand],
    location: SourceLocation,
) -> Result<Option<Vec<Option<Tensor>>>> {
    let state = autocast_state();
    if state.is_off() {
        return Ok(None);
    }
    let Some(device) = operands.iter().find_map(|o| o.tensor().map(Tensor::device)) else { return Ok(None) };
    let Some(low) = state.for_device(device) else { return Ok(None) };
    let target = match CastPolicy::of(op) {
        CastPolicy::LowerPrecision => low,
        CastPolicy::Float32 => DType::F32,
        CastPolicy::Unchanged => return Ok(None),
    };
    let casts = |t: &Tensor| t.dtype() != target && !t.dtype().is_fp8();
    if !operands.iter().any(|o| o.tensor().is_some_and(casts)) {
        return Ok(None);
    }
    operands
        .iter()
        .map(|o| match o {
            Operand::Tensor(t) if casts(t) => t.to_dtype_at(target, location).map(Some),
            Operand::Tensor(t) => Ok(Some((*t).clone())),
            Operand::Scalar(_) => Ok(None),
        })
        .collect::<Result<Vec<Option<Tensor>>>>()
        .map(Some)
}
