//! The backward of scaled dot-product attention on the CPU, in the manner of the flash-attention
//! backward: no `[L, S]` matrix is stored, the scores of one query row are recomputed whenever they
//! are needed, from the row's log-sum-exp (computed once, first).
//!
//! With `P = softmax(S)`, `S = scale * q k^T (+ mask)`, `out = P v` and `g` the output's gradient:
//! `dv = P^T g`, `dP = g v^T`, `dS = P * (dP - D)` with `D_i = g_i . out_i` (the row sum of
//! `P * dP`), `dq = scale * dS k` and `dk = scale * dS^T q`. Three passes, each parallel over the
//! batch entries (batch times heads): the row statistics; `dq`, a row at a time; `dk` and `dv`,
//! summed over the rows.

use crate::device::cpu::{HostBuffer, Input, contiguous};
use crate::layout::Layout;
use crate::op::{AttentionMask, AttentionParams, AttentionSizes};
use crate::parallel::{self, Disjoint};

/// A mask read in place: batch entry `b`, query `i`, key `j` at
/// `batch_offsets[b] + i * row_stride + j * col_stride` (strides 0 along broadcast dims).
struct Mask<'a> {
    data: &'a [f32],
    kind: AttentionMask,
    batch_offsets: Vec<usize>,
    row_stride: usize,
    col_stride: usize,
}

/// Everything one query row's scores are computed from.
struct Problem<'a> {
    q: &'a [f32],
    k: &'a [f32],
    mask: Option<Mask<'a>>,
    causal: bool,
    scale: f32,
    sizes: AttentionSizes,
}

impl Problem<'_> {
    /// The scaled, masked scores of query `i` of batch entry `b` against every key, into `row`.
    fn scores(&self, b: usize, i: usize, row: &mut [f32]) {
        let AttentionSizes { q_len, kv_len, head_dim, .. } = self.sizes;
        let query = &self.q[(b * q_len + i) * head_dim..][..head_dim];
        for (j, s) in row.iter_mut().enumerate() {
            let key = &self.k[(b * kv_len + j) * head_dim..][..head_dim];
            *s = self.scale * dot(query, key);
            if self.causal && j > i {
                *s = f32::NEG_INFINITY;
            }
            if let Some(m) = &self.mask {
                let value = m.data[m.batch_offsets[b] + i * m.row_stride + j * m.col_stride];
                match m.kind {
                    AttentionMask::Boolean if value == 0.0 => *s = f32::NEG_INFINITY,
                    AttentionMask::Additive => *s += value,
                    _ => {}
                }
            }
        }
    }

    /// The probabilities of query `i` of batch entry `b` (its scores, then `exp(s - lse)`), into
    /// `row`; a row whose keys are all masked has no probabilities (zeros).
    fn probabilities(&self, b: usize, i: usize, lse: f32, row: &mut [f32]) {
        self.scores(b, i, row);
        for p in row.iter_mut() {
            *p = if lse == f32::NEG_INFINITY { 0.0 } else { (*p - lse).exp() };
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `x += alpha * y`
fn axpy(alpha: f32, y: &[f32], x: &mut [f32]) {
    x.iter_mut().zip(y).for_each(|(x, y)| *x += alpha * y);
}

/// The gradients of `q`, `k` and `v`, flattened and joined, for
/// `inputs = [grad_out, q, k, v, out (, mask)]`.
pub(super) fn attention_backward(
    inputs: &[Input],
    AttentionParams { mask, causal, scale }: AttentionParams,
) -> HostBuffer {
    let [g, q, k, v, o] = [0, 1, 2, 3, 4].map(|i| inputs[i].tensor());
    let sizes = AttentionSizes::of(q.1.shape(), k.1.shape(), v.1.shape());
    let AttentionSizes { batch, q_len, kv_len, head_dim, value_dim } = sizes;
    let (g, q_data, k_data, v, o) =
        (contiguous(g.0, g.1), contiguous(q.0, q.1), contiguous(k.0, k.1), contiguous(v.0, v.1), contiguous(o.0, o.1));
    let rank = q.1.shape().len();
    let mask = inputs.get(5).map(|m| {
        let (data, layout) = m.tensor();
        let scores = [&q.1.shape()[..rank - 1], &[kv_len][..]].concat();
        let full = layout.expand(&scores);
        let batch_layout =
            Layout::new(full.shape()[..rank - 2].to_vec(), full.strides()[..rank - 2].to_vec(), full.offset());
        Mask {
            data,
            kind: mask,
            batch_offsets: batch_layout.offsets().collect(),
            row_stride: full.strides()[rank - 2],
            col_stride: full.strides()[rank - 1],
        }
    });
    let problem = Problem { q: &q_data, k: &k_data, mask, causal, scale, sizes };
    let (nq, nk, nv) = (batch * q_len * head_dim, batch * kv_len * head_dim, batch * kv_len * value_dim);
    let mut out = HostBuffer::from(vec![0.0; nq + nk + nv]);
    if out.is_empty() {
        return out;
    }
    let grad_row = |b: usize, i: usize| &g[(b * q_len + i) * value_dim..][..value_dim];
    let value_row = |b: usize, j: usize| &v[(b * kv_len + j) * value_dim..][..value_dim];

    // Pass 1: each row's log-sum-exp of its scores, and D_i = g_i . out_i.
    let mut stats = vec![0.0f32; batch * q_len * 2];
    parallel::for_each_chunk_mut(&mut stats, q_len * 2, |b, chunk| {
        let mut row = vec![0.0; kv_len];
        for i in 0..q_len {
            problem.scores(b, i, &mut row);
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let lse = if max == f32::NEG_INFINITY {
                max
            } else {
                max + row.iter().map(|s| (s - max).exp()).sum::<f32>().ln()
            };
            chunk[2 * i] = lse;
            chunk[2 * i + 1] = dot(grad_row(b, i), &o[(b * q_len + i) * value_dim..][..value_dim]);
        }
    });
    // dS_ij = P_ij (g_i . v_j - D_i), one query row of it at a time; zero where P_ij is. A row
    // whose keys are all masked has a NaN output, so a NaN D_i, but no probability to carry a
    // gradient: it passes none, as the CUDA kernels skip it.
    let score_grads = |b: usize, i: usize, row: &mut [f32]| {
        let (lse, d) = (stats[(b * q_len + i) * 2], stats[(b * q_len + i) * 2 + 1]);
        problem.probabilities(b, i, lse, row);
        row.iter_mut()
            .enumerate()
            .map(|(j, p)| (*p, if *p == 0.0 { 0.0 } else { *p * (dot(grad_row(b, i), value_row(b, j)) - d) }))
            .collect::<Vec<_>>()
    };
    let (dq, rest) = out.split_at_mut(nq);
    let (dk, dv) = rest.split_at_mut(nk);

    // Pass 2: dq_i = scale * sum_j dS_ij k_j.
    parallel::for_each_chunk_mut(dq, q_len * head_dim, |b, chunk| {
        let mut row = vec![0.0; kv_len];
        for i in 0..q_len {
            let dq_i = &mut chunk[i * head_dim..][..head_dim];
            for (j, (_, ds)) in score_grads(b, i, &mut row).into_iter().enumerate() {
                if ds != 0.0 {
                    axpy(scale * ds, &k_data[(b * kv_len + j) * head_dim..][..head_dim], dq_i);
                }
            }
        }
    });

    // Pass 3: dk_j = scale * sum_i dS_ij q_i and dv_j = sum_i P_ij g_i, each batch entry's rows
    // summed by one task.
    let (dk_ptr, dv_ptr) = (Disjoint::new(dk.as_mut_ptr()), Disjoint::new(dv.as_mut_ptr()));
    parallel::parallel_for(batch, |b| {
        // SAFETY: task `b` writes only batch entry `b`'s rows of `dk` and `dv`, which stay
        // borrowed until every task has returned.
        let (dk_b, dv_b) = unsafe {
            (
                std::slice::from_raw_parts_mut(dk_ptr.get().add(b * kv_len * head_dim), kv_len * head_dim),
                std::slice::from_raw_parts_mut(dv_ptr.get().add(b * kv_len * value_dim), kv_len * value_dim),
            )
        };
        let mut row = vec![0.0; kv_len];
        for i in 0..q_len {
            let q_i = &q_data[(b * q_len + i) * head_dim..][..head_dim];
            for (j, (p, ds)) in score_grads(b, i, &mut row).into_iter().enumerate() {
                if p != 0.0 {
                    axpy(p, grad_row(b, i), &mut dv_b[j * value_dim..][..value_dim]);
                }
                if ds != 0.0 {
                    axpy(scale * ds, q_i, &mut dk_b[j * head_dim..][..head_dim]);
                }
            }
        }
    });
    out
}
