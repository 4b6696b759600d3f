//! Matrix products whose two operands both run along `k` in memory, as tiles of dot products:
//! the layout of a linear layer (`x @ W^T`, with `W` stored `[out, in]` as PyTorch stores it).
//! This is the engine's own small GEMM, written for the products a batch of up to a few hundred
//! rows makes, where a packing GEMM spends as long copying the weight as multiplying by it
//! (PyTorch's CPU BLAS, oneDNN or MKL, has such kernels too).
//!
//! A packing GEMM (the `gemm` crate, `matmul.rs`) copies panels of both operands into a layout
//! its microkernel streams; here no copy is needed, because both operands are already laid out
//! along `k`: a tile of `R` rows of `a` and `C` rows of `b^T` keeps `R x C` vector accumulators
//! in registers, each summing products lane by lane across `k`, and reduces them across lanes
//! once at the end. What makes it fast at small batch:
//!
//! - **No packing.** A packing GEMM copies the whole weight on every call; at 16 rows that copy
//!   costs more than the product does (bench/NOTES-cpu.md, "The GEMM on 16 cores").
//! - **One contiguous range of output columns per thread** (rows of `W`), the same on every
//!   call, so each thread reads its own slice of the weight, from its own cache after the first
//!   call (a 512x2048 weight is 4 MB: 256 KB a thread on 16 cores).
//! - **Blocks that fit in cache:** rows of `a` in blocks that fit in L2 while a thread walks its
//!   columns, and `k` in chunks of 512, so that a tile's rows of `W` stay in L1.
//!
//! The microkernel is written once over a vector type ([`Lanes`]) and compiled for AVX-512 and
//! for AVX2 with FMA, each with a tile sized to its vector registers ([`AVX512_ROWS`] and the
//! constants beside it), picked at run time as ATen's `DispatchStub` does.

// The tiles run on x86-64 only; elsewhere `Kernel::detect` finds none and callers go another way.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables))]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{__m256, __m512};

use super::epilogue::Epilogue;
use super::lanes::{Kernel, Lanes};
use crate::parallel::{self, Disjoint};

/// Bytes of rows of `a` one thread keeps in L2 while it walks its columns: half of the 512 KB to
/// 2 MB L2 of current x86 cores, leaving room for its slice of `b`.
const A_BLOCK_BYTES: usize = 256 << 10;
/// Elements of `k` one pass over the tiles sums (2 KB of each row): the rows of `b^T` a tile
/// reads then stay in L1 while the rows of `a` stream past. Longer rows are summed in chunks,
/// each added to the output the previous one left.
const DEPTH_CHUNK: usize = 512;
/// Tasks a parallel product is split into, per thread of the pool. The pool gives a thread the
/// same tasks (the same slices of the weight) on every call of one shape, as long as no other
/// thread has to take them over.
const TASKS_PER_THREAD: usize = 4;
/// Products with fewer multiply-adds than this run on the calling thread: waking the pool costs
/// a few microseconds, about what 2^16 multiply-adds take on one core.
const PARALLEL_WORK: usize = 1 << 16;

/// The rows of one operand, each contiguous along `k`: row `i` is `data[i * stride..][..k]`.
#[derive(Clone, Copy)]
pub(super) struct Rows<'a> {
    /// The operand's elements from its first row on.
    pub data: &'a [f32],
    /// Elements between the starts of consecutive rows.
    pub stride: usize,
}

// ANCHOR: tiles
/// Rows of `a` in an AVX-512 tile (16 lanes a vector).
const AVX512_ROWS: usize = 4;
/// Rows of `b^T` (output columns) in an AVX-512 tile: 4 x 6 = 24 of the 32 vector registers
/// accumulate, the rest hold the rows of `a`.
const AVX512_COLUMNS: usize = 6;
/// Rows of `a` in an AVX2 tile (8 lanes a vector).
const AVX2_ROWS: usize = 3;
/// Rows of `b^T` in an AVX2 tile: 3 x 4 = 12 of the 16 vector registers accumulate.
const AVX2_COLUMNS: usize = 4;
// ANCHOR_END: tiles

/// Output columns in one tile of `kernel`: a task's share of the columns is a whole number of
/// them.
fn tile_columns(kernel: Kernel) -> usize {
    match kernel {
        Kernel::Avx512 => AVX512_COLUMNS,
        Kernel::Avx2 => AVX2_COLUMNS,
    }
}

/// `c = epilogue(a @ b^T)` through `kernel` (from [`Kernel::detect`]): `c` is the dense
/// row-major `[m, n]` output (its old contents are ignored), `a` has `m` rows and `b_t` `n` rows,
/// each of `k` elements. Split over the engine's pool when `parallel` and the product is large
/// enough.
#[allow(clippy::too_many_arguments)] // the operands and sizes of a GEMM call, as BLAS has them
pub(super) fn product(
    kernel: Kernel,
    a: Rows,
    b_t: Rows,
    k: usize,
    c: &mut [f32],
    n: usize,
    parallel: bool,
    epilogue: Epilogue,
) {
    let operands = Operands { a, b_t, k, m: c.len() / n, n, c: Disjoint::new(c.as_mut_ptr()), epilogue };
    let m = operands.m;
    if !parallel || m * n * k < PARALLEL_WORK {
        return operands.block(kernel, 0..m, 0, n);
    }
    // Four tasks a thread, so that a thread that starts late or runs slow (a busy core of a
    // virtual machine) has its work taken over in parts: one task a thread left the others
    // waiting for it (bench/NOTES-cpu.md). From 128 rows the rows are halved too, so that a thread reads half
    // of `a` instead of all of it; below that the halves are too short to fill the tiles.
    let threads = parallel::num_threads();
    let row_blocks = if m >= 128 { 2 } else { 1 };
    let column_tasks = TASKS_PER_THREAD * threads / row_blocks;
    parallel::parallel_for(row_blocks * column_tasks, |task| {
        let (block, column_task) = (task / column_tasks, task % column_tasks);
        let (start, end) = operands.task_columns(tile_columns(kernel), column_task, column_tasks);
        operands.block(kernel, m * block / row_blocks..m * (block + 1) / row_blocks, start, end);
    });
}

/// Where one tile sits: rows `row..row + rows`, columns `col..col + cols`, summing over `depth`.
#[derive(Clone)]
struct Tile {
    row: usize,
    rows: usize,
    col: usize,
    cols: usize,
    depth: std::ops::Range<usize>,
}

/// One product's operands and sizes, as every thread sees them.
#[derive(Clone, Copy)]
struct Operands<'a> {
    a: Rows<'a>,
    b_t: Rows<'a>,
    k: usize,
    m: usize,
    n: usize,
    /// The output, shared by the tasks of one product: each writes only its own columns
    /// (`Operands::task_columns`), and `product` returns only after every task is done.
    c: Disjoint<f32>,
    /// Applied to each output as the last chunk of `k` writes it.
    epilogue: Epilogue<'a>,
}

impl Operands<'_> {
    /// Task `index` of `tasks`'s columns: a whole number of tiles `width` columns wide, so that
    /// only the last task has a ragged edge.
    fn task_columns(&self, width: usize, index: usize, tasks: usize) -> (usize, usize) {
        let tiles = self.n.div_ceil(width);
        let at = |t: usize| (tiles * t / tasks * width).min(self.n);
        (at(index), at(index + 1))
    }

    /// Output columns `start..end` of rows `rows`, through `kernel`.
    fn block(&self, kernel: Kernel, rows: std::ops::Range<usize>, start: usize, end: usize) {
        if start >= end || rows.is_empty() {
            return;
        }
        // SAFETY: callers get a `Kernel` from `Kernel::detect` (tests from `Kernel::available`),
        // which return only kernels this CPU runs; the ranges stay inside the operands (`a` has m
        // rows, `b_t` n rows, of k elements each).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            match kernel {
                Kernel::Avx512 => self.block_avx512(rows, start, end),
                Kernel::Avx2 => self.block_avx2(rows, start, end),
            }
        }
    }

    /// [`Self::block`] with 16-lane vectors.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn block_avx512(&self, rows: std::ops::Range<usize>, start: usize, end: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { self.walk::<__m512, AVX512_ROWS, AVX512_COLUMNS>(rows, start, end) }
    }

    /// [`Self::block`] with 8-lane vectors.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_avx2(&self, rows: std::ops::Range<usize>, start: usize, end: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { self.walk::<__m256, AVX2_ROWS, AVX2_COLUMNS>(rows, start, end) }
    }

    /// Columns `start..end` in tiles of `R` rows by `C` columns: blocks of rows that fit in L2,
    /// then the columns `C` at a time (their rows of `b^T` stay in L1 while the block's rows
    /// stream past), then the block's rows `R` at a time.
    ///
    /// # Safety
    /// The CPU must run `V`'s instructions, and `start..end` must lie inside `0..n`.
    #[inline(always)]
    unsafe fn walk<V: Lanes, const R: usize, const C: usize>(
        &self,
        rows: std::ops::Range<usize>,
        start: usize,
        end: usize,
    ) {
        for depth_start in (0..self.k).step_by(DEPTH_CHUNK) {
            let depth = depth_start..(depth_start + DEPTH_CHUNK).min(self.k);
            let block_rows = (A_BLOCK_BYTES / 4 / depth.len()).max(R) / R * R;
            for first_row in rows.clone().step_by(block_rows) {
                let rows_end = (first_row + block_rows).min(rows.end);
                for col in (start..end).step_by(C) {
                    let cols = C.min(end - col);
                    for row in (first_row..rows_end).step_by(R) {
                        let at = Tile { row, rows: R.min(rows_end - row), col, cols, depth: depth.clone() };
                        // SAFETY: row + rows <= m and col + cols <= n; forwarded from the caller.
                        unsafe { self.tile_of_size::<V, R, C>(at) };
                    }
                }
            }
        }
    }

    /// One tile of `rows x cols` at (`row`, `col`), through the kernel of that size (at most
    /// `R x C`): sizes are compile-time constants so that the accumulators live in registers.
    ///
    /// # Safety
    /// As for [`Self::tile`].
    #[inline(always)]
    unsafe fn tile_of_size<V: Lanes, const R: usize, const C: usize>(&self, at: Tile) {
        // SAFETY (both arms): forwarded from the caller; each tile lies inside `at`.
        unsafe {
            if at.cols == C {
                self.tile_of_rows::<V, R, C>(at);
            } else {
                // The right edge of the output, once per block of rows: one column at a time.
                for col in at.col..at.col + at.cols {
                    self.tile_of_rows::<V, R, 1>(Tile { col, cols: 1, ..at.clone() });
                }
            }
        }
    }

    /// One tile of `at.rows` (at most `R`) by `TC` columns, through the kernel of that height.
    ///
    /// # Safety
    /// As for [`Self::tile`].
    #[inline(always)]
    unsafe fn tile_of_rows<V: Lanes, const R: usize, const TC: usize>(&self, at: Tile) {
        // SAFETY (all arms): forwarded from the caller; each arm's tile is `at.rows x TC`.
        unsafe {
            match at.rows {
                1 => self.tile::<V, 1, TC>(at),
                2 => self.tile::<V, 2, TC>(at),
                3 if R > 3 => self.tile::<V, 3, TC>(at),
                _ => self.tile::<V, R, TC>(at),
            }
        }
    }

    /// Outputs `row..row + TR` x `col..col + TC`: `TR x TC` accumulators of `V`'s width summed
    /// across `k` a vector at a time, reduced across lanes, plus the last `k % width` products.
    ///
    /// # Safety
    /// The CPU must run `V`'s instructions; `row + TR <= m` and `col + TC <= n`.
    #[inline(always)]
    unsafe fn tile<V: Lanes, const TR: usize, const TC: usize>(&self, at: Tile) {
        let Tile { row, col, depth, .. } = at;
        let a = |r: usize| self.a.data[(row + r) * self.a.stride..][depth.clone()].as_ptr();
        let b = |c: usize| self.b_t.data[(col + c) * self.b_t.stride..][depth.clone()].as_ptr();
        let (k, accumulate, last) = (depth.len(), depth.start > 0, depth.end == self.k);
        let (a_rows, b_rows): ([*const f32; TR], [*const f32; TC]) = (std::array::from_fn(a), std::array::from_fn(b));
        // SAFETY: every load reads `V::WIDTH` elements at p < k - V::WIDTH + 1 of a row of k
        // elements (the slices above checked each row's bounds); the CPU runs `V` (caller).
        unsafe {
            let mut acc = [[V::zero(); TC]; TR];
            let whole = k / V::WIDTH * V::WIDTH;
            for p in (0..whole).step_by(V::WIDTH) {
                let a_vectors: [V; TR] = std::array::from_fn(|r| V::load(a_rows[r].add(p)));
                for c in 0..TC {
                    let b_vector = V::load(b_rows[c].add(p));
                    for r in 0..TR {
                        acc[r][c] = acc[r][c].mul_add(a_vectors[r], b_vector);
                    }
                }
            }
            for r in 0..TR {
                for c in 0..TC {
                    let tail: f32 = (whole..k).map(|p| *a_rows[r].add(p) * *b_rows[c].add(p)).sum();
                    let out = self.c.get().add((row + r) * self.n + col + c);
                    let sum = acc[r][c].sum() + tail;
                    let sum = if accumulate { *out + sum } else { sum };
                    *out = if last { self.epilogue.at(sum, col + c) } else { sum };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Epilogue, Kernel, Rows, product};

    /// `a @ b^T` through each kernel against a float64 reference: rows padded past `k` (a
    /// stride longer than the row), every edge of the tiles, `k` past one 512-element chunk.
    fn check(m: usize, n: usize, k: usize, pad: usize, parallel: bool, seed: u64) -> Result<(), TestCaseError> {
        let stride = k + pad;
        let value = |i: usize| (((i as u64 * 2654435761 + seed) % 1999) as f32 - 999.0) / 500.0;
        let a: Vec<f32> = (0..m * stride).map(value).collect();
        let b_t: Vec<f32> = (0..n * stride).map(|i| value(i + 7919)).collect();
        for kernel in Kernel::available() {
            let mut c = vec![f32::NAN; m * n];
            let rows = |data| Rows { data, stride };
            product(kernel, rows(&a), rows(&b_t), k, &mut c, n, parallel, Epilogue::NONE);
            for i in 0..m {
                for j in 0..n {
                    let terms = (0..k).map(|p| a[i * stride + p] as f64 * b_t[j * stride + p] as f64);
                    let (exact, magnitude) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
                    let bound = k as f64 * f32::EPSILON as f64 * magnitude + 1e-30;
                    let got = c[i * n + j] as f64;
                    prop_assert!(
                        (got - exact).abs() <= bound,
                        "{kernel:?} m={m} n={n} k={k} c[{i},{j}] = {got}, exact {exact} (bound {bound})"
                    );
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn tiles_equal_a_float64_reference(
            m in 1usize..11, n in 1usize..40, k in 1usize..1100, pad in 0usize..3, parallel: bool, seed: u64,
        ) {
            check(m, n, k, pad, parallel, seed % 1000)?;
        }
    }

    #[test]
    fn a_product_split_over_the_pool_equals_a_float64_reference() {
        check(37, 101, 700, 1, true, 3).unwrap();
        // From 128 rows the tasks split the rows too.
        check(131, 101, 700, 1, true, 4).unwrap();
    }
}
