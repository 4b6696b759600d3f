//! A linear layer's matrix product, `out = a @ w^T (+ bias) (then ReLU)`, on a kernel of the
//! engine's own instead of cuBLAS: the shape such a product must have ([`LinearShape`]) and the
//! resolved kernel that runs it ([`LinearGemm`]). Two kernels take this form: the few-row kernel
//! (`skinny_gemm`) and the tensor-core kernel (`tf32x3_gemm`); they are the analogue of the GEMM
//! templates Inductor generates beside its `extern_kernels.mm`, and compiled code picks between
//! them and cuBLAS (see `inductor::modes::gemm_choice`). Eager keeps cuBLAS, as PyTorch's eager does.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};

use crate::device::cuda::context::CudaDevice;
use crate::device::cuda::error::CudaError;
use crate::layout::{Layout, numel};

/// `LinearParams` of `kernels/linear_params.cuh`: one launch.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct LinearParams {
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
unsafe impl DeviceRepr for LinearParams {}

/// Where a product `a @ b` has a linear layer's layout: the left operand's rows one stride apart
/// with `k` contiguous, the right operand one matrix (no batch of its own) read as a weight
/// `w[c, k]` with `k` contiguous, which is how `linear` reads its weight (`b` is `w` transposed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) struct LinearShape {
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

impl LinearShape {
    /// The kernels' view of `a @ b` written densely as `out_shape`, or `None` where the product
    /// is empty, too large for 32-bit sizes, or its layouts do not fit the kernels' reads.
    pub(crate) fn of(a: &Layout, b: &Layout, out_shape: &[usize]) -> Option<LinearShape> {
        let rank = out_shape.len();
        if rank < 2 || a.shape().len() < 2 || b.shape().len() < 2 {
            return None;
        }
        let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
        let k = a.shape()[a.shape().len() - 1];
        let batch = &out_shape[..rank - 2];
        let rows = numel(batch) * m;
        let fits_i32 = |v: usize| i32::try_from(v).is_ok();
        if rows == 0 || n == 0 || k == 0 || !fits_i32(rows) || !fits_i32(n) || !fits_i32(k) {
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
        Some(LinearShape { rows, n, k, a_row_stride, w_row_stride: if n > 1 { b_last[1] } else { 0 } })
    }

    /// Whether 16-byte loads fit the sizes and strides (the pointers are checked at launch).
    pub(crate) fn vectorizable(&self) -> bool {
        self.k.is_multiple_of(4) && self.a_row_stride.is_multiple_of(4) && self.w_row_stride.is_multiple_of(4)
    }

    /// Floats a buffer must hold for the left operand, and for the weight.
    pub(crate) fn extents(&self) -> (usize, usize) {
        ((self.rows - 1) * self.a_row_stride + self.k, (self.n - 1) * self.w_row_stride + self.k)
    }
}

/// A kernel resolved for one product shape, ready to launch on every call: the 16-byte-load
/// kernel (when the sizes allow it) and the one that loads a float at a time, with their launch
/// dimensions.
pub(crate) struct LinearGemm {
    shape: LinearShape,
    vec4: Option<CudaFunction>,
    scalar: CudaFunction,
    config: LaunchConfig,
}

impl LinearGemm {
    /// Loads kernels `name` and `name_vec4` (when the shape allows 16-byte loads) of `family`.
    /// `config` is the launch for the shape; where its shared memory exceeds the 48 KiB a kernel
    /// gets unasked, the kernels are allowed that much.
    pub(crate) fn load(
        device: &Arc<CudaDevice>,
        family: &str,
        name: &str,
        shape: LinearShape,
        config: LaunchConfig,
    ) -> Result<LinearGemm, CudaError> {
        let load = |name: &str| -> Result<CudaFunction, CudaError> {
            let function = device.eager_kernel(family, name)?;
            if config.shared_mem_bytes > 48 * 1024 {
                use cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
                function
                    .set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, config.shared_mem_bytes as i32)?;
            }
            Ok(function)
        };
        let vec4 = match shape.vectorizable() {
            true => Some(load(&format!("{name}_vec4"))?),
            false => None,
        };
        Ok(LinearGemm { shape, vec4, scalar: load(name)?, config })
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
        let params = LinearParams {
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
        let mut launch = device.stream().launch_builder(function);
        launch.arg(&params);
        // SAFETY: `LinearParams` mirrors the kernel's struct, and the caller guarantees that its
        // pointers address buffers holding what the sizes and strides reach.
        unsafe { launch.launch(self.config) }?;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `x @ w^T` as `linear` writes it: `x` of shape `rows + [k]`, `w` stored `[n, k]`.
    pub(crate) fn linear(rows: &[usize], k: usize, n: usize) -> Option<LinearShape> {
        let a = Layout::contiguous(&[rows, &[k]].concat());
        let w = Layout::contiguous(&[n, k]).permute(&[1, 0]);
        let out = [rows, &[n]].concat();
        LinearShape::of(&a, &w, &out)
    }

    #[test]
    fn a_linear_layer_fits() {
        let s = linear(&[1], 512, 2048).unwrap();
        assert_eq!(s, LinearShape { rows: 1, n: 2048, k: 512, a_row_stride: 0, w_row_stride: 512 });
        let s = linear(&[4, 1024], 2048, 512).unwrap();
        assert_eq!((s.rows, s.a_row_stride, s.w_row_stride), (4096, 2048, 2048));
        assert!(s.vectorizable());
        assert_eq!(s.extents(), (4095 * 2048 + 2048, 511 * 2048 + 2048));
    }

    #[test]
    fn an_empty_product_does_not() {
        assert_eq!(linear(&[0], 512, 2048), None);
        assert_eq!(linear(&[1], 0, 2048), None);
        assert_eq!(linear(&[1], 512, 0), None);
    }

    #[test]
    fn a_row_major_right_operand_does_not() {
        // `x @ w` with `w` stored `[k, n]`: its `k` is not contiguous.
        let a = Layout::contiguous(&[2, 64]);
        let b = Layout::contiguous(&[64, 32]);
        assert_eq!(LinearShape::of(&a, &b, &[2, 32]), None);
    }

    #[test]
    fn a_batched_right_operand_does_not() {
        let a = Layout::contiguous(&[2, 1, 64]);
        let b = Layout::contiguous(&[2, 32, 64]).permute(&[0, 2, 1]);
        assert_eq!(LinearShape::of(&a, &b, &[2, 1, 32]), None);
    }

    #[test]
    fn rows_that_do_not_nest_into_one_stride_do_not() {
        // A transposed left operand: rows are one element apart but `k` is not contiguous.
        let a = Layout::contiguous(&[64, 4]).permute(&[1, 0]);
        let w = Layout::contiguous(&[32, 64]).permute(&[1, 0]);
        assert_eq!(LinearShape::of(&a, &w, &[4, 32]), None);
        // Batch rows with a gap between batch entries.
        let a = Layout::new(vec![2, 2, 8], vec![100, 8, 1], 0);
        let w = Layout::contiguous(&[32, 8]).permute(&[1, 0]);
        assert_eq!(LinearShape::of(&a, &w, &[2, 2, 32]), None);
    }

    #[test]
    fn odd_sizes_load_a_float_at_a_time() {
        assert!(!linear(&[3], 30, 7).unwrap().vectorizable());
    }
}
