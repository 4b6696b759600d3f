//! A matrix product of at most [`MAX_ROWS`] rows by a linear layer's weight, on a kernel of our
//! own (`kernels/skinny_gemm.cu`) instead of cuBLAS: the analogue of the GEMV-shaped templates
//! Inductor generates for few-row products. Such a product is a read of the weight and little
//! else; cuBLAS's kernels for it took 5-8 us a layer on the H100 where reading the 4 MB weight
//! takes about 1.4 us. Compiled code uses it (see `inductor::gemm_choice`); eager keeps cuBLAS,
//! as PyTorch's eager does.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};

use super::context::CudaDevice;
use super::error::CudaError;
use super::source::SKINNY_GEMM as FAMILY;
use crate::layout::{Layout, numel};

/// The most rows (the product of the batch dims and `m`) the kernel takes.
pub(crate) const MAX_ROWS: usize = 16;

/// Threads per block (`THREADS` in the kernel).
const THREADS: u32 = 128;

/// `SkinnyParams`: one launch.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SkinnyParams {
    a: u64,
    w: u64,
    bias: u64,
    out: u64,
    a_row_stride: i64,
    w_row_stride: i64,
    rows: i32,
    n: i32,
    k: i32,
    relu: i32,
}

// SAFETY: plain `#[repr(C)]` data whose layout matches the CUDA C struct field for field.
unsafe impl DeviceRepr for SkinnyParams {}

/// Where a product `a @ b` fits the kernel: the left operand's rows one stride apart with `k`
/// contiguous, the right operand one matrix (no batch of its own) read as a weight `w[c, k]` with
/// `k` contiguous, which is how `linear` reads its weight (`b` is `w` transposed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SkinnyShape {
    /// Rows of the product (batch dims and `m` together).
    pub(crate) rows: usize,
    /// Columns of the product.
    pub(crate) n: usize,
    /// The reduced dimension.
    pub(crate) k: usize,
    /// Elements between rows of `a`.
    pub(crate) a_row_stride: usize,
    /// Elements between rows of the weight (columns of `b`).
    pub(crate) w_row_stride: usize,
}

impl SkinnyShape {
    /// The kernel's view of `a @ b` written densely as `out_shape`, or `None` where the product
    /// has more than [`MAX_ROWS`] rows, is empty, or its layouts do not fit the kernel's reads.
    pub(crate) fn of(a: &Layout, b: &Layout, out_shape: &[usize]) -> Option<SkinnyShape> {
        let rank = out_shape.len();
        if rank < 2 || a.shape().len() < 2 || b.shape().len() < 2 {
            return None;
        }
        let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
        let k = a.shape()[a.shape().len() - 1];
        let batch = &out_shape[..rank - 2];
        let rows = numel(batch) * m;
        let fits_i32 = |v: usize| i32::try_from(v).is_ok();
        if rows == 0 || rows > MAX_ROWS || n == 0 || k == 0 || !fits_i32(n) || !fits_i32(k) {
            return None;
        }
        let b = b.expand(&[batch, &[k, n]].concat());
        let (b_batch, b_last) = b.strides().split_at(rank - 2);
        if b_batch.iter().zip(batch).any(|(&stride, &size)| size > 1 && stride != 0) || (k > 1 && b_last[0] != 1) {
            return None;
        }
        let a = a.expand(&[batch, &[m, k]].concat());
        if k > 1 && a.strides()[rank - 1] != 1 {
            return None;
        }
        // The row dims (batch and m) with more than one entry must nest into a single stride.
        let row_dims: Vec<(usize, usize)> =
            a.shape()[..rank - 1].iter().zip(a.strides()).map(|(&s, &st)| (s, st)).filter(|&(s, _)| s > 1).collect();
        if !row_dims.windows(2).all(|w| w[0].1 == w[1].1 * w[1].0) {
            return None;
        }
        let a_row_stride = row_dims.last().map_or(0, |&(_, stride)| stride);
        Some(SkinnyShape { rows, n, k, a_row_stride, w_row_stride: if n > 1 { b_last[1] } else { 0 } })
    }

    /// The kernel's compiled row count (the smallest of 1, 4 and 16 that holds the rows) and the
    /// columns a block computes. Measured on the H100 (batch 1 to 16, `k` 512 and 2048): more
    /// columns a block when there are more rows, so that each load of a row of `a` serves several,
    /// and four rather than two when `k` is long, where fewer, longer blocks keep more loads in
    /// flight.
    fn variant(&self) -> (usize, usize) {
        match self.rows {
            1 => (1, 1),
            2..=4 => (4, 2),
            _ if self.k <= 1024 => (16, 2),
            _ => (16, 4),
        }
    }

    /// Whether float4 loads fit the sizes and strides (the pointers are checked at launch).
    fn vectorizable(&self) -> bool {
        self.k.is_multiple_of(4) && self.a_row_stride.is_multiple_of(4) && self.w_row_stride.is_multiple_of(4)
    }

    /// The kernel's name for this shape, with float4 loads or without.
    fn kernel_name(&self, vec4: bool) -> String {
        let (rows, cols) = self.variant();
        let suffix = if vec4 { "_vec4" } else { "" };
        format!("skinny_gemm_r{rows}_c{cols}{suffix}")
    }
}

/// The kernel resolved for one product shape, ready to launch on every call.
pub(crate) struct SkinnyGemm {
    shape: SkinnyShape,
    /// The float4 kernel (when the sizes allow it) and the scalar one.
    vec4: Option<CudaFunction>,
    scalar: CudaFunction,
}

impl SkinnyGemm {
    /// Loads the kernels for `shape` on `device` (compiled once per device, then cached).
    pub(crate) fn new(device: &Arc<CudaDevice>, shape: SkinnyShape) -> Result<SkinnyGemm, CudaError> {
        let vec4 = match shape.vectorizable() {
            true => Some(device.eager_kernel(FAMILY, &shape.kernel_name(true))?),
            false => None,
        };
        Ok(SkinnyGemm { shape, vec4, scalar: device.eager_kernel(FAMILY, &shape.kernel_name(false))? })
    }

    /// Queues `out = a @ w^T (+ bias) (then ReLU)` on the device's stream; `a` and `w` point at the
    /// operands' first elements, `out` at a dense `[rows, n]` buffer, `bias` at `n` floats.
    ///
    /// # Safety
    /// Every pointer addresses device memory holding the elements the shape's sizes and strides
    /// reach, and stays valid until the kernel has run (stream order).
    pub(crate) unsafe fn run(
        &self,
        device: &CudaDevice,
        a: u64,
        w: u64,
        out: u64,
        bias: Option<u64>,
        relu: bool,
    ) -> Result<(), CudaError> {
        let s = self.shape;
        let aligned = a.is_multiple_of(16) && w.is_multiple_of(16);
        let function = match &self.vec4 {
            Some(f) if aligned => f,
            _ => &self.scalar,
        };
        let params = SkinnyParams {
            a,
            w,
            bias: bias.unwrap_or(0),
            out,
            a_row_stride: s.a_row_stride as i64,
            w_row_stride: s.w_row_stride as i64,
            rows: s.rows as i32,
            n: s.n as i32,
            k: s.k as i32,
            relu: i32::from(relu),
        };
        let config = LaunchConfig {
            grid_dim: (s.n.div_ceil(s.variant().1) as u32, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = device.stream().launch_builder(function);
        launch.arg(&params);
        // SAFETY: `SkinnyParams` mirrors the kernel's struct, and the caller guarantees that its
        // pointers address buffers holding what the sizes and strides reach.
        unsafe { launch.launch(config) }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linear(rows: &[usize], k: usize, n: usize) -> Option<SkinnyShape> {
        let a = Layout::contiguous(&[rows, &[k]].concat());
        let w = Layout::contiguous(&[n, k]).permute(&[1, 0]);
        let out = [rows, &[n]].concat();
        SkinnyShape::of(&a, &w, &out)
    }

    #[test]
    fn a_linear_layer_of_few_rows_fits() {
        let s = linear(&[1], 512, 2048).unwrap();
        assert_eq!(s, SkinnyShape { rows: 1, n: 2048, k: 512, a_row_stride: 0, w_row_stride: 512 });
        let s = linear(&[4, 4], 2048, 512).unwrap();
        assert_eq!((s.rows, s.a_row_stride, s.w_row_stride), (16, 2048, 2048));
        assert!(s.vectorizable());
        assert_eq!(s.kernel_name(true), "skinny_gemm_r16_c4_vec4");
    }

    #[test]
    fn too_many_rows_or_an_empty_product_does_not() {
        assert_eq!(linear(&[17], 512, 2048), None);
        assert_eq!(linear(&[1], 0, 2048), None);
        assert_eq!(linear(&[1], 512, 0), None);
    }

    #[test]
    fn a_row_major_right_operand_does_not() {
        // `x @ w` with `w` stored `[k, n]`: its `k` is not contiguous.
        let a = Layout::contiguous(&[2, 64]);
        let b = Layout::contiguous(&[64, 32]);
        assert_eq!(SkinnyShape::of(&a, &b, &[2, 32]), None);
    }

    #[test]
    fn a_batched_right_operand_does_not() {
        let a = Layout::contiguous(&[2, 1, 64]);
        let b = Layout::contiguous(&[2, 32, 64]).permute(&[0, 2, 1]);
        assert_eq!(SkinnyShape::of(&a, &b, &[2, 1, 32]), None);
    }

    #[test]
    fn rows_that_do_not_nest_into_one_stride_do_not() {
        // A transposed left operand: rows are one element apart but `k` is not contiguous.
        let a = Layout::contiguous(&[64, 4]).permute(&[1, 0]);
        let w = Layout::contiguous(&[32, 64]).permute(&[1, 0]);
        assert_eq!(SkinnyShape::of(&a, &w, &[4, 32]), None);
        // Batch rows with a gap between batch entries.
        let a = Layout::new(vec![2, 2, 8], vec![100, 8, 1], 0);
        let w = Layout::contiguous(&[32, 8]).permute(&[1, 0]);
        assert_eq!(SkinnyShape::of(&a, &w, &[2, 2, 32]), None);
    }

    #[test]
    fn odd_sizes_take_the_scalar_kernel() {
        let s = linear(&[3], 30, 7).unwrap();
        assert!(!s.vectorizable());
        assert_eq!(s.kernel_name(false), "skinny_gemm_r4_c2");
    }
}
