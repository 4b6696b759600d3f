//! Matrix products, the role MKL or OpenBLAS play for PyTorch on CPU.
//!
//! A product of many rows goes to the `gemm` crate (chosen against `matrixmultiply` by
//! measurement, bench/NOTES-cpu.md; its AVX-512 kernels are on), which reads any strides, so
//! transposed and broadcast operands need no copy, and packs panels into cache-sized blocks. The
//! output is split into blocks spread over the engine's thread pool, each one single-threaded
//! `gemm` call. Packing copies the whole weight on every call, which a product of up to a few
//! hundred rows cannot repay: when both operands run along `k` (a linear layer, `x @ W^T`) such
//! a product runs as the engine's own tiles of dot products (`dot_tiles.rs`), which read the
//! weight in place. Otherwise a product of a few rows is matrix-vector work, a loop that streams
//! the weight once, split by columns over the pool. A batch of small products (attention's
//! per-head matrices) runs one product per task.

use super::dot_tiles;
use super::epilogue::Epilogue;
use super::lanes::Kernel;
use super::simd::vectorized;
use crate::device::cpu::{HostBuffer, Input, allocator};
use crate::layout::{Layout, numel};
use crate::parallel::{self, Disjoint};

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
/// Products of fewer multiply-adds than this run as one `gemm` call on the calling thread.
const PACKED_TASK_WORK: usize = 1 << 20;
/// Output columns of one block of a split packed product.
const BLOCK_COLUMNS: usize = 512;
/// Bounds on the rows of one block of a split packed product: enough rows to repay packing its
/// panel of `b`, few enough to give every thread several blocks.
const MIN_BLOCK_ROWS: usize = 48;
const MAX_BLOCK_ROWS: usize = 384;

/// `a @ b` over broadcast batch dimensions into a dense `out_shape` buffer.
pub(super) fn matmul(a: Input, b: Input, out_shape: &[usize]) -> HostBuffer {
    let mut out = allocator::uninit(numel(out_shape));
    matmul_into(a, b, out_shape, &mut out, Epilogue::NONE);
    out
}

/// One operand matrix: its elements from the first on, and its row and column strides.
#[derive(Clone, Copy)]
struct Matrix<'a> {
    data: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

/// `epilogue(a @ b)` written into `out`, a dense `out_shape` buffer whose old contents are
/// ignored: how compiled code calls matmul as an extern kernel into memory its call plan owns.
pub(crate) fn matmul_into(a: Input, b: Input, out_shape: &[usize], out: &mut [f32], epilogue: Epilogue) {
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
        // SAFETY: the whole output.
        return unsafe { epilogue.apply(out.as_mut_ptr(), n, 0..out.len() / n.max(1), 0..n) };
    }
    let operands = |ao: usize, bo: usize| {
        (
            Matrix { data: &ad[ao..], row_stride: sa[0], col_stride: sa[1] },
            Matrix { data: &bd[bo..], row_stride: sb[0], col_stride: sb[1] },
        )
    };
    // One matrix `b` shared by the whole batch (a linear layer's weight), and `a`'s batch walking
    // its rows at one stride: a single product of all the rows, as ATen's linear flattens the
    // leading dims, instead of a product per batch entry, each too short to split well.
    let a_rows = &a_full.shape()[..batch.len() + 1];
    if !batch.is_empty()
        && b_full.strides()[..batch.len()].iter().all(|&s| s == 0)
        && let Some(row_stride) = uniform_stride(a_rows, &a_full.strides()[..batch.len() + 1])
    {
        let a = Matrix { data: &ad[a_full.offset()..], row_stride, col_stride: sa[1] };
        let b = Matrix { data: &bd[b_full.offset()..], row_stride: sb[0], col_stride: sb[1] };
        return product(a, b, k, out, n, true, epilogue);
    }
    let offsets: Vec<(usize, usize)> = batch_layout(&a_full).offsets().zip(batch_layout(&b_full).offsets()).collect();
    if offsets.len() > 1 && m * n * k < SMALL_PRODUCT {
        parallel::for_each_chunk_mut(out, m * n, |i, c| {
            let (a, b) = operands(offsets[i].0, offsets[i].1);
            product(a, b, k, c, n, false, epilogue);
        });
    } else {
        for (c, &(ao, bo)) in out.chunks_mut(m * n).zip(&offsets) {
            let (a, b) = operands(ao, bo);
            product(a, b, k, c, n, true, epilogue);
        }
    }
}

/// The stride of one dimension that walks the same memory as dims `shape` with `strides` (in
/// row-major order), if there is one: dims of size 1 go anywhere, the others must nest.
fn uniform_stride(shape: &[usize], strides: &[usize]) -> Option<usize> {
    let dims: Vec<(usize, usize)> =
        shape.iter().copied().zip(strides.iter().copied()).filter(|&(n, _)| n != 1).collect();
    let nested = dims.windows(2).all(|pair| pair[0].1 == pair[1].1 * pair[1].0);
    nested.then(|| dims.last().map_or(0, |&(_, stride)| stride))
}

/// One `epilogue([m, k] @ [k, n])` product into the dense row-major `c` (`m * n` elements).
fn product(a: Matrix, b: Matrix, k: usize, c: &mut [f32], n: usize, parallel: bool, epilogue: Epilogue) {
    let m = c.len() / n;
    let dot_kernel = if m <= DOT_TILE_ROWS && a.col_stride == 1 && b.row_stride == 1 { Kernel::detect() } else { None };
    if let Some(kernel) = dot_kernel {
        let (a_rows, b_columns) = (
            dot_tiles::Rows { data: a.data, stride: a.row_stride },
            dot_tiles::Rows { data: b.data, stride: b.col_stride },
        );
        return dot_tiles::product(kernel, a_rows, b_columns, k, c, n, parallel, epilogue);
    }
    if m <= MATVEC_ROWS && (b.row_stride == 1 || b.col_stride == 1) {
        return matvec(a, b, k, c, n, epilogue);
    }
    if !parallel || m * n * k < PACKED_TASK_WORK {
        // SAFETY: the whole product, from its own operands into all of `c`.
        return unsafe { packed_block(a, b, k, c.as_mut_ptr(), n, 0..m, 0..n, epilogue) };
    }
    // Blocks of the output, several per thread so that a slow thread's share is taken over by
    // the others, each a whole `gemm` call that packs its own panels.
    let columns = n.div_ceil(BLOCK_COLUMNS);
    let rows = (4 * parallel::num_threads())
        .div_ceil(columns)
        .max(m.div_ceil(MAX_BLOCK_ROWS))
        .min(m.div_ceil(MIN_BLOCK_ROWS))
        .max(1);
    let (row_edge, column_edge) = (|i: usize| m * i / rows, |j: usize| n * j / columns);
    let out = Disjoint::new(c.as_mut_ptr());
    parallel::parallel_for(rows * columns, |task| {
        let (i, j) = (task / columns, task % columns);
        // SAFETY: the blocks of the grid are disjoint parts of `c`, which outlives the call.
        unsafe {
            packed_block(
                a,
                b,
                k,
                out.get(),
                n,
                row_edge(i)..row_edge(i + 1),
                column_edge(j)..column_edge(j + 1),
                epilogue,
            )
        };
    });
}

/// Rows `rows` by columns `columns` of `c = epilogue(a @ b)` through the `gemm` crate on this
/// thread, the epilogue applied to the block while it is still in cache.
///
/// # Safety
/// `c` must point to the dense row-major `[m, n]` output, of which this call alone writes the
/// block, and `rows` and `columns` must lie inside it.
#[allow(clippy::too_many_arguments)] // the operands and sizes of a GEMM call, as BLAS has them
unsafe fn packed_block(
    a: Matrix,
    b: Matrix,
    k: usize,
    c: *mut f32,
    n: usize,
    rows: std::ops::Range<usize>,
    columns: std::ops::Range<usize>,
    epilogue: Epilogue,
) {
    // SAFETY: shape inference checked every operand's layout against its buffer, so each
    // (row, col) offset read through the strides stays inside `a.data` and `b.data`; the block of
    // `c` is the caller's. `gemm` scales the old destination by `alpha` only when `read_dst` is
    // set, so the old contents of `c` are ignored.
    unsafe {
        gemm::gemm(
            rows.len(),
            columns.len(),
            k,
            c.add(rows.start * n + columns.start),
            1,
            n as isize,
            false,
            a.data.as_ptr().add(rows.start * a.row_stride),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr().add(columns.start * b.col_stride),
            b.col_stride as isize,
            b.row_stride as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
        epilogue.apply(c, n, rows, columns);
    }
}

/// `c = a @ b` for a few rows of `a`, when `b`'s columns (a linear layer's weight rows) or rows
/// are contiguous: the weight is read once, straight from its buffer, in column blocks spread
/// over the pool.
fn matvec(a: Matrix, b: Matrix, k: usize, c: &mut [f32], n: usize, epilogue: Epilogue) {
    let m = c.len() / n;
    // The few rows of `a`, dense, so that the inner loops are plain slice zips.
    let rows: Vec<f32> =
        (0..m).flat_map(|i| (0..k).map(move |j| a.data[i * a.row_stride + j * a.col_stride])).collect();
    // Each task computes its columns of every output row, then copies them into place.
    let out = Disjoint::new(c.as_mut_ptr());
    parallel::parallel_for(n.div_ceil(MATVEC_COLUMNS), |block| {
        let columns = block * MATVEC_COLUMNS..((block + 1) * MATVEC_COLUMNS).min(n);
        let mut values = vectorized(
            #[inline(always)]
            || matvec_block(&rows, b, k, columns.clone()),
        );
        for (i, row) in values.chunks_exact_mut(columns.len()).enumerate() {
            row.iter_mut().enumerate().for_each(|(j, x)| *x = epilogue.at(*x, columns.start + j));
            // SAFETY: task `block` alone writes these columns of `c`, which outlives the call.
            unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), out.get().add(i * n + columns.start), row.len()) };
        }
    });
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

#[cfg(test)]
mod tests {
    use super::uniform_stride;

    #[test]
    fn nested_dims_walk_at_one_stride() {
        assert_eq!(uniform_stride(&[8, 1024], &[1024 * 768, 768]), Some(768), "a batch of rows");
        assert_eq!(uniform_stride(&[2, 1, 3], &[15, 99, 5]), Some(5), "size-1 dims go anywhere");
        assert_eq!(uniform_stride(&[1, 1], &[7, 3]), Some(0), "one row");
        assert_eq!(uniform_stride(&[2, 3], &[4, 8]), None, "a permuted batch");
        assert_eq!(uniform_stride(&[2, 3], &[16, 5]), None, "rows with a gap between batch entries");
    }
}
