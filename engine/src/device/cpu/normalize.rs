//! Softmax, log-softmax and layer norm as single eager kernels, as ATen has them: one read of each
//! row to find the statistics, one pass to write the result.

use rayon::prelude::*;

use super::{Input, PARALLEL_THRESHOLD, contiguous, split_at_dim};

/// Runs `row(o, i, x, out)` for every line along the normalised dimension, in parallel over
/// `outer` when large. `x` and `out` are the `[size, inner]` block of one outer index.
fn for_each_line(
    x: &[f32],
    shape: &[usize],
    dim: usize,
    line: impl Fn(&[f32], &mut [f32], usize, usize) + Sync,
) -> Vec<f32> {
    let (_, size, inner) = split_at_dim(shape, dim);
    let mut out = vec![0.0; x.len()];
    let block = size * inner;
    if block == 0 {
        return out;
    }
    let per_block = |(o, dst): (usize, &mut [f32])| {
        let src = &x[o * block..(o + 1) * block];
        for i in 0..inner {
            line(src, dst, i, inner);
        }
    };
    if x.len() > PARALLEL_THRESHOLD {
        out.par_chunks_mut(block).enumerate().for_each(per_block);
    } else {
        out.chunks_mut(block).enumerate().for_each(per_block);
    }
    out
}

/// Softmax (or log-softmax) along `dim`, subtracting the maximum first so `exp` cannot overflow.
pub(super) fn softmax(input: Input, dim: usize, log: bool) -> Vec<f32> {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    for_each_line(&x, layout.shape(), dim, |src, dst, i, inner| {
        let line = || src.iter().skip(i).step_by(inner);
        let max = line().fold(f32::NEG_INFINITY, |m, &v| if v > m || v.is_nan() { v } else { m });
        let sum: f32 = line().map(|&v| (v - max).exp()).sum();
        let log_sum = sum.ln();
        for (d, &v) in dst.iter_mut().skip(i).step_by(inner).zip(line()) {
            *d = if log { v - max - log_sum } else { (v - max).exp() / sum };
        }
    })
}

/// Layer norm over the last dimension with an affine `weight` and `bias`.
pub(super) fn layer_norm(input: Input, weight: Input, bias: Input, eps: f32) -> Vec<f32> {
    let (data, layout) = input.tensor();
    let x = contiguous(data, layout);
    let (wd, wl) = weight.tensor();
    let (bd, bl) = bias.tensor();
    let (w, b) = (contiguous(wd, wl), contiguous(bd, bl));
    let last = layout.shape().len() - 1;
    for_each_line(&x, layout.shape(), last, |src, dst, _, _| {
        let n = src.len() as f32;
        let mean = src.iter().sum::<f32>() / n;
        let var = src.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let inv_std = 1.0 / (var + eps).sqrt();
        for (k, d) in dst.iter_mut().enumerate() {
            *d = (src[k] - mean) * inv_std * w[k] + b[k];
        }
    })
}
