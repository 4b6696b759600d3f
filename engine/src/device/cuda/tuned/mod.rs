//! The tuned GPU kernels, the fast paths beside the plain ones (`Plain`):
//!
//! | what | module |
//! | --- | --- |
//! | flash attention (`kernels/attention.cu`): tiles of keys, online softmax, tensor cores from compute capability 8.0 | `attention` |
//! | GEMMs with a fused bias and ReLU, their algorithms listed for max-autotune | [`cublaslt`] |
//! | compiled code's linear-layer products on kernels of our own: their shape and launch | `linear_gemm` |
//! | ... of few rows (`kernels/skinny_gemm.cu`) | `skinny_gemm` |
//! | ... on the tensor cores at float32 accuracy (`kernels/tf32x3_gemm.cu`) | `tf32x3_gemm` |
//!
//! Eager ops reach them through `Tuned`, the GPU's default kernel provider; compiled code's
//! extern kernels through `extern_into`, and its GEMMs through Inductor's GEMM choice.

mod attention;
mod attention_backward;
pub mod cublaslt;
pub(crate) mod linear_gemm;
pub(crate) mod skinny_gemm;
pub(crate) mod tf32x3_gemm;

use std::sync::Arc;

use super::{CudaBuffer, CudaDevice, CudaError, Input, Plain, cat};
use crate::device::provider::{KernelProvider, composed_attention_backward};
use crate::dtype::DType;
use crate::layout::Layout;
use crate::op::{AttentionParams, BinaryOp, Op, ReduceOp, UnaryOp};

/// A GPU's tuned kernels, what eager ops run on by default: the plain kernels, with flash
/// attention in one launch instead of a product, a softmax and a product.
pub(crate) struct Tuned<'a>(pub(crate) &'a Arc<CudaDevice>);

impl KernelProvider for Tuned<'_> {
    type Device = Arc<CudaDevice>;

    fn device(&self) -> &Arc<CudaDevice> {
        self.0
    }

    fn unary(&self, op: UnaryOp, x: Input, out_shape: &[usize]) -> Result<CudaBuffer, CudaError> {
        Plain(self.0).unary(op, x, out_shape)
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: Input,
        b: Input,
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<CudaBuffer, CudaError> {
        Plain(self.0).binary(op, a, b, out_shape, dtype)
    }

    fn where_(&self, inputs: [Input; 3], out_shape: &[usize], dtype: DType) -> Result<CudaBuffer, CudaError> {
        Plain(self.0).where_(inputs, out_shape, dtype)
    }

    fn reduce(&self, kind: ReduceOp, x: Input, dim: usize) -> Result<CudaBuffer, CudaError> {
        Plain(self.0).reduce(kind, x, dim)
    }

    fn softmax(&self, x: Input, dim: usize, log: bool) -> Result<CudaBuffer, CudaError> {
        Plain(self.0).softmax(x, dim, log)
    }

    fn layer_norm(&self, inputs: [Input; 3], eps: f32) -> Result<CudaBuffer, CudaError> {
        Plain(self.0).layer_norm(inputs, eps)
    }

    fn matmul(&self, a: Input, b: Input, out_shape: &[usize]) -> Result<CudaBuffer, CudaError> {
        Plain(self.0).matmul(a, b, out_shape)
    }

    fn attention(&self, inputs: &[Input], params: AttentionParams) -> Result<CudaBuffer, CudaError> {
        attention::attention(self.0, inputs, params)
    }

    /// The recomputing kernel runs on `f32` operands; half-precision ones take the composed
    /// backward, which widens them.
    fn attention_backward(&self, inputs: &[Input], params: AttentionParams) -> Result<CudaBuffer, CudaError> {
        if inputs[1].tensor().0.dtype() != DType::F32 {
            return composed_attention_backward(self, inputs, params);
        }
        attention_backward::attention_backward(self.0, inputs, params)
    }
}

/// The eager kernel family that [`extern_into`] runs `op` with, if it has an extern kernel: what a
/// compiled program compiles (or reads from the disk cache) and loads when it is built, beside its
/// own kernels, so that its first run compiles nothing.
pub(crate) fn extern_family(op: &Op) -> Option<&'static str> {
    match op {
        Op::Cat { .. } => Some(super::source::CAT),
        Op::ScaledDotProductAttention { .. } => Some(super::source::ATTENTION),
        Op::ScaledDotProductAttentionBackward { .. } => Some(super::source::ATTENTION_BACKWARD),
        _ => None,
    }
}

/// An extern kernel of compiled code (`cat`, `flash_attention`) written straight into its planned
/// buffer `out` through `out_layout`, as Inductor calls ATen's `out=` variants: no buffer of its
/// own, no copy after. Attention writes any layout dense in some order of its dims (its output in
/// q's layout); the others write densely.
pub(crate) fn extern_into(
    device: &Arc<CudaDevice>,
    op: &Op,
    inputs: &[Input],
    out: &CudaBuffer,
    out_layout: &Layout,
) -> Result<(), CudaError> {
    let out_shape = out_layout.shape();
    match op {
        Op::ScaledDotProductAttention { mask, causal, scale } => attention::attention_into(
            device,
            inputs,
            AttentionParams { mask: *mask, causal: *causal, scale: scale.0 },
            out,
            out_layout,
        ),
        _ if !out_layout.is_contiguous() || out_layout.offset() != 0 => Err(CudaError::new(format!(
            "the extern kernel for `{}` writes its output densely, not with strides {:?}",
            op.name(),
            out_layout.strides()
        ))),
        Op::Cat { dim } => cat::cat_into(device, inputs, *dim, out_shape, out),
        // cuBLASLt writes the planned buffer itself (whose dtype is the op's `out_dtype`), adding
        // the bias a compiled graph folded in as a fifth operand.
        Op::ScaledMm { .. } => {
            let operands = [inputs[0], inputs[1], inputs[2], inputs[3]];
            cublaslt::scaled_mm_into(device, operands, inputs.get(4).copied(), out_shape, out)
        }
        Op::ScaledDotProductAttentionBackward { mask, causal, scale } => {
            let params = AttentionParams { mask: *mask, causal: *causal, scale: scale.0 };
            if inputs[1].tensor().0.dtype() != DType::F32 {
                // The recomputing kernel reads `f32`: half-precision operands take the composed
                // backward, written into the planned buffer.
                let gradients = composed_attention_backward(&Tuned(device), inputs, params)?;
                return out.write_prefix(&gradients);
            }
            attention_backward::attention_backward_into(device, inputs, params, out)
        }
        other => Err(CudaError::new(format!("`{}` has no extern kernel on the GPU", other.name()))),
    }
}
