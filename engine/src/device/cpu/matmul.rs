//! Matrix products, the role MKL or OpenBLAS play for PyTorch on CPU.
//!
//! A product of many rows goes to the `gemm` crate (chosen against `matrixmultiply` by
//! measurement, bench/NOTES-cpu.md; its AVX-512 kernels are on): it reads any strides, so
//! transposed and broadcast operands need no copy, packs panels into cache-sized blocks and
//! splits the work over the engine's rayon pool. Packing copies the whole weight on every call,
//! which a product of up to a few hundred rows cannot repay: when both operands run along `k`
//! (a linear layer, `x @ W^T`) such a product runs as the engine's own tiles of dot products
//! (`dot_tiles.rs`), which read the weight in place. Otherwise a product of a few rows is
//! matrix-vector work, a loop that streams the weight once, split by columns over the pool. A
//! batch of small products (attention's per-head matrices) runs one product per task.

use rayon::prelude::*;

use super::Input;
use super::dot_tiles;
use super::simd::vectorized;
use crate::layout::{Layout, numel};

/// Products with at most this many rows take the matrix-vector path: at 16 rows `gemm` was ahead
/// (bench/NOTES-cpu.md), at one row the weight read is all there is.
const MATVEC_ROWS: usize = 4;
// ANCHOR: dot_tile_rows
/// Products of at most this many rows whose operands both run along `k` take the engine's own
/// tiles of dot products (`dot_tiles.rs`); larger ones the packing GEMM. On the 16-core host of
/// bench/NOTES-cpu.md the tiles were ahead up to 512 rows and behind from 1024.
const DOT_TILE_ROWS: usize = 512;
// ANCHOR_END: dot_tile_rows
/// Columns of the output one matrix-vector task computes: enough work to amortise the task.
const MATVEC_COLUMNS: usize = 16;
/// Batched products with fewer multiply-adds than this each run whole on one thread (the
/// attention of the small block is 32 products of `2^20`, each too small to split well).
const SMALL_PRODUCT: usize = 1 << 22;

/// `a @ b` over broadcast batch dimensions into a dense `out_shape` buffer.
pub(super) fn matmul(a: Input, b: Input, out_shape: &[usize]) -> Vec<f32> {
    let mut out = vec![0.0f32; numel(out_shape)];
    matmul_into(a, b, out_shape, &mut out);
    out
}

/// One operand matrix: its elements from the first on, and its row and column strides.
#[derive(Clone, Copy)]
struct Matrix<'a> {
    data: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

/// `a @ b` written into `out`, a dense `out_shape` buffer whose old contents are ignored: how
/// compiled code calls matmul as an extern kernel into memory its call plan owns.
pub(crate) fn matmul_into(a: Input, b: Input, out_shape: &[usize], out: &mut [f32]) {
    let ((ad, al), (bd, bl)) = (a.tensor(), b.tensor());
    let rank = out_shape.len();
    let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
    let k = al.shape()[al.shape().len() - 1];
    let batch = &out_shape[..rank - 2];
    // Broadcast each operand to batch + its own matrix dims, then walk the batch offsets.
    let a_full = al.expand(&[batch, &[m, k]].concat());
    let b_full = bl.expand(&[batch, &[k, n]].concat());
    let batch_layout = |l: &Layout| Layout::new(batch.to_vec(), l.strides()[..batch.len()].to_vec(), l.offset());
    let (sa, sb) = (&a_full.strides()[batch.len()..], &b_full.strides()[batch.len()..]);
    assert_eq!(out.len(), numel(out_shape), "matmul_into: the output buffer must match the output shape");
    if k == 0 || out.is_empty() {
        out.fill(0.0);
        return;
    }
    let operands = |ao: usize, bo: usize| {
        (
            Matrix { data: &ad[ao..], row_stride: sa[0], col_stride: sa[1] },
            Matrix { data: &bd[bo..], row_stride: sb[0], col_stride: sb[1] },
        )
    };
    let offsets: Vec<(usize, usize)> = batch_layout(&a_full).offsets().zip(batch_layout(&b_full).offsets()).collect();
    if offsets.len() > 1 && m * n * k < SMALL_PRODUCT {
        out.par_chunks_mut(m * n).zip(&offsets).for_each(|(c, &(ao, bo))| {
            let (a, b) = operands(ao, bo);
            product(a, b, k, c, n, false);
        });
    } else {
        for (c, &(ao, bo)) in out.chunks_mut(m * n).zip(&offsets) {
            let (a, b) = operands(ao, bo);
            product(a, b, k, c, n, true);
        }
    }
}

/// One `[m, k] @ [k, n]` product into the dense row-major `c` (`m * n` elements).
fn product(a: Matrix, b: Matrix, k: usize, c: &mut [f32], n: usize, parallel: bool) {
    let m = c.len() / n;
    let dot_kernel =
        if m <= DOT_TILE_ROWS && a.col_stride == 1 && b.row_stride == 1 { dot_tiles::Kernel::detect() } else { None };
    if let Some(kernel) = dot_kernel {
        let (a_rows, b_columns) = (
            dot_tiles::Rows { data: a.data, stride: a.row_stride },
            dot_tiles::Rows { data: b.data, stride: b.col_stride },
        );
        return dot_tiles::product(kernel, a_rows, b_columns, k, c, n, parallel);
    }
    if m <= MATVEC_ROWS && (b.row_stride == 1 || b.col_stride == 1) {
        return matvec(a, b, k, c, n);
    }
    let parallelism = if parallel { gemm::Parallelism::Rayon(0) } else { gemm::Parallelism::None };
    // SAFETY: shape inference checked every operand's layout against its buffer, so each
    // (row, col) offset read through the strides stays inside `a.data` and `b.data`; `c` holds
    // exactly m * n elements, row-major. `gemm` scales the old destination by `alpha` only when
    // `read_dst` is set, so the old contents of `c` are ignored.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `c = a @ b` for a few rows of `a`, when `b`'s columns (a linear layer's weight rows) or rows
/// are contiguous: the weight is read once, straight from its buffer, in column blocks spread
/// over the pool.
fn matvec(a: Matrix, b: Matrix, k: usize, c: &mut [f32], n: usize) {
    let m = c.len() / n;
    // The few rows of `a`, dense, so that the inner loops are plain slice zips.
    let rows: Vec<f32> =
        (0..m).flat_map(|i| (0..k).map(move |j| a.data[i * a.row_stride + j * a.col_stride])).collect();
    // Each task returns its block of every output row; blocks are then copied into place.
    let blocks: Vec<Vec<f32>> = (0..n.div_ceil(MATVEC_COLUMNS))
        .into_par_iter()
        .map(|block| {
            let columns = block * MATVEC_COLUMNS..((block + 1) * MATVEC_COLUMNS).min(n);
            vectorized(
                #[inline(always)]
                || matvec_block(&rows, b, k, columns),
            )
        })
        .collect();
    for (block, values) in blocks.iter().enumerate() {
        let width = values.len() / m;
        for (i, row) in values.chunks_exact(width).enumerate() {
            c[i * n + block * MATVEC_COLUMNS..][..width].copy_from_slice(row);
        }
    }
}

/// Output columns `columns` of every row of `rows @ b`, row after row.
#[inline(always)]
fn matvec_block(rows: &[f32], b: Matrix, k: usize, columns: std::ops::Range<usize>) -> Vec<f32> {
    let width = columns.len();
    let mut out = vec![0.0f32; rows.len() / k * width];
    if b.row_stride == 1 {
        // Column j of b is contiguous: one dot product per output.
        for (j, col) in columns.enumerate() {
            let column = &b.data[col * b.col_stride..][..k];
            for (i, row) in rows.chunks_exact(k).enumerate() {
                out[i * width + j] = dot(row, column);
            }
        }
    } else {
        // Row r of b is contiguous: accumulate a[i, r] * b[r, columns] into each output row.
        for (i, row) in rows.chunks_exact(k).enumerate() {
            let acc = &mut out[i * width..(i + 1) * width];
            for (r, &x) in row.iter().enumerate() {
                let b_row = &b.data[r * b.row_stride + columns.start..][..width];
                acc.iter_mut().zip(b_row).for_each(|(o, &w)| *o += x * w);
            }
        }
    }
    out
}

/// `x . y` with sixteen running sums, so that the loop runs in vector lanes.
#[inline(always)]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0.0f32; LANES];
    let (xs, ys) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let tail: f32 = xs.remainder().iter().zip(ys.remainder()).map(|(a, b)| a * b).sum();
    for (xc, yc) in xs.zip(ys) {
        for l in 0..LANES {
            acc[l] += xc[l] * yc[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}
