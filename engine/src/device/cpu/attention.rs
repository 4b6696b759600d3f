//! Scaled dot-product attention on the CPU, blocked the way the CUDA kernel is (and as
//! PyTorch's CPU flash-attention kernel is): a block of queries visits the keys a tile at a time,
//! keeping for each query a running maximum, a running sum of exponentials and a running output
//! (the online softmax). The `[L, S]` score matrix is never stored; each task holds one
//! `[QUERY_BLOCK, KEY_TILE]` tile of scores.
//!
//! The loops run in vector lanes, compiled for AVX2 and FMA where the CPU has them. A block's
//! scores against a key tile are a small `q @ k^T`, whose operands both run along `head_dim`: the
//! layout the engine's tiles of dot products are made for (`dot_tiles.rs`, AVX-512 where the CPU
//! has it). Exponentials use the engine's vector `exp` instead of libm's, which no compiler
//! vectorizes.

use super::dot_tiles;
use super::simd::vectorized;
use super::vecmath::exp;
use super::{Input, contiguous};
use crate::layout::{Layout, numel};
use crate::op::{AttentionMask, AttentionParams, AttentionSizes};
use crate::parallel;

/// Queries handled together: each key tile is read once for all of them.
const QUERY_BLOCK: usize = 16;
/// Keys scored at a time (the width of the score tile).
const KEY_TILE: usize = 64;

/// How a mask element is found: per batch entry an offset, then row and column strides (0 along
/// broadcast dims), so a broadcast mask is read in place.
struct MaskView<'a> {
    data: &'a [f32],
    kind: AttentionMask,
    batch_offsets: Vec<usize>,
    row_stride: usize,
    col_stride: usize,
}

impl MaskView<'_> {
    /// The mask applied to score `s` of query `i` and key `j` in batch entry `b`.
    fn apply(&self, b: usize, i: usize, j: usize, s: f32) -> f32 {
        let m = self.data[self.batch_offsets[b] + i * self.row_stride + j * self.col_stride];
        match self.kind {
            AttentionMask::Boolean if m == 0.0 => f32::NEG_INFINITY,
            AttentionMask::Additive => s + m,
            _ => s,
        }
    }
}

/// `softmax(q @ k^T * scale [+ mask]) @ v` for `inputs = [q, k, v (, mask)]`.
pub(super) fn attention(inputs: &[Input], AttentionParams { mask, causal, scale }: AttentionParams) -> Vec<f32> {
    let (q, k, v) = (inputs[0].tensor(), inputs[1].tensor(), inputs[2].tensor());
    let sizes = AttentionSizes::of(q.1.shape(), k.1.shape(), v.1.shape());
    let mut out = vec![0.0f32; sizes.batch * sizes.q_len * sizes.value_dim];
    if out.is_empty() {
        return out;
    }
    let (qd, kd, vd) = (contiguous(q.0, q.1), contiguous(k.0, k.1), contiguous(v.0, v.1));
    let mask = inputs.get(3).map(|m| {
        let (data, layout) = m.tensor();
        let rank = q.1.shape().len();
        let scores = [&q.1.shape()[..rank - 1], &[sizes.kv_len]].concat();
        let full = layout.expand(&scores);
        let batch = Layout::new(scores[..rank - 2].to_vec(), full.strides()[..rank - 2].to_vec(), full.offset());
        MaskView {
            data,
            kind: mask,
            batch_offsets: batch.offsets().collect(),
            row_stride: full.strides()[rank - 2],
            col_stride: full.strides()[rank - 1],
        }
    });
    let AttentionSizes { q_len, kv_len, head_dim, value_dim, .. } = sizes;
    let block = QUERY_BLOCK * value_dim;
    let blocks_per_batch = q_len.div_ceil(QUERY_BLOCK);
    let task = |(index, out_block): (usize, &mut [f32])| {
        let (b, first) = (index / blocks_per_batch, (index % blocks_per_batch) * QUERY_BLOCK);
        let rows = out_block.len() / value_dim.max(1);
        let q_rows = &qd[(b * q_len + first) * head_dim..][..rows * head_dim];
        let keys = &kd[b * kv_len * head_dim..][..kv_len * head_dim];
        let values = &vd[b * kv_len * value_dim..][..kv_len * value_dim];
        let score = |i: usize, j: usize, s: f32| {
            let s = s * scale;
            let s = if causal && j > first + i { f32::NEG_INFINITY } else { s };
            mask.as_ref().map_or(s, |m| m.apply(b, first + i, j, s))
        };
        vectorized(
            #[inline(always)]
            || query_block(q_rows, keys, values, &sizes, score, out_block),
        );
    };
    // Chunks per batch entry end at its last query, so a block never spans two entries.
    let chunks = out.chunks_mut(value_dim.max(1) * q_len).flat_map(|entry| entry.chunks_mut(block.max(1)));
    let chunks: Vec<std::sync::Mutex<&mut [f32]>> = chunks.map(std::sync::Mutex::new).collect();
    let run = |index: usize| {
        let mut chunk = chunks[index].lock().unwrap_or_else(|e| e.into_inner());
        task((index, &mut chunk))
    };
    if numel(&[sizes.batch, q_len, kv_len]) * head_dim > super::PARALLEL_THRESHOLD {
        parallel::parallel_for(chunks.len(), run);
    } else {
        (0..chunks.len()).for_each(run);
    }
    out
}

/// One block of queries against every key, a tile of keys at a time, with the online softmax:
/// when a tile raises a row's maximum from `m` to `m'`, the sums and outputs gathered so far are
/// rescaled by `exp(m - m')`, so every exponential is taken against the final maximum in the end.
/// `score(i, j, dot)` turns the dot product of query `i` and key `j` into the masked, scaled score.
#[inline(always)]
fn query_block(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    sizes: &AttentionSizes,
    score: impl Fn(usize, usize, f32) -> f32,
    out: &mut [f32],
) {
    let AttentionSizes { kv_len, head_dim, value_dim, .. } = *sizes;
    let rows = out.len() / value_dim.max(1);
    let mut max = [f32::NEG_INFINITY; QUERY_BLOCK];
    let mut sum = [0.0f32; QUERY_BLOCK];
    out.fill(0.0);
    let mut block_scores = [0.0f32; QUERY_BLOCK * KEY_TILE];
    let mut probs = [0.0f32; KEY_TILE];
    for start in (0..kv_len).step_by(KEY_TILE) {
        let width = KEY_TILE.min(kv_len - start);
        let block_scores = &mut block_scores[..rows * width];
        score_tile(&q[..rows * head_dim], &k[start * head_dim..][..width * head_dim], head_dim, block_scores);
        for i in 0..rows {
            let scores = &mut block_scores[i * width..][..width];
            for (jj, s) in scores.iter_mut().enumerate() {
                *s = score(i, start + jj, *s);
            }
            let tile_max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
            let new_max = max[i].max(tile_max);
            if new_max == f32::NEG_INFINITY {
                continue; // every key so far is masked: nothing to add yet
            }
            let rescale = exp(max[i] - new_max);
            let row = &mut out[i * value_dim..][..value_dim];
            row.iter_mut().for_each(|o| *o *= rescale);
            let probs = &mut probs[..width];
            probs.iter_mut().zip(scores.iter()).for_each(|(p, &s)| *p = exp(s - new_max));
            sum[i] = sum[i] * rescale + probs.iter().sum::<f32>();
            for (jj, &p) in probs.iter().enumerate() {
                let value = &v[(start + jj) * value_dim..][..value_dim];
                row.iter_mut().zip(value).for_each(|(o, &x)| *o += p * x);
            }
            max[i] = new_max;
        }
    }
    for i in 0..rows {
        // A row with every key masked has sum 0 and output 0: 0/0 is NaN, as PyTorch's math path.
        out[i * value_dim..][..value_dim].iter_mut().for_each(|o| *o /= sum[i]);
    }
}

/// `q @ keys^T` for a block of queries and a tile of keys, both `[_, head_dim]` row-major, into
/// the dense `[queries, keys]` tile `out`: the layout of a linear layer, so the engine's tiles of
/// dot products run it where the CPU has them (`dot_tiles.rs`), one plain dot product per score
/// elsewhere.
#[inline(always)]
fn score_tile(q: &[f32], keys: &[f32], head_dim: usize, out: &mut [f32]) {
    if head_dim == 0 {
        return out.fill(0.0);
    }
    let width = keys.len() / head_dim;
    if let Some(kernel) = dot_tiles::Kernel::detect() {
        let rows = |data| dot_tiles::Rows { data, stride: head_dim };
        return dot_tiles::product(kernel, rows(q), rows(keys), head_dim, out, width, false);
    }
    plain_scores(q, keys, head_dim, out);
}

/// [`score_tile`] where the tiles do not run: one dot product per score.
fn plain_scores(q: &[f32], keys: &[f32], head_dim: usize, out: &mut [f32]) {
    let width = keys.len() / head_dim;
    for (scores, query) in out.chunks_exact_mut(width).zip(q.chunks_exact(head_dim)) {
        for (s, key) in scores.iter_mut().zip(keys.chunks_exact(head_dim)) {
            *s = query.iter().zip(key).map(|(a, b)| a * b).sum();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{plain_scores, score_tile};

    #[test]
    fn the_plain_scores_equal_the_tiled_ones() {
        // A ragged tile: 5 queries, 37 keys, head_dim 23 (not a multiple of any vector width).
        let (rows, width, head_dim) = (5, 37, 23);
        let value = |i: usize| ((i * 7919 % 211) as f32 - 105.0) / 50.0;
        let q: Vec<f32> = (0..rows * head_dim).map(value).collect();
        let keys: Vec<f32> = (0..width * head_dim).map(|i| value(i + 13)).collect();
        let (mut tiled, mut plain) = (vec![0.0; rows * width], vec![0.0; rows * width]);
        score_tile(&q, &keys, head_dim, &mut tiled);
        plain_scores(&q, &keys, head_dim, &mut plain);
        for (t, p) in tiled.iter().zip(&plain) {
            assert!((t - p).abs() <= 1e-4 * (1.0 + p.abs()), "tiled {t} against plain {p}");
        }
    }
}
