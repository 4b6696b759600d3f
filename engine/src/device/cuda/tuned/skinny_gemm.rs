//! A matrix product of at most [`MAX_ROWS`] rows by a linear layer's weight, on a kernel of our
//! own (`kernels/skinny_gemm.cu`) instead of cuBLAS: the analogue of the GEMV-shaped templates
//! Inductor generates for few-row products. Such a product is a read of the weight and little
//! else, and cuBLAS's kernels for it took several times as long as that read (bench/NOTES-modes.md,
//! third round). Compiled code uses it (see `inductor::modes::gemm_choice`); eager keeps cuBLAS,
//! as PyTorch's eager does.

use std::sync::Arc;

use cudarc::driver::LaunchConfig;

use super::linear_gemm::{LinearGemm, LinearShape};
use crate::device::cuda::context::CudaDevice;
use crate::device::cuda::error::CudaError;
pub(crate) use crate::device::cuda::source::SKINNY_GEMM as FAMILY;

/// The most rows (the product of the batch dims and `m`) the kernel takes.
pub(crate) const MAX_ROWS: usize = 16;

/// Threads per block (`THREADS` in the kernel).
const THREADS: u32 = 128;

/// Whether the kernel takes a product of this shape: at most [`MAX_ROWS`] rows.
pub(crate) fn fits(shape: &LinearShape) -> bool {
    shape.rows <= MAX_ROWS
}

/// The kernel's compiled row count (the smallest of 1, 4 and 16 that holds the rows) and the
/// columns a block computes. Measured on the H100 (batch 1 to 16, `k` 512 and 2048): more
/// columns a block when there are more rows, so that each load of a row of `a` serves several,
/// and four rather than two when `k` is long, where fewer, longer blocks keep more loads in
/// flight.
fn variant(shape: &LinearShape) -> (usize, usize) {
    match shape.rows {
        1 => (1, 1),
        2..=4 => (4, 2),
        _ if shape.k <= 1024 => (16, 2),
        _ => (16, 4),
    }
}

/// The kernel's name for this shape (with `_vec4` for the float4 kernel).
fn kernel_name(shape: &LinearShape) -> String {
    let (rows, cols) = variant(shape);
    format!("skinny_gemm_r{rows}_c{cols}")
}

/// Loads the kernels for `shape` on `device` (compiled once per device, then cached).
pub(crate) fn load(device: &Arc<CudaDevice>, shape: LinearShape) -> Result<LinearGemm, CudaError> {
    if !fits(&shape) {
        return Err(CudaError::new(format!("skinny_gemm takes at most {MAX_ROWS} rows, not {}", shape.rows)));
    }
    let config = LaunchConfig {
        grid_dim: (shape.n.div_ceil(variant(&shape).1) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    LinearGemm::load(device, FAMILY, &kernel_name(&shape), shape, config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::tuned::linear_gemm::tests::linear;

    #[test]
    fn few_rows_fit_and_pick_their_variant() {
        let s = linear(&[4, 4], 2048, 512).unwrap();
        assert!(fits(&s));
        assert_eq!(kernel_name(&s), "skinny_gemm_r16_c4");
        assert_eq!(kernel_name(&linear(&[3], 30, 7).unwrap()), "skinny_gemm_r4_c2");
        assert_eq!(kernel_name(&linear(&[1], 512, 2048).unwrap()), "skinny_gemm_r1_c1");
    }

    #[test]
    fn too_many_rows_do_not() {
        assert!(!fits(&linear(&[17], 512, 2048).unwrap()));
    }
}
