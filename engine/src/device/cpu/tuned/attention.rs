//! Scaled dot-product attention on the CPU, the engine's version of PyTorch's CPU flash attention
//! (`aten/src/ATen/native/cpu/FlashAttentionKernel.cpp`), blocked as the CUDA kernel is. A block
//! of queries visits the keys a tile at a time, keeping for each query a running maximum, a
//! running sum of exponentials and a running output (the online softmax). The `[L, S]` score
//! matrix is never stored; each task holds one tile of scores.
//!
//! For each tile of keys a block runs two small matrix products, with a step of the softmax
//! between them, all in vector lanes:
//!
//! 1. **Scores, `keys @ q^T`.** The block's queries are transposed (and scaled) once, into
//!    `[head_dim, QUERY_BLOCK]`. The outer-product tiles (`outer_tiles.rs`) then broadcast one
//!    element of a key and multiply it by a vector of queries (16 with AVX-512): the keys are
//!    read in place, and the scores come out transposed, `[keys, queries]`, one query per lane.
//! 2. **Softmax step.** With one query per lane, a query's maximum and sum over the tile are
//!    lane-wise maxima and sums of the tile's rows: no reduction across lanes. Exponentials use
//!    the engine's vector `exp`, which compilers vectorize (libm's they do not).
//! 3. **Output, `out += p @ v`.** The same tiles again: each row of `v` is read in place as the
//!    vectors, each probability broadcast from the transposed tile (the tiles read their left
//!    operand one element at a time, so its layout costs nothing). A tile of outputs stays in
//!    registers across the whole tile of keys.
//!
//! The common case, no mask and not causal, runs with nothing between the products and the
//! softmax; a causal block stops at its last query's key, and a mask is applied to each tile.
//!
//! `q`, `k` and `v` are read where they lie, at any row and batch strides ([`Rows`]): a model's
//! heads are views of its projections, and copying the three of them into dense buffers first
//! cost more than the attention itself (bench/NOTES-cpu.md, "Attention in place").

use std::ops::Range;

use super::lanes::Kernel;
use super::outer_tiles::{self, Strided};
use super::simd::vectorized_for;
use crate::device::cpu::vecmath::exp;
use crate::device::cpu::{Dense, HostBuffer, Input, PARALLEL_THRESHOLD, allocator, contiguous};
use crate::layout::{Layout, numel};
use crate::op::{AttentionMask, AttentionParams, AttentionSizes};
use crate::parallel::{self, Disjoint};

// ANCHOR: blocks
/// Queries in one task's block. A key tile, read from L2, serves all of them; their transposed
/// copy (16 KB at head_dim 64) stays in L1 while the tile's keys go past. 64 makes 8x12x1024
/// queries 1536 tasks and 4x8x128 still 64, four for each of 16 threads.
const QUERY_BLOCK: usize = 64;
/// Keys in one tile. The tile's values (16 KB at value_dim 64) stay in L1 while the block's
/// probabilities go past, beside the 16 KB of scores; and the work done once per tile (rescaling
/// the block's outputs) is 1/64 of the products'.
const KEY_TILE: usize = 64;
// ANCHOR_END: blocks
/// The scores product runs over the block's queries rounded up to this, a multiple of every
/// kernel's vector width, so that it has no ragged edge: the extra lanes hold zero queries, whose
/// scores are never used.
const LANE_MULTIPLE: usize = 16;

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
    /// Applies the mask to a tile of scaled scores `[width, QUERY_BLOCK]`: keys `start..` of
    /// the queries `queries` of batch entry `b`. One query at a time, along its row of the mask:
    /// a tile's keys are contiguous there, while its queries are a whole row of the mask apart
    /// (4 KB at 1024 keys, so that they would all fall in one set of the L1 cache).
    fn apply(&self, b: usize, queries: Range<usize>, start: usize, scores: &mut [f32]) {
        let width = scores.len() / QUERY_BLOCK;
        for (lane, query) in queries.enumerate() {
            let row = self.batch_offsets[b] + query * self.row_stride + start * self.col_stride;
            for key in 0..width {
                let (m, s) = (self.data[row + key * self.col_stride], &mut scores[key * QUERY_BLOCK + lane]);
                *s = match self.kind {
                    AttentionMask::Boolean if m == 0.0 => f32::NEG_INFINITY,
                    AttentionMask::Additive => *s + m,
                    _ => *s,
                };
            }
        }
    }
}

/// One of `q`, `k`, `v` read where it lies: row `i` of batch entry `b` is the contiguous run at
/// `batch_offsets[b] + i * row_stride`. Heads split from a wider projection (`[B, L, H, E]`
/// viewed as `[B, H, L, E]`, or a third of a joined QKV product) are read in place, as
/// PyTorch's CPU flash attention reads them; only a view whose rows are not contiguous is copied.
struct Rows<'a> {
    data: Dense<'a>,
    batch_offsets: Vec<usize>,
    row_stride: usize,
}

impl<'a> Rows<'a> {
    /// The operand `(data, layout)`, copied only if its rows are not contiguous.
    fn of((data, layout): (&'a [f32], &Layout)) -> Rows<'a> {
        let (shape, rank) = (layout.shape(), layout.shape().len());
        if shape[rank - 1] > 1 && layout.strides()[rank - 1] != 1 {
            let dense = Layout::contiguous(shape);
            return Rows {
                batch_offsets: batch_offsets(&dense),
                row_stride: shape[rank - 1],
                data: contiguous(data, layout),
            };
        }
        Rows {
            data: Dense::Borrowed(data),
            batch_offsets: batch_offsets(layout),
            row_stride: layout.strides()[rank - 2],
        }
    }

    /// Rows `first..first + rows` of batch entry `b`: from the first one's start to the last one's end.
    fn rows(&self, b: usize, first: usize, rows: usize, width: usize) -> &[f32] {
        let start = self.batch_offsets[b] + first * self.row_stride;
        &self.data[start..start + (rows - 1) * self.row_stride + width]
    }
}

/// Where each batch entry of `layout` (its dims but the last two) starts.
fn batch_offsets(layout: &Layout) -> Vec<usize> {
    let rank = layout.shape().len();
    Layout::new(layout.shape()[..rank - 2].to_vec(), layout.strides()[..rank - 2].to_vec(), layout.offset())
        .offsets()
        .collect()
}

/// `softmax(q @ k^T * scale [+ mask]) @ v` for `inputs = [q, k, v (, mask)]`.
pub(super) fn attention(inputs: &[Input], AttentionParams { mask, causal, scale }: AttentionParams) -> HostBuffer {
    let (q, k, v) = (inputs[0].tensor(), inputs[1].tensor(), inputs[2].tensor());
    let sizes = AttentionSizes::of(q.1.shape(), k.1.shape(), v.1.shape());
    let mut out = allocator::uninit(sizes.batch * sizes.q_len * sizes.value_dim);
    if out.is_empty() || sizes.kv_len == 0 {
        // No keys: every sum is 0, and every output 0/0, as in PyTorch's math path.
        out.fill(f32::NAN);
        return out;
    }
    let (queries, keys, values) = (Rows::of((&q.0[..], q.1)), Rows::of((&k.0[..], k.1)), Rows::of((&v.0[..], v.1)));
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
    let kernel = Kernel::detect();
    let blocks_per_batch = q_len.div_ceil(QUERY_BLOCK);
    let out_ptr = Disjoint::new(out.as_mut_ptr());
    let task = |index: usize| {
        let (b, first) = (index / blocks_per_batch, (index % blocks_per_batch) * QUERY_BLOCK);
        let queries_range = first..q_len.min(first + QUERY_BLOCK);
        let rows = queries_range.len();
        // SAFETY: each task writes the rows of its own block of queries, and `out` outlives the
        // tasks (`parallel_for` returns when all are done).
        let out = unsafe {
            let rows_at = out_ptr.get().add((b * q_len + first) * value_dim);
            std::slice::from_raw_parts_mut(rows_at, rows * value_dim)
        };
        let block = QueryBlock {
            kernel,
            queries: queries.rows(b, first, rows, head_dim),
            query_stride: queries.row_stride,
            scale,
            keys: keys.rows(b, 0, kv_len, head_dim),
            key_stride: keys.row_stride,
            values: values.rows(b, 0, kv_len, value_dim),
            value_stride: values.row_stride,
            rows,
            head_dim,
            value_dim,
        };
        // One copy of the block's loops per case, each compiled with its own way of masking (or
        // none) inlined. The op refuses a mask together with causal, as PyTorch does.
        match &mask {
            Some(mask) => vectorized_for(
                kernel,
                #[inline(always)]
                || block.run(kv_len, |start, scores| mask.apply(b, queries_range.clone(), start, scores), out),
            ),
            // Query `i` sees keys `0..=i`: the block needs none past its last query.
            None if causal => vectorized_for(
                kernel,
                #[inline(always)]
                || {
                    block.run(
                        kv_len.min(queries_range.end),
                        |start, scores| hide_later_keys(&queries_range, start, scores),
                        out,
                    )
                },
            ),
            None => vectorized_for(
                kernel,
                #[inline(always)]
                || block.run(kv_len, |_, _| {}, out),
            ),
        }
    };
    let tasks = sizes.batch * blocks_per_batch;
    if numel(&[sizes.batch, q_len, kv_len]) * head_dim > PARALLEL_THRESHOLD {
        parallel::parallel_for(tasks, task);
    } else {
        (0..tasks).for_each(task);
    }
    out
}

/// Causal masking of a tile of scores `[width, QUERY_BLOCK]` whose keys start at `start`: query
/// `i` does not see key `j > i`.
fn hide_later_keys(queries: &Range<usize>, start: usize, scores: &mut [f32]) {
    for (key, row) in (start..).zip(scores.chunks_exact_mut(QUERY_BLOCK)) {
        let hidden = key.saturating_sub(queries.start).min(queries.len());
        row[..hidden].fill(f32::NEG_INFINITY);
    }
}

/// One task: a block of queries of one batch entry, with that entry's keys and values.
struct QueryBlock<'a> {
    /// The tiles the products run through ([`Kernel::detect`]).
    kernel: Option<Kernel>,
    /// The block's queries, `rows` rows of `head_dim`, `query_stride` apart.
    queries: &'a [f32],
    query_stride: usize,
    /// The factor applied to every score.
    scale: f32,
    /// `kv_len` rows of `head_dim`, `key_stride` apart.
    keys: &'a [f32],
    key_stride: usize,
    /// `kv_len` rows of `value_dim`, `value_stride` apart.
    values: &'a [f32],
    value_stride: usize,
    /// Queries in the block.
    rows: usize,
    head_dim: usize,
    value_dim: usize,
}

impl QueryBlock<'_> {
    /// The block's output `[rows, value_dim]` into `out`, from keys `0..keys_end` a tile at a
    /// time; `mask(start, scores)` adjusts each tile of scaled scores (`[width, QUERY_BLOCK]`,
    /// keys from `start`) before the softmax.
    #[inline(always)]
    fn run(&self, keys_end: usize, mask: impl Fn(usize, &mut [f32]), out: &mut [f32]) {
        let QueryBlock { kernel, head_dim, value_dim, rows, .. } = *self;
        let lanes = rows.next_multiple_of(LANE_MULTIPLE);
        let mut scores = [0.0f32; KEY_TILE * QUERY_BLOCK];
        let queries_t = self.transposed_queries();
        let mut softmax = OnlineSoftmax::new();
        out.fill(0.0);
        for start in (0..keys_end).step_by(KEY_TILE) {
            let width = KEY_TILE.min(keys_end - start);
            let tile = &mut scores[..width * QUERY_BLOCK];
            let keys =
                Strided { data: &self.keys[start * self.key_stride..], row_stride: self.key_stride, depth_stride: 1 };
            let queries_t = outer_tiles::Rows { data: &queries_t, stride: QUERY_BLOCK };
            let into = outer_tiles::Output { data: &mut *tile, stride: QUERY_BLOCK, rows: width, cols: lanes };
            outer_tiles::product(kernel, keys, queries_t, head_dim, into, false);
            mask(start, tile);
            let rescale = softmax.step(tile, lanes);
            for (row, &r) in out.chunks_exact_mut(value_dim).zip(&rescale) {
                row.iter_mut().for_each(|o| *o *= r);
            }
            let probs = Strided { data: &*tile, row_stride: 1, depth_stride: QUERY_BLOCK };
            let values =
                outer_tiles::Rows { data: &self.values[start * self.value_stride..], stride: self.value_stride };
            let into = outer_tiles::Output { data: &mut *out, stride: value_dim, rows, cols: value_dim };
            outer_tiles::product(kernel, probs, values, width, into, true);
        }
        for (row, &sum) in out.chunks_exact_mut(value_dim).zip(&softmax.sum) {
            // A query with every key masked has sum 0 and output 0: 0/0 is NaN, as in PyTorch's
            // math path.
            row.iter_mut().for_each(|o| *o /= sum);
        }
    }

    /// The block's queries times `scale`, transposed to `[head_dim, QUERY_BLOCK]` with zeros past
    /// `rows`: the right operand of the scores product, with the scale applied once per query
    /// instead of once per score.
    #[inline(always)]
    fn transposed_queries(&self) -> Vec<f32> {
        let mut queries_t = vec![0.0; self.head_dim * QUERY_BLOCK];
        for (d, column) in queries_t.chunks_exact_mut(QUERY_BLOCK).enumerate() {
            let column = column[..self.rows].iter_mut().enumerate();
            column.for_each(|(i, x)| *x = self.queries[i * self.query_stride + d] * self.scale);
        }
        queries_t
    }
}

/// The online softmax of a block's queries, one lane per query: when a tile raises a query's
/// maximum from `m` to `m'`, its sum and output so far are rescaled by `exp(m - m')`, so that in
/// the end every exponential is taken against the final maximum.
struct OnlineSoftmax {
    /// Each query's largest score so far.
    max: [f32; QUERY_BLOCK],
    /// Each query's sum of `exp(score - max)` so far.
    sum: [f32; QUERY_BLOCK],
}

impl OnlineSoftmax {
    /// No keys seen yet.
    fn new() -> OnlineSoftmax {
        OnlineSoftmax { max: [f32::NEG_INFINITY; QUERY_BLOCK], sum: [0.0; QUERY_BLOCK] }
    }

    /// Takes in a tile of scores `[width, QUERY_BLOCK]` (the first `lanes` columns), turns it into
    /// `exp(score - max)` in place and returns the factor by which each query's output so far
    /// must be scaled. Every loop runs along a row of the tile, one query per lane.
    #[inline(always)]
    fn step(&mut self, scores: &mut [f32], lanes: usize) -> [f32; QUERY_BLOCK] {
        let mut tile_max = [f32::NEG_INFINITY; QUERY_BLOCK];
        for row in scores.chunks_exact(QUERY_BLOCK) {
            tile_max[..lanes].iter_mut().zip(&row[..lanes]).for_each(|(m, &s)| *m = m.max(s));
        }
        let (mut shift, mut rescale) = ([0.0; QUERY_BLOCK], [0.0; QUERY_BLOCK]);
        for i in 0..lanes {
            let max = self.max[i].max(tile_max[i]);
            // A query that has seen only masked keys (max -inf) takes exponentials against 0:
            // they are 0 for those keys, where `-inf - -inf` would be NaN.
            shift[i] = if max == f32::NEG_INFINITY { 0.0 } else { max };
            rescale[i] = exp(self.max[i] - shift[i]);
            self.max[i] = max;
            self.sum[i] *= rescale[i];
        }
        for row in scores.chunks_exact_mut(QUERY_BLOCK) {
            let lanes = row[..lanes].iter_mut().zip(&shift).zip(&mut self.sum);
            lanes.for_each(|((s, &shift), sum)| {
                *s = exp(*s - shift);
                *sum += *s;
            });
        }
        rescale
    }
}
