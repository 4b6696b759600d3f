//! Small matrix products `c (+)= a @ b` in outer-product form, the form of the microkernel at the
//! heart of every register-blocked GEMM (BLIS's, oneDNN's, the `gemm` crate's), for operands
//! small enough to stay in cache and already laid out so that the tile can read them in place
//! (a packing GEMM such as `matmul.rs`'s copies them into its own layout first). The fused
//! attention kernel (`attention.rs`) runs its two products per tile of keys through it, where
//! PyTorch's CPU flash attention calls its BLAS.
//!
//! A tile of `R` rows by `C` vectors of columns keeps its `R x C` vector accumulators in
//! registers while it walks `k`: at each step it loads the `C` vectors of one row of `b`,
//! broadcasts one element of `a` per row to every lane, and adds the products to the
//! accumulators. Each output is loaded and stored once per product, not once per step, and
//! nothing is summed across lanes (the difference from `dot_tiles.rs`, whose dot products are
//! summed along the vectors and reduced across lanes at the end: poor when `k` is as short as a
//! head's 64). `b` and `c` must be contiguous along their rows; `a` is only ever read one element
//! at a time, so any strides will do, and a transposed `a` costs no copy.
//!
//! The tile is written once over [`Lanes`] and compiled for AVX-512 and for AVX2 with FMA, sized
//! to each one's vector registers ([`AVX512_ROWS`] and the constants beside it). Columns past
//! the last whole vector, and CPUs with neither instruction set, take a plain loop.

// The tiles run on x86-64 only; elsewhere callers take the plain loops.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use std::ops::Range;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{__m256, __m512};

use super::lanes::{Kernel, Lanes};

// ANCHOR: avx512_tile
/// Rows in an AVX-512 tile.
const AVX512_ROWS: usize = 4;
/// Vectors of 16 columns in an AVX-512 tile: 64 columns, a whole row of attention's tiles. The
/// 4 x 4 accumulators and the 4 vectors of a row of `b` take 20 of the 32 vector registers; two
/// multiply-add units with 4 cycles of latency need 8 independent sums in flight, and get 16.
const AVX512_COLUMNS: usize = 4;
// ANCHOR_END: avx512_tile
/// Rows in an AVX2 tile.
const AVX2_ROWS: usize = 4;
/// Vectors of 8 columns in an AVX2 tile: 4 x 2 accumulators, 2 vectors of `b` and a broadcast
/// take 11 of the 16 vector registers.
const AVX2_COLUMNS: usize = 2;

/// The left operand, read one element at a time: element `(i, p)` is
/// `data[i * row_stride + p * depth_stride]`.
#[derive(Clone, Copy)]
pub(super) struct Strided<'a> {
    /// The elements, from element `(0, 0)` on.
    pub data: &'a [f32],
    /// Elements between `(i, p)` and `(i + 1, p)`.
    pub row_stride: usize,
    /// Elements between `(i, p)` and `(i, p + 1)`.
    pub depth_stride: usize,
}

/// The right operand, row-major: row `p` is contiguous from `data[p * stride]` on.
#[derive(Clone, Copy)]
pub(super) struct Rows<'a> {
    /// The elements, from the first row on.
    pub data: &'a [f32],
    /// Elements between the starts of consecutive rows.
    pub stride: usize,
}

/// The output: the `rows x cols` block of a row-major matrix whose row `i` starts at
/// `data[i * stride]`.
pub(super) struct Output<'a> {
    /// The elements, from the block's first row on.
    pub data: &'a mut [f32],
    /// Elements between the starts of consecutive rows.
    pub stride: usize,
    /// Rows of the block (`m`).
    pub rows: usize,
    /// Columns of the block (`n`).
    pub cols: usize,
}

/// `c[i][j] = sum over p < k of a[i][p] * b[p][j]` over the block `c`, added to what the block
/// holds when `accumulate`, written over it otherwise; through `kernel`'s tiles when there is one
/// (from [`Kernel::detect`]), plain loops otherwise.
///
/// # Panics
/// If `a`, `b` or `c` is too short for its `m x k`, `k x n` or `m x n` elements.
pub(super) fn product(kernel: Option<Kernel>, a: Strided, b: Rows, k: usize, c: Output, accumulate: bool) {
    let (m, n) = (c.rows, c.cols);
    if m == 0 || n == 0 {
        return;
    }
    // Checked once here, so that the tiles can read and write without a check per element.
    let fits = |len: usize, last: usize| last < len;
    assert!(fits(c.data.len(), (m - 1) * c.stride + n - 1), "the output block is out of bounds");
    if k > 0 {
        assert!(fits(a.data.len(), (m - 1) * a.row_stride + (k - 1) * a.depth_stride), "`a` is too short");
        assert!(fits(b.data.len(), (k - 1) * b.stride + n - 1), "`b` is too short");
    }
    let mut operands = Operands { a, b, k, c, accumulate };
    // SAFETY (both tile arms): callers get a `Kernel` from `Kernel::detect` (tests from
    // `Kernel::available`), which return only kernels this CPU runs; the bounds were checked above.
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Some(Kernel::Avx512) => unsafe { operands.walk_avx512() },
        #[cfg(target_arch = "x86_64")]
        Some(Kernel::Avx2) => unsafe { operands.walk_avx2() },
        _ => operands.plain(0..n),
    }
}

/// One product's operands, bounds already checked.
struct Operands<'a> {
    a: Strided<'a>,
    b: Rows<'a>,
    k: usize,
    c: Output<'a>,
    accumulate: bool,
}

impl Operands<'_> {
    /// [`Self::walk`] with 16-lane vectors.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn walk_avx512(&mut self) {
        // SAFETY: forwarded from the caller.
        unsafe { self.walk::<__m512, AVX512_ROWS, AVX512_COLUMNS>() }
    }

    /// [`Self::walk`] with 8-lane vectors.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn walk_avx2(&mut self) {
        // SAFETY: forwarded from the caller.
        unsafe { self.walk::<__m256, AVX2_ROWS, AVX2_COLUMNS>() }
    }

    /// The whole output in tiles of `R` rows by `C` vectors: for each band of columns, its rows
    /// `R` at a time (the band's rows of `b` stay in L1 while the rows of `a` go past), then the
    /// columns past the last whole vector in a plain loop.
    ///
    /// # Safety
    /// The CPU must run `V`'s instructions, and the operands must hold what [`product`] checks.
    #[inline(always)]
    unsafe fn walk<V: Lanes, const R: usize, const C: usize>(&mut self) {
        const { assert!(R <= 4 && C <= 4, "the size dispatch below covers tiles of up to 4 x 4") };
        let (m, n) = (self.c.rows, self.c.cols);
        let vectors = n / V::WIDTH;
        for first in (0..vectors).step_by(C) {
            let band = C.min(vectors - first);
            for row in (0..m).step_by(R) {
                // SAFETY: the tile lies inside the output (rows below m, columns below n).
                unsafe { self.tile_of_width::<V, R, C>(row, R.min(m - row), first * V::WIDTH, band) };
            }
        }
        self.plain(vectors * V::WIDTH..n);
    }

    /// The tile of `rows` (at most `R`) by `vectors` (at most `C`) at (`row`, `col`), through the
    /// kernel of that size: sizes are compile-time constants so that the accumulators live in
    /// registers.
    ///
    /// # Safety
    /// As for [`Self::tile`].
    #[inline(always)]
    unsafe fn tile_of_width<V: Lanes, const R: usize, const C: usize>(
        &mut self,
        row: usize,
        rows: usize,
        col: usize,
        vectors: usize,
    ) {
        // SAFETY (all arms): forwarded from the caller; each arm's tile is `rows x vectors`.
        unsafe {
            match vectors {
                1 => self.tile_of_rows::<V, R, 1>(row, rows, col),
                2 if C > 2 => self.tile_of_rows::<V, R, 2>(row, rows, col),
                3 if C > 3 => self.tile_of_rows::<V, R, 3>(row, rows, col),
                _ => self.tile_of_rows::<V, R, C>(row, rows, col),
            }
        }
    }

    /// The tile of `rows` (at most `R`) by `TC` vectors at (`row`, `col`).
    ///
    /// # Safety
    /// As for [`Self::tile`].
    #[inline(always)]
    unsafe fn tile_of_rows<V: Lanes, const R: usize, const TC: usize>(&mut self, row: usize, rows: usize, col: usize) {
        // SAFETY (all arms): forwarded from the caller; each arm's tile is `rows x TC`.
        unsafe {
            match rows {
                1 => self.tile::<V, 1, TC>(row, col),
                2 if R > 2 => self.tile::<V, 2, TC>(row, col),
                3 if R > 3 => self.tile::<V, 3, TC>(row, col),
                _ => self.tile::<V, R, TC>(row, col),
            }
        }
    }

    /// Outputs `row..row + TR` x `col..col + TC * V::WIDTH`: `TR x TC` accumulators, each the
    /// sum over `k` of one broadcast element of `a` times one vector of a row of `b`.
    ///
    /// # Safety
    /// The CPU must run `V`'s instructions; the operands hold what [`product`] checks, and
    /// `row + TR <= m`, `col + TC * V::WIDTH <= n`.
    #[inline(always)]
    unsafe fn tile<V: Lanes, const TR: usize, const TC: usize>(&mut self, row: usize, col: usize) {
        let (a, b, k) = (self.a, self.b, self.k);
        let c_stride = self.c.stride;
        let c = self.c.data.as_mut_ptr();
        // SAFETY: every element read or written lies in the `m x k`, `k x n` and `m x n` extents
        // that `product` checked against the slices; the CPU runs `V` (caller).
        unsafe {
            let a_rows: [*const f32; TR] = std::array::from_fn(|r| a.data.as_ptr().add((row + r) * a.row_stride));
            let out = |r: usize, v: usize| c.add((row + r) * c_stride + col + v * V::WIDTH);
            let mut acc = [[V::zero(); TC]; TR];
            if self.accumulate {
                acc = std::array::from_fn(|r| std::array::from_fn(|v| V::load(out(r, v))));
            }
            for p in 0..k {
                let b_row = b.data.as_ptr().add(p * b.stride + col);
                let b_vectors: [V; TC] = std::array::from_fn(|v| V::load(b_row.add(v * V::WIDTH)));
                for r in 0..TR {
                    let a_lanes = V::splat(*a_rows[r].add(p * a.depth_stride));
                    for v in 0..TC {
                        acc[r][v] = acc[r][v].mul_add(a_lanes, b_vectors[v]);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                for (v, lanes) in row.iter().enumerate() {
                    lanes.store(out(r, v));
                }
            }
        }
    }

    /// Output columns `cols` of every row, one multiply and add at a time (each row of the output
    /// takes one row of `b` per step, which the compiler vectorizes as it can).
    #[inline(always)]
    fn plain(&mut self, cols: Range<usize>) {
        if cols.is_empty() {
            return; // the common case: no columns past the last whole vector
        }
        let (a, b) = (self.a, self.b);
        for i in 0..self.c.rows {
            let out = &mut self.c.data[i * self.c.stride..][cols.clone()];
            if !self.accumulate {
                out.fill(0.0);
            }
            for p in 0..self.k {
                let x = a.data[i * a.row_stride + p * a.depth_stride];
                let b_row = &b.data[p * b.stride..][cols.clone()];
                out.iter_mut().zip(b_row).for_each(|(o, &y)| *o += x * y);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Kernel, Output, Rows, Strided, product};

    /// One random product through every kernel this CPU runs and the plain loops, against a
    /// float64 reference: `a` stored row-major or transposed, rows padded past their ends, every
    /// edge of the tiles, added to the output or written over it.
    fn check(m: usize, n: usize, k: usize, a_transposed: bool, pad: usize, accumulate: bool, seed: u64) {
        let value = |i: usize| (((i as u64 * 2654435761 + seed) % 1999) as f32 - 999.0) / 500.0;
        let (row_stride, depth_stride) = if a_transposed { (1, m + pad) } else { (k + pad, 1) };
        let a: Vec<f32> = (0..(m + pad) * (k + pad)).map(value).collect();
        let b_stride = n + pad;
        let b: Vec<f32> = (0..k * b_stride).map(|i| value(i + 7919)).collect();
        let c_stride = n + pad;
        let start: Vec<f32> = (0..m * c_stride).map(|i| value(i + 104729)).collect();
        let kernels = Kernel::available().into_iter().map(Some).chain([None]);
        for kernel in kernels {
            let mut c = start.clone();
            let operand = Strided { data: &a, row_stride, depth_stride };
            let out = Output { data: &mut c, stride: c_stride, rows: m, cols: n };
            product(kernel, operand, Rows { data: &b, stride: b_stride }, k, out, accumulate);
            for i in 0..m {
                for j in 0..c_stride {
                    let at = i * c_stride + j;
                    if j >= n {
                        assert_eq!(c[at], start[at], "{kernel:?}: c[{i},{j}] is past the block but was written");
                        continue;
                    }
                    let terms =
                        (0..k).map(|p| a[i * row_stride + p * depth_stride] as f64 * b[p * b_stride + j] as f64);
                    let first = if accumulate { start[at] as f64 } else { 0.0 };
                    let (exact, magnitude) = terms.fold((first, first.abs()), |(s, m), t| (s + t, m + t.abs()));
                    let bound = (k + 1) as f64 * f32::EPSILON as f64 * magnitude + 1e-30;
                    let got = c[at] as f64;
                    assert!(
                        (got - exact).abs() <= bound,
                        "{kernel:?} m={m} n={n} k={k} c[{i},{j}] = {got}, exact {exact} (bound {bound})"
                    );
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn tiles_equal_a_float64_reference(
            m in 1usize..11, n in 1usize..80, k in 0usize..90, a_transposed: bool, pad in 0usize..3,
            accumulate: bool, seed: u64,
        ) {
            check(m, n, k, a_transposed, pad, accumulate, seed % 1000);
        }
    }

    #[test]
    fn attention_sized_tiles_equal_a_float64_reference() {
        check(64, 64, 64, false, 0, false, 1);
        check(64, 64, 64, true, 0, true, 2);
    }
}
