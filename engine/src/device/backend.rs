//! What every device's eager kernels provide, in the spirit of candle's `BackendStorage` (and of
//! ATen's per-backend kernel tables): one trait with a method per kernel family, and the
//! op-to-kernel dispatch ([`execute`]) written once for every device. A new device implements
//! [`Backend`]; a new op family adds a method here and one kernel per device.

use crate::layout::Layout;
use crate::op::{AttentionParams, BinaryOp, CustomOp, Op, ReduceOp, UnaryOp};

/// One operand as a kernel sees it: a buffer (a host slice, a device buffer) with the layout of
/// the view being read, or a scalar broadcast everywhere.
pub(crate) enum Input<'a, B: ?Sized> {
    /// A tensor: its whole buffer and the layout of the view being read.
    Tensor {
        /// The buffer the view reads.
        buffer: &'a B,
        /// Which elements of the buffer, in which order.
        layout: &'a Layout,
    },
    /// A scalar broadcast everywhere.
    Scalar(f32),
}

impl<B: ?Sized> Clone for Input<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: ?Sized> Copy for Input<'_, B> {}

impl<'a, B: ?Sized> Input<'a, B> {
    /// The buffer and layout of a tensor operand.
    pub(crate) fn tensor(&self) -> (&'a B, &'a Layout) {
        match *self {
            Input::Tensor { buffer, layout } => (buffer, layout),
            Input::Scalar(_) => unreachable!("shape inference rejects scalars where tensors are required"),
        }
    }
}

/// A device's eager kernels. Each writes a fresh dense buffer of the output shape; shapes were
/// checked by [`Op::infer_shape`] beforehand.
pub(crate) trait Backend {
    /// What an input's buffer is (`[f32]` on the CPU).
    type Buffer: ?Sized;
    /// The buffer a kernel returns.
    type Output;
    /// How a kernel fails (the CPU's cannot).
    type Error;

    /// `op` on every element.
    fn unary(&self, op: UnaryOp, x: Input<Self::Buffer>, out_shape: &[usize]) -> Result<Self::Output, Self::Error>;
    /// `op` on every pair of broadcast elements.
    fn binary(
        &self,
        op: BinaryOp,
        a: Input<Self::Buffer>,
        b: Input<Self::Buffer>,
        out_shape: &[usize],
    ) -> Result<Self::Output, Self::Error>;
    /// `a` where `cond != 0`, else `b`, all broadcast.
    fn where_(&self, inputs: [Input<Self::Buffer>; 3], out_shape: &[usize]) -> Result<Self::Output, Self::Error>;
    /// A dense row-major copy of a view.
    fn copy(&self, x: Input<Self::Buffer>, out_shape: &[usize]) -> Result<Self::Output, Self::Error>;
    /// A custom op's element function over broadcast inputs.
    fn custom(
        &self,
        op: &CustomOp,
        inputs: &[Input<Self::Buffer>],
        out_shape: &[usize],
    ) -> Result<Self::Output, Self::Error>;
    /// A reduction over `dim`.
    fn reduce(&self, kind: ReduceOp, x: Input<Self::Buffer>, dim: usize) -> Result<Self::Output, Self::Error>;
    /// Softmax (or log-softmax) along `dim`.
    fn softmax(&self, x: Input<Self::Buffer>, dim: usize, log: bool) -> Result<Self::Output, Self::Error>;
    /// Layer normalisation over the last dimension, then scale and shift.
    fn layer_norm(&self, inputs: [Input<Self::Buffer>; 3], eps: f32) -> Result<Self::Output, Self::Error>;
    /// Matrix product of the last two dimensions, batch dimensions broadcast.
    fn matmul(
        &self,
        a: Input<Self::Buffer>,
        b: Input<Self::Buffer>,
        out_shape: &[usize],
    ) -> Result<Self::Output, Self::Error>;
    /// `softmax(q @ k^T * scale [+ mask]) @ v` of `inputs = [q, k, v (, mask)]` in one kernel
    /// that never stores the scores.
    fn attention(&self, inputs: &[Input<Self::Buffer>], params: AttentionParams) -> Result<Self::Output, Self::Error>;
    /// The gradients of attention's `q`, `k` and `v`, flattened and joined, from
    /// `inputs = [grad_out, q, k, v, out (, mask)]`: the scores recomputed block by block.
    fn attention_backward(
        &self,
        inputs: &[Input<Self::Buffer>],
        params: AttentionParams,
    ) -> Result<Self::Output, Self::Error>;
    /// `inputs` joined along `dim` into a dense buffer of `out_shape`.
    fn cat(&self, inputs: &[Input<Self::Buffer>], dim: usize, out_shape: &[usize])
    -> Result<Self::Output, Self::Error>;
}

/// Runs one non-view, non-composite op on `backend`'s kernels.
pub(crate) fn execute<D: Backend>(
    backend: &D,
    op: &Op,
    inputs: &[Input<D::Buffer>],
    out_shape: &[usize],
) -> Result<D::Output, D::Error> {
    match op {
        Op::Unary(u) => backend.unary(*u, inputs[0], out_shape),
        Op::Binary(b) => backend.binary(*b, inputs[0], inputs[1], out_shape),
        Op::Where => backend.where_([inputs[0], inputs[1], inputs[2]], out_shape),
        Op::Contiguous => backend.copy(inputs[0], out_shape),
        Op::Cat { dim } => backend.cat(inputs, *dim, out_shape),
        Op::Custom(custom) => backend.custom(custom, inputs, out_shape),
        Op::Reduce { kind, dim, .. } => backend.reduce(*kind, inputs[0], *dim),
        Op::Softmax { dim } => backend.softmax(inputs[0], *dim, false),
        Op::LogSoftmax { dim } => backend.softmax(inputs[0], *dim, true),
        Op::LayerNorm { eps } => backend.layer_norm([inputs[0], inputs[1], inputs[2]], eps.0),
        Op::Matmul => backend.matmul(inputs[0], inputs[1], out_shape),
        Op::ScaledDotProductAttention { mask, causal, scale } => {
            backend.attention(inputs, AttentionParams { mask: *mask, causal: *causal, scale: scale.0 })
        }
        Op::ScaledDotProductAttentionBackward { mask, causal, scale } => {
            backend.attention_backward(inputs, AttentionParams { mask: *mask, causal: *causal, scale: scale.0 })
        }
        Op::Reshape { .. }
        | Op::Permute { .. }
        | Op::Expand { .. }
        | Op::Slice { .. }
        | Op::Linear
        | Op::Cond { .. } => {
            unreachable!("views, linear and cond are handled before device kernels")
        }
    }
}
