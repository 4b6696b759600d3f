//! The kernel-provider seam: what every device's eager kernels provide, in the spirit of candle's
//! `BackendStorage` (and of ATen's per-backend kernel tables): one trait with a method per kernel
//! family, and the op-to-kernel dispatch ([`execute`]) written once for every device.
//!
//! Each device has two providers: its **plain** kernels, each op family as the loop a reader
//! would write first, and its **tuned** kernels, the fast paths (tiled GEMMs, vector math, flash
//! attention) that make eager a fair baseline. Both implement [`KernelProvider`]; the engine runs
//! the tuned ones unless [`with_kernels`] asks for the plain ones. A new device implements the
//! trait once (its plain kernels) and may add a tuned provider later; a new op family adds a
//! method here and a kernel per provider.

use std::cell::Cell;

use crate::dtype::DType;
use crate::layout::Layout;
use crate::op::{AttentionMask, AttentionParams, BinaryOp, CustomOp, Op, ReduceOp, UnaryOp};

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

/// What a device has once, whichever provider runs its kernels: its buffers, the kernels that
/// only move memory (a dense copy or conversion, a join), custom ops' compiled functions, FP8
/// matrix products, and a buffer made from host values.
///
/// Buffers carry their dtype (`f32`, `f16`, `bf16`; FP8 reaches only `copy`, `cat` and
/// `scaled_mm`). Every kernel computes in `f32`, widening half-precision elements as it loads
/// them and rounding as it stores; where the output's dtype is not the first input's
/// (promotion, a conversion), the kernel is told it.
pub(crate) trait DeviceKernels {
    /// What an input's buffer is (a host buffer on the CPU).
    type Buffer: ?Sized;
    /// The buffer a kernel returns.
    type Output;
    /// How a kernel fails (the CPU's cannot).
    type Error;

    /// A dense row-major copy of a view, converted to `dtype` (`contiguous`, `to_dtype`).
    fn copy(&self, x: Input<Self::Buffer>, out_shape: &[usize], dtype: DType) -> Result<Self::Output, Self::Error>;
    /// `inputs` joined along `dim` into a dense buffer of `out_shape` (every input already has
    /// the output's dtype).
    fn cat(&self, inputs: &[Input<Self::Buffer>], dim: usize, out_shape: &[usize])
    -> Result<Self::Output, Self::Error>;
    /// A custom op's element function over broadcast inputs, stored as `dtype`.
    fn custom(
        &self,
        op: &CustomOp,
        inputs: &[Input<Self::Buffer>],
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<Self::Output, Self::Error>;
    /// `(a * scale_a) @ (b * scale_b)` of two 8-bit-float matrices with per-tensor `f32` scales
    /// (one-element tensors), accumulated in `f32` and stored as `dtype`: `torch._scaled_mm`.
    /// Devices without FP8 matrix units refuse it.
    fn scaled_mm(
        &self,
        inputs: [Input<Self::Buffer>; 4],
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<Self::Output, Self::Error>;
    /// An `f32` buffer holding `values` (how a composed kernel makes a constant operand).
    fn upload(&self, values: &[f32]) -> Result<Self::Output, Self::Error>;
    /// A returned buffer as the input of another kernel.
    fn as_input(output: &Self::Output) -> &Self::Buffer;
    /// The dtype of an input's buffer.
    fn dtype(buffer: &Self::Buffer) -> DType;
}

/// The buffer a provider's kernels read.
pub(crate) type Buffer<P> = <<P as KernelProvider>::Device as DeviceKernels>::Buffer;
/// The buffer a provider's kernels return.
pub(crate) type Output<P> = <<P as KernelProvider>::Device as DeviceKernels>::Output;
/// How a provider's kernels fail.
pub(crate) type Failure<P> = <<P as KernelProvider>::Device as DeviceKernels>::Error;

/// A device's eager kernels for the op families a fast path may replace, plain or tuned. Each
/// writes a fresh dense buffer of the output shape; shapes and dtypes were checked by
/// [`Op::infer_shape`] and [`Op::infer_dtype`] beforehand.
pub(crate) trait KernelProvider {
    /// The device the kernels run on.
    type Device: DeviceKernels;

    /// The device, for what it has once.
    fn device(&self) -> &Self::Device;
    /// `op` on every element (the output has the input's dtype).
    fn unary(&self, op: UnaryOp, x: Input<Buffer<Self>>, out_shape: &[usize]) -> Result<Output<Self>, Failure<Self>>;
    /// `op` on every pair of broadcast elements, stored as `dtype` (the operands' promoted dtype).
    fn binary(
        &self,
        op: BinaryOp,
        a: Input<Buffer<Self>>,
        b: Input<Buffer<Self>>,
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<Output<Self>, Failure<Self>>;
    /// `a` where `cond != 0`, else `b`, all broadcast, stored as `dtype`.
    fn where_(
        &self,
        inputs: [Input<Buffer<Self>>; 3],
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<Output<Self>, Failure<Self>>;
    /// A reduction over `dim` (accumulated in `f32`, stored in the input's dtype).
    fn reduce(&self, kind: ReduceOp, x: Input<Buffer<Self>>, dim: usize) -> Result<Output<Self>, Failure<Self>>;
    /// Softmax (or log-softmax) along `dim`.
    fn softmax(&self, x: Input<Buffer<Self>>, dim: usize, log: bool) -> Result<Output<Self>, Failure<Self>>;
    /// Layer normalisation over the last dimension, then scale and shift.
    fn layer_norm(&self, inputs: [Input<Buffer<Self>>; 3], eps: f32) -> Result<Output<Self>, Failure<Self>>;
    /// Matrix product of the last two dimensions, batch dimensions broadcast.
    fn matmul(
        &self,
        a: Input<Buffer<Self>>,
        b: Input<Buffer<Self>>,
        out_shape: &[usize],
    ) -> Result<Output<Self>, Failure<Self>>;
    /// `softmax(q @ k^T * scale [+ mask]) @ v` of `inputs = [q, k, v (, mask)]`. Plain providers
    /// compose it from their own kernels ([`composed_attention`]); tuned ones run one kernel that
    /// never stores the scores.
    fn attention(&self, inputs: &[Input<Buffer<Self>>], params: AttentionParams)
    -> Result<Output<Self>, Failure<Self>>;
    /// The gradients of attention's `q`, `k` and `v`, flattened and joined, from
    /// `inputs = [grad_out, q, k, v, out (, mask)]`. Plain providers compose them from their own
    /// kernels ([`composed_attention_backward`]); tuned ones recompute the scores block by block.
    fn attention_backward(
        &self,
        inputs: &[Input<Buffer<Self>>],
        params: AttentionParams,
    ) -> Result<Output<Self>, Failure<Self>>;
}

/// Runs one non-view, non-composite op on `provider`'s kernels, its result of dtype `dtype`
/// (from [`Op::infer_dtype`]).
pub(crate) fn execute<P: KernelProvider>(
    provider: &P,
    op: &Op,
    inputs: &[Input<Buffer<P>>],
    out_shape: &[usize],
    dtype: DType,
) -> Result<Output<P>, Failure<P>> {
    match op {
        Op::Unary(u) => provider.unary(*u, inputs[0], out_shape),
        Op::Binary(b) => provider.binary(*b, inputs[0], inputs[1], out_shape, dtype),
        Op::Where => provider.where_([inputs[0], inputs[1], inputs[2]], out_shape, dtype),
        Op::Contiguous | Op::ToDtype { .. } => provider.device().copy(inputs[0], out_shape, dtype),
        Op::Cat { dim } => provider.device().cat(inputs, *dim, out_shape),
        Op::ScaledMm { .. } => {
            provider.device().scaled_mm([inputs[0], inputs[1], inputs[2], inputs[3]], out_shape, dtype)
        }
        Op::Custom(custom) => provider.device().custom(custom, inputs, out_shape, dtype),
        Op::Reduce { kind, dim, .. } => provider.reduce(*kind, inputs[0], *dim),
        Op::Softmax { dim } => provider.softmax(inputs[0], *dim, false),
        Op::LogSoftmax { dim } => provider.softmax(inputs[0], *dim, true),
        Op::LayerNorm { eps } => provider.layer_norm([inputs[0], inputs[1], inputs[2]], eps.0),
        Op::Matmul => provider.matmul(inputs[0], inputs[1], out_shape),
        Op::ScaledDotProductAttention { mask, causal, scale } => {
            provider.attention(inputs, AttentionParams { mask: *mask, causal: *causal, scale: scale.0 })
        }
        Op::ScaledDotProductAttentionBackward { mask, causal, scale } => {
            provider.attention_backward(inputs, AttentionParams { mask: *mask, causal: *causal, scale: scale.0 })
        }
        Op::Reshape { .. }
        | Op::Permute { .. }
        | Op::Expand { .. }
        | Op::Slice { .. }
        | Op::Linear
        | Op::Cond { .. }
        | Op::CopyInto => {
            unreachable!("views, linear, cond and copy_ are handled before device kernels")
        }
    }
}

/// Attention composed of `provider`'s own kernels, as PyTorch's math backend
/// (`_scaled_dot_product_attention_math`) computes it: the probabilities (see
/// [`composed_probabilities`]) times `v`. It stores the scores, which the tuned kernels never do;
/// a fully masked row is NaN, as in PyTorch. Inputs of a half-precision dtype are widened to
/// `f32` first, and the result rounded to their dtype, so that this is the reference the tuned
/// kernels are tested against in every dtype.
pub(crate) fn composed_attention<P: KernelProvider>(
    provider: &P,
    inputs: &[Input<Buffer<P>>],
    params: AttentionParams,
) -> Result<Output<P>, Failure<P>> {
    let device = provider.device();
    let as_input = <P::Device as DeviceKernels>::as_input;
    let dtype = <P::Device as DeviceKernels>::dtype(inputs[0].tensor().0);
    if dtype != DType::F32 {
        let widened = widened(provider, inputs)?;
        let inputs: Vec<Input<Buffer<P>>> =
            widened.iter().map(|(buffer, layout)| Input::Tensor { buffer: as_input(buffer), layout }).collect();
        let out = composed_attention(provider, &inputs, params)?;
        let shape = attention_output_shape(&inputs);
        let dense = Layout::contiguous(&shape);
        return device.copy(Input::Tensor { buffer: as_input(&out), layout: &dense }, &shape, dtype);
    }
    let (ql, v) = (inputs[0].tensor().1, inputs[2]);
    let rank = ql.shape().len();
    let (probabilities, dense) = composed_probabilities(provider, inputs, params)?;
    let out_shape = [&ql.shape()[..rank - 1], &v.tensor().1.shape()[rank - 1..]].concat();
    provider.matmul(Input::Tensor { buffer: as_input(&probabilities), layout: &dense }, v, &out_shape)
}

/// The `[..., L, S]` attention probabilities of `inputs = [q, k, v (, mask)]` from `provider`'s
/// kernels, with their dense layout: the scores `q @ k^T`, scaled, masked (`-inf` where a boolean
/// mask is 0 or a key lies past the causal diagonal, or the additive mask added), and their
/// softmax over the keys.
fn composed_probabilities<P: KernelProvider>(
    provider: &P,
    inputs: &[Input<Buffer<P>>],
    params: AttentionParams,
) -> Result<(Output<P>, Layout), Failure<P>> {
    let as_input = <P::Device as DeviceKernels>::as_input;
    let ((_, ql), (k, kl)) = (inputs[0].tensor(), inputs[1].tensor());
    let rank = ql.shape().len();
    let k_t = kl.permute(&last_two_swapped(rank));
    let (q_len, kv_len) = (ql.shape()[rank - 2], kl.shape()[rank - 2]);
    let scores_shape = [&ql.shape()[..rank - 1], &[kv_len][..]].concat();
    let dense = Layout::contiguous(&scores_shape);
    let f32 = DType::F32;
    let scores = provider.matmul(inputs[0], Input::Tensor { buffer: k, layout: &k_t }, &scores_shape)?;
    let scores = Input::Tensor { buffer: as_input(&scores), layout: &dense };
    let scaled = provider.binary(BinaryOp::Mul, scores, Input::Scalar(params.scale), &scores_shape, f32)?;
    let scaled = Input::Tensor { buffer: as_input(&scaled), layout: &dense };
    let minus_inf = Input::Scalar(f32::NEG_INFINITY);
    let causal_layout = Layout::contiguous(&[q_len, kv_len]);
    let masked = match (params.mask, inputs.get(3)) {
        (AttentionMask::Additive, Some(&mask)) => {
            Some(provider.binary(BinaryOp::Add, scaled, mask, &scores_shape, f32)?)
        }
        (AttentionMask::Boolean, Some(&mask)) => {
            Some(provider.where_([mask, scaled, minus_inf], &scores_shape, f32)?)
        }
        _ if params.causal => {
            let values: Vec<f32> =
                (0..q_len).flat_map(|i| (0..kv_len).map(move |j| if j <= i { 1.0 } else { 0.0 })).collect();
            let below_diagonal = provider.device().upload(&values)?;
            let keep = Input::Tensor { buffer: as_input(&below_diagonal), layout: &causal_layout };
            Some(provider.where_([keep, scaled, minus_inf], &scores_shape, f32)?)
        }
        _ => None,
    };
    let logits = match &masked {
        Some(masked) => Input::Tensor { buffer: as_input(masked), layout: &dense },
        None => scaled,
    };
    Ok((provider.softmax(logits, rank - 1, false)?, dense))
}

/// `0..rank` with the last two dims swapped: the permutation of a batch of matrices' transpose.
fn last_two_swapped(rank: usize) -> Vec<usize> {
    let mut dims: Vec<usize> = (0..rank).collect();
    dims.swap(rank - 2, rank - 1);
    dims
}

/// Attention's backward composed of `provider`'s kernels, as autograd differentiates the math
/// backend, for `inputs = [grad_out, q, k, v, out (, mask)]`: with `P` the probabilities and `g`
/// the output's gradient, `dv = P^T g`, `dS = P * (g v^T - rowsum(g v^T * P))`,
/// `dq = scale * dS k` and `dk = scale * dS^T q`, flattened and joined. It stores `[L, S]`
/// matrices, which the tuned kernels never do.
pub(crate) fn composed_attention_backward<P: KernelProvider>(
    provider: &P,
    inputs: &[Input<Buffer<P>>],
    params: AttentionParams,
) -> Result<Output<P>, Failure<P>> {
    let as_input = <P::Device as DeviceKernels>::as_input;
    let dtype = <P::Device as DeviceKernels>::dtype(inputs[1].tensor().0);
    if dtype != DType::F32 {
        let widened = widened(provider, inputs)?;
        let inputs: Vec<Input<Buffer<P>>> =
            widened.iter().map(|(buffer, layout)| Input::Tensor { buffer: as_input(buffer), layout }).collect();
        let out = composed_attention_backward(provider, &inputs, params)?;
        let total = inputs[1..4].iter().map(|input| input.tensor().1.numel()).sum();
        let dense = Layout::contiguous(&[total]);
        return provider.device().copy(Input::Tensor { buffer: as_input(&out), layout: &dense }, &[total], dtype);
    }
    let (g, q, k, v) = (inputs[0], inputs[1], inputs[2], inputs[3]);
    let forward: Vec<Input<Buffer<P>>> = [q, k, v].into_iter().chain(inputs.get(5).copied()).collect();
    let (probabilities, dense) = composed_probabilities(provider, &forward, params)?;
    let (ql, kl, vl) = (q.tensor().1, k.tensor().1, v.tensor().1);
    let rank = ql.shape().len();
    let swap = last_two_swapped(rank);
    let scores_shape = dense.shape().to_vec();
    let transposed = dense.permute(&swap);
    let p = Input::Tensor { buffer: as_input(&probabilities), layout: &dense };
    let p_t = Input::Tensor { buffer: as_input(&probabilities), layout: &transposed };
    let dv = provider.matmul(p_t, g, vl.shape())?;
    let (v_buffer, v_layout) = v.tensor();
    let v_t = v_layout.permute(&swap);
    let dp = provider.matmul(g, Input::Tensor { buffer: v_buffer, layout: &v_t }, &scores_shape)?;
    let dp = Input::Tensor { buffer: as_input(&dp), layout: &dense };
    let weighted = provider.binary(BinaryOp::Mul, dp, p, &scores_shape, DType::F32)?;
    let row_sums =
        provider.reduce(ReduceOp::Sum, Input::Tensor { buffer: as_input(&weighted), layout: &dense }, rank - 1)?;
    let rows_shape = [&scores_shape[..rank - 1], &[1][..]].concat();
    let rows = Layout::contiguous(&rows_shape).expand(&scores_shape);
    let row_sums = Input::Tensor { buffer: as_input(&row_sums), layout: &rows };
    let centered = provider.binary(BinaryOp::Sub, dp, row_sums, &scores_shape, DType::F32)?;
    let ds = provider.binary(
        BinaryOp::Mul,
        p,
        Input::Tensor { buffer: as_input(&centered), layout: &dense },
        &scores_shape,
        DType::F32,
    )?;
    let ds = Input::Tensor { buffer: as_input(&ds), layout: &dense };
    let ds = provider.binary(BinaryOp::Mul, ds, Input::Scalar(params.scale), &scores_shape, DType::F32)?;
    let dq = provider.matmul(Input::Tensor { buffer: as_input(&ds), layout: &dense }, k, ql.shape())?;
    let dk = provider.matmul(Input::Tensor { buffer: as_input(&ds), layout: &transposed }, q, kl.shape())?;
    let flat = |shape: &[usize]| Layout::contiguous(&[shape.iter().product()]);
    let layouts = [flat(ql.shape()), flat(kl.shape()), flat(vl.shape())];
    let total = layouts.iter().map(Layout::numel).sum();
    let joined: Vec<Input<Buffer<P>>> = [&dq, &dk, &dv]
        .into_iter()
        .zip(&layouts)
        .map(|(output, layout)| Input::Tensor { buffer: as_input(output), layout })
        .collect();
    provider.device().cat(&joined, 0, &[total])
}

/// Every tensor of `inputs` as a dense `f32` copy, with its layout: how the composed kernels run
/// half-precision operands in `f32`.
fn widened<P: KernelProvider>(
    provider: &P,
    inputs: &[Input<Buffer<P>>],
) -> Result<Vec<(Output<P>, Layout)>, Failure<P>> {
    inputs
        .iter()
        .map(|input| {
            let (_, layout) = input.tensor();
            Ok((provider.device().copy(*input, layout.shape(), DType::F32)?, Layout::contiguous(layout.shape())))
        })
        .collect()
}

/// The shape of attention's output: the query's, with the value's last size.
fn attention_output_shape<B: ?Sized>(inputs: &[Input<B>]) -> Vec<usize> {
    let (q, v) = (inputs[0].tensor().1.shape(), inputs[2].tensor().1.shape());
    [&q[..q.len() - 1], &v[v.len() - 1..]].concat()
}

/// Which eager kernels run: the plain ones a reader follows, or the tuned fast paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kernels {
    /// Every op family as the loop a reader would write first: libm's functions, one accumulator,
    /// attention composed of a product, a softmax and a product.
    Plain,
    /// The fast paths (the default): vector math and lanes, tiled and packed GEMMs, flash
    /// attention; on a GPU, the flash-attention kernel.
    #[default]
    Tuned,
}

thread_local! {
    static KERNELS: Cell<Kernels> = const { Cell::new(Kernels::Tuned) };
}

/// The eager kernels ops on this thread run on now.
pub fn kernels() -> Kernels {
    KERNELS.get()
}

/// Runs `f` with this thread's eager ops on `kernels`, then restores the choice (also when `f`
/// panics): how a test compares the plain kernels with the tuned ones, and how a reader runs a
/// model on the kernels they can read.
///
/// ```
/// use engine::device::{Kernels, with_kernels};
/// let x = engine::Tensor::randn(&[4, 8], 0);
/// let plain = with_kernels(Kernels::Plain, || x.softmax(-1))?;
/// let tuned = x.softmax(-1)?;
/// for (p, t) in plain.to_vec()?.iter().zip(tuned.to_vec()?) {
///     assert!((p - t).abs() < 1e-6);
/// }
/// # Ok::<(), engine::Error>(())
/// ```
pub fn with_kernels<R>(kernels: Kernels, f: impl FnOnce() -> R) -> R {
    struct Restore(Kernels);
    impl Drop for Restore {
        fn drop(&mut self) {
            KERNELS.set(self.0);
        }
    }
    let _restore = Restore(KERNELS.replace(kernels));
    f()
}
