//! The plain CPU kernels: each op family as the loop a reader would write first, walking every
//! line of the input once with one accumulator and libm's functions, attention composed of two
//! products and a softmax. What an eager op computes can be read here without the fast paths
//! (`tuned/`); the tuned kernels are tested against these
//! (`tests/eager_reference/kernel_providers.rs`), and
//! [`with_kernels`](crate::device::with_kernels) runs a program on them.

use std::convert::Infallible;

use super::pointwise::input_dtype;
use super::{AsWritten, Cpu, HostBuffer, Input, allocator, contiguous, in_f32, max_nan, pointwise, split_at_dim};
use crate::device::provider::{KernelProvider, composed_attention, composed_attention_backward};
use crate::dtype::DType;
use crate::layout::{Layout, numel};
use crate::op::{AttentionParams, BinaryOp, ReduceOp, UnaryOp};
use crate::parallel;

/// The CPU's plain kernels.
pub(crate) struct Plain;

impl KernelProvider for Plain {
    type Device = Cpu<AsWritten>;

    fn device(&self) -> &Cpu<AsWritten> {
        &Cpu::NEW
    }

    fn unary(&self, op: UnaryOp, x: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::unary::<AsWritten>(op, x, out_shape))
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: Input,
        b: Input,
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::binary::<AsWritten>(op, a, b, out_shape, dtype))
    }

    fn where_(&self, [cond, a, b]: [Input; 3], out_shape: &[usize], dtype: DType) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::where_::<AsWritten>(cond, a, b, out_shape, dtype))
    }

    // The row kernels below compute on `f32` buffers: half-precision inputs are widened first
    // and the result rounded (`in_f32`); the tuned kernels convert a row at a time instead.

    fn reduce(&self, kind: ReduceOp, x: Input, dim: usize) -> Result<HostBuffer, Infallible> {
        Ok(in_f32::<AsWritten>(&[x], input_dtype(x), |i| reduce(kind, i[0], dim)))
    }

    fn softmax(&self, x: Input, dim: usize, log: bool) -> Result<HostBuffer, Infallible> {
        Ok(in_f32::<AsWritten>(&[x], input_dtype(x), |i| softmax(i[0], dim, log)))
    }

    fn layer_norm(&self, inputs: [Input; 3], eps: f32) -> Result<HostBuffer, Infallible> {
        Ok(in_f32::<AsWritten>(&inputs, input_dtype(inputs[0]), |i| layer_norm(i[0], i[1], i[2], eps)))
    }

    fn matmul(&self, a: Input, b: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(in_f32::<AsWritten>(&[a, b], input_dtype(a), |i| matmul(i[0], i[1], out_shape)))
    }

    fn attention(&self, inputs: &[Input], params: AttentionParams) -> Result<HostBuffer, Infallible> {
        composed_attention(self, inputs, params)
    }

    fn attention_backward(&self, inputs: &[Input], params: AttentionParams) -> Result<HostBuffer, Infallible> {
        composed_attention_backward(self, inputs, params)
    }
}

/// The positions of the line `(o, i)` along the middle dim of a dense `[outer, size, inner]`
/// buffer: the elements one reduction, softmax or mean reads.
fn line(o: usize, i: usize, size: usize, inner: usize) -> impl Iterator<Item = usize> {
    (0..size).map(move |s| (o * size + s) * inner + i)
}

/// `x` reduced over `dim`, laid out as the keepdim shape.
fn reduce(kind: ReduceOp, input: Input, dim: usize) -> HostBuffer {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    let (outer, size, inner) = split_at_dim(layout.shape(), dim);
    let mut out = allocator::uninit(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let values = line(o, i, size, inner).map(|p| x[p]);
            out[o * inner + i] = match kind {
                ReduceOp::Sum => values.sum(),
                ReduceOp::Mean => values.sum::<f32>() / size as f32,
                ReduceOp::Max => values.fold(f32::NEG_INFINITY, max_nan),
            };
        }
    }
    out
}

/// Softmax (or log-softmax) along `dim`: each line's maximum, then `sum(exp(v - max))`, then
/// every value of the line.
fn softmax(input: Input, dim: usize, log: bool) -> HostBuffer {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    let (outer, size, inner) = split_at_dim(layout.shape(), dim);
    let mut out = allocator::uninit(x.len());
    for o in 0..outer {
        for i in 0..inner {
            let max = line(o, i, size, inner).map(|p| x[p]).fold(f32::NEG_INFINITY, max_nan);
            let sum: f32 = line(o, i, size, inner).map(|p| (x[p] - max).exp()).sum();
            for p in line(o, i, size, inner) {
                out[p] = if log { x[p] - max - sum.ln() } else { (x[p] - max).exp() / sum };
            }
        }
    }
    out
}

/// Layer norm over the last dimension: each row's mean and variance, then
/// `(v - mean) / sqrt(var + eps) * weight + bias`.
fn layer_norm(input: Input, weight: Input, bias: Input, eps: f32) -> HostBuffer {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    let ((wd, wl), (bd, bl)) = (weight.tensor(), bias.tensor());
    let (w, b) = (contiguous(wd, wl), contiguous(bd, bl));
    let row = layout.shape().last().copied().unwrap_or(1);
    let mut out = allocator::uninit(x.len());
    if row == 0 {
        return out;
    }
    for (src, dst) in x.chunks(row).zip(out.chunks_mut(row)) {
        let n = row as f32;
        let mean = src.iter().sum::<f32>() / n;
        let var = src.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let inv_std = 1.0 / (var + eps).sqrt();
        for k in 0..row {
            dst[k] = (src[k] - mean) * inv_std * w[k] + b[k];
        }
    }
    out
}

/// `a @ b` over broadcast batch dimensions: every output element one dot product, read through
/// the operands' strides; rows are spread over the pool.
fn matmul(a: Input, b: Input, out_shape: &[usize]) -> HostBuffer {
    let ((ad, al), (bd, bl)) = (a.tensor(), b.tensor());
    let rank = out_shape.len();
    let (m, n, k) = (out_shape[rank - 2], out_shape[rank - 1], al.shape()[al.shape().len() - 1]);
    let batch = &out_shape[..rank - 2];
    let a_full = al.expand(&[batch, &[m, k]].concat());
    let b_full = bl.expand(&[batch, &[k, n]].concat());
    let batch_offsets =
        |l: &Layout| Layout::new(batch.to_vec(), l.strides()[..batch.len()].to_vec(), l.offset()).offsets().collect();
    let (a_offsets, b_offsets): (Vec<usize>, Vec<usize>) = (batch_offsets(&a_full), batch_offsets(&b_full));
    let (sa, sb) = (&a_full.strides()[batch.len()..], &b_full.strides()[batch.len()..]);
    let mut out = allocator::uninit(numel(out_shape));
    if out.is_empty() {
        return out;
    }
    parallel::for_each_chunk_mut(&mut out, n, |row, c| {
        let (ao, bo, i) = (a_offsets[row / m], b_offsets[row / m], row % m);
        for (j, c) in c.iter_mut().enumerate() {
            *c = (0..k).map(|p| ad[ao + i * sa[0] + p * sa[1]] * bd[bo + p * sb[0] + j * sb[1]]).sum();
        }
    });
    out
}
