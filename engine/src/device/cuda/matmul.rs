//! Matrix products through cuBLAS, as `at::cuda::blas::gemm` does: one strided-batched GEMM for
//! every batch, reading transposed views in place (cuBLAS's transpose flags) instead of copying.
//! `bf16` and `f16` operands run on the tensor cores with float32 accumulation (`cublasGemmEx`
//! with `CUBLAS_COMPUTE_32F`); float32 ones multiply in float32, or on TF32 (bf16) tensor cores
//! when [`set_float32_matmul_precision`](crate::precision::set_float32_matmul_precision) allows.
//!
//! cuBLAS is column-major and the engine row-major. A row-major `C = A @ B` is, read column-major,
//! `C^T = B^T @ A^T`, so the call passes B first and A second with `m` and `n` swapped; each
//! operand's own layout then decides whether cuBLAS reads it as is (`N`) or transposed (`T`).

use std::ffi::{c_int, c_longlong};
use std::sync::Arc;

use cudarc::cublas::result as cublas;
use cudarc::cublas::sys::{self, cublasOperation_t};

use super::Input;
use super::buffer::CudaBuffer;
use super::context::CudaDevice;
use super::error::CudaError;
use super::params::merge_dims;
use super::pointwise;
use crate::dtype::DType;
use crate::layout::{Layout, numel};
use crate::precision::{MatmulPrecision, float32_matmul_precision};

/// How cuBLAS reads one operand, a `rows x cols` matrix per batch entry.
pub(crate) struct Operand {
    ptr: u64,
    dtype: DType,
    /// `N` when the matrix is row-major (the column-major view of it is its transpose, which is
    /// what the swapped call wants), `T` when it is column-major.
    op: cublasOperation_t,
    ld: c_int,
    batch_stride: c_longlong,
    /// A dense copy made when the layout fits neither form; kept until the call is queued.
    _copy: Option<CudaBuffer>,
}

/// `a @ b` with batch dims broadcast, into a dense buffer of `out_shape`.
pub(super) fn matmul(
    device: &Arc<CudaDevice>,
    a: Input,
    b: Input,
    out_shape: &[usize],
) -> Result<CudaBuffer, CudaError> {
    let mut out = CudaBuffer::alloc_of(device, a.tensor().0.dtype(), numel(out_shape))?;
    matmul_into(device, a, b, &mut out, out_shape)?;
    Ok(out)
}

/// `a @ b` with batch dims broadcast, written densely as `out_shape` from the start of `out` (at
/// least that long): how a call plan puts a product into its planned buffer, and how a recorded
/// CUDA graph keeps writing the same one.
pub(crate) fn matmul_into(
    device: &Arc<CudaDevice>,
    a: Input,
    b: Input,
    out: &mut CudaBuffer,
    out_shape: &[usize],
) -> Result<(), CudaError> {
    match prepare(device, a, b, out_shape)? {
        Prepared::Empty => Ok(()),
        Prepared::Zeros => out.fill_zeros(),
        Prepared::Gemm { a, b, dims } => {
            let int = |what: &str, v: usize| {
                c_int::try_from(v).map_err(|_| CudaError::new(format!("{what} = {v} exceeds cuBLAS's 32-bit sizes")))
            };
            let (m, n, k, batch) = dims;
            gemm(device, &a, &b, out.ptr(), (int("m", m)?, int("n", n)?, int("k", k)?, int("batch", batch)?))
        }
    }
}

/// `(m, n, k, batch)` of a row-major product.
pub(crate) type Dims = (usize, usize, usize, usize);

/// A product ready for a library call: its operands and `(m, n, k, batch)`, or nothing to compute.
// On the stack once per call; boxing the large variant would allocate on every product.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Prepared {
    /// No elements to write.
    Empty,
    /// An empty inner dimension: the product is zeros.
    Zeros,
    /// A GEMM.
    Gemm {
        /// The left operand.
        a: Operand,
        /// The right operand.
        b: Operand,
        /// `(m, n, k, batch)`.
        dims: Dims,
    },
}

/// The operands and sizes of `a @ b` into `out_shape` for a library call (dense copies made
/// where a layout fits no library form).
pub(crate) fn prepare(
    device: &Arc<CudaDevice>,
    a: Input,
    b: Input,
    out_shape: &[usize],
) -> Result<Prepared, CudaError> {
    let rank = out_shape.len();
    let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
    let (_, a_layout) = a.tensor();
    let k = a_layout.shape()[a_layout.shape().len() - 1];
    let batch = &out_shape[..rank - 2];
    if numel(out_shape) == 0 {
        return Ok(Prepared::Empty);
    }
    if k == 0 {
        return Ok(Prepared::Zeros);
    }
    let a = operand(device, a, batch, (m, k))?;
    let b = operand(device, b, batch, (k, n))?;
    Ok(Prepared::Gemm { a, b, dims: (m, n, k, numel(batch)) })
}

/// The operands and `(m, n, k, batch)` of `a @ b` read through these layouts, as [`matmul_into`]
/// will see them (a dense copy where a layout fits no library form), without any buffer: what a
/// GEMM is tuned for at compile time. `None` for an empty product.
pub(crate) fn planned(a: &Layout, b: &Layout, out_shape: &[usize], dtype: DType) -> Option<(Operand, Operand, Dims)> {
    let rank = out_shape.len();
    let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
    let k = a.shape()[a.shape().len() - 1];
    let batch = &out_shape[..rank - 2];
    if numel(out_shape) == 0 || k == 0 {
        return None;
    }
    let plan = |layout: &Layout, (rows, cols): (usize, usize)| {
        let full_shape = [batch, &[rows, cols]].concat();
        in_place(0, dtype, &layout.expand(&full_shape), batch.len(), rows, cols).unwrap_or_else(|| {
            in_place(0, dtype, &Layout::contiguous(&full_shape), batch.len(), rows, cols)
                .expect("a dense row-major batch is always readable in place")
        })
    };
    Some((plan(a, (m, k)), plan(b, (k, n)), (m, n, k, numel(batch))))
}

/// The cuBLAS data type of `dtype`'s elements.
pub(crate) fn cuda_data_type(dtype: DType) -> sys::cudaDataType {
    match dtype {
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        DType::F8E4M3 => sys::cudaDataType::CUDA_R_8F_E4M3,
        DType::F8E5M2 => sys::cudaDataType::CUDA_R_8F_E5M2,
    }
}

/// How a product accumulates and what its multiplies may round to: always a float32 sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Accumulation {
    /// Float32 multiplies of the operands as they are (`CUBLAS_COMPUTE_32F`).
    F32,
    /// Float32 operands rounded to TF32 for the tensor cores (`CUBLAS_COMPUTE_32F_FAST_TF32`).
    Tf32,
    /// Float32 operands rounded to bf16 for the tensor cores (`CUBLAS_COMPUTE_32F_FAST_16BF`).
    Bf16,
}

impl Accumulation {
    /// How a product of `dtype` operands accumulates now: a float32 product may use the TF32 or
    /// bf16 tensor cores when the matmul precision allows; half-precision operands are multiplied
    /// exactly and summed in float32.
    pub fn of(dtype: DType) -> Accumulation {
        match (dtype, float32_matmul_precision()) {
            (DType::F32, MatmulPrecision::High) => Accumulation::Tf32,
            (DType::F32, MatmulPrecision::Medium) => Accumulation::Bf16,
            _ => Accumulation::F32,
        }
    }

    /// cuBLAS's compute type for it.
    fn compute_type(self) -> sys::cublasComputeType_t {
        use sys::cublasComputeType_t::*;
        match self {
            Accumulation::F32 => CUBLAS_COMPUTE_32F,
            Accumulation::Tf32 => CUBLAS_COMPUTE_32F_FAST_TF32,
            Accumulation::Bf16 => CUBLAS_COMPUTE_32F_FAST_16BF,
        }
    }
}

/// Queues row-major `C = A @ B` for every batch entry (`C` dense, `[batch, m, n]`, of the
/// operands' dtype) as one cuBLAS strided-batched GEMM. `dims` is `(m, n, k, batch)`.
pub(crate) fn gemm(
    device: &CudaDevice,
    a: &Operand,
    b: &Operand,
    c: u64,
    (m, n, k, batch): (c_int, c_int, c_int, c_int),
) -> Result<(), CudaError> {
    let (alpha, beta) = (1.0f32, 0.0f32);
    let dtype = cuda_data_type(a.dtype);
    let blas = device.blas()?;
    device.context().bind_to_thread()?;
    // SAFETY: the pointers address device buffers that hold every element the strides reach, the
    // leading dimensions satisfy cuBLAS's minimums (checked when the operands were built), the
    // scalars are floats as CUBLAS_COMPUTE_32F* take them, and the handle is bound to the
    // device's stream, so the call is ordered with the other ops.
    unsafe {
        cublas::gemm_strided_batched_ex(
            *blas.handle(),
            b.op,
            a.op,
            n,
            m,
            k,
            (&alpha as *const f32).cast(),
            b.ptr as *const _,
            dtype,
            b.ld,
            b.batch_stride,
            a.ptr as *const _,
            dtype,
            a.ld,
            a.batch_stride,
            (&beta as *const f32).cast(),
            c as *mut _,
            dtype,
            n,
            m as c_longlong * n as c_longlong,
            batch,
            Accumulation::of(a.dtype).compute_type(),
            sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }?;
    Ok(())
}

impl Operand {
    /// Whether cuBLAS reads the matrix transposed (the operand is column-major).
    pub(crate) fn transposed(&self) -> bool {
        self.op == cublasOperation_t::CUBLAS_OP_T
    }

    /// The leading dimension.
    pub(crate) fn ld(&self) -> c_int {
        self.ld
    }

    /// Elements from one batch entry's matrix to the next (0 when broadcast).
    pub(crate) fn batch_stride(&self) -> c_longlong {
        self.batch_stride
    }

    /// The device address of the first element.
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The element type.
    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }

    /// The same operand read at device address `ptr` (for timing on scratch buffers).
    pub(crate) fn at(&self, ptr: u64) -> Operand {
        Operand { ptr, dtype: self.dtype, op: self.op, ld: self.ld, batch_stride: self.batch_stride, _copy: None }
    }

    /// A column-major `rows x cols` matrix of `dtype` at `ptr` (the transpose of a dense
    /// `[cols, rows]` one).
    pub(crate) fn column_major(ptr: u64, dtype: DType, rows: usize, cols: usize) -> Operand {
        Operand {
            ptr,
            dtype,
            op: cublasOperation_t::CUBLAS_OP_T,
            ld: rows.max(1) as c_int,
            batch_stride: (rows * cols) as c_longlong,
            _copy: None,
        }
    }

    /// A dense row-major `[batch, rows, cols]` operand of `dtype` at `ptr`.
    pub(crate) fn dense(ptr: u64, dtype: DType, rows: usize, cols: usize) -> Operand {
        Operand {
            ptr,
            dtype,
            op: cublasOperation_t::CUBLAS_OP_N,
            ld: cols.max(1) as c_int,
            batch_stride: (rows * cols) as c_longlong,
            _copy: None,
        }
    }
}

/// Prepares one operand broadcast to `batch + [rows, cols]`: read in place when its matrices are
/// row- or column-major and its batch dims collapse to one stride, else from a dense copy.
pub(crate) fn operand(
    device: &Arc<CudaDevice>,
    input: Input,
    batch: &[usize],
    (rows, cols): (usize, usize),
) -> Result<Operand, CudaError> {
    let (buffer, layout) = input.tensor();
    let full_shape = [batch, &[rows, cols]].concat();
    let full = layout.expand(&full_shape);
    let dtype = buffer.dtype();
    if let Some(operand) = in_place(buffer.ptr_at(full.offset()), dtype, &full, batch.len(), rows, cols) {
        return Ok(operand);
    }
    let copy = pointwise::run(
        device,
        pointwise::Kernels::Eager("copy"),
        &[Input::Tensor { buffer, layout: &full }],
        &full_shape,
        dtype,
    )?;
    let mut operand = in_place(copy.ptr(), dtype, &Layout::contiguous(&full_shape), batch.len(), rows, cols)
        .expect("a dense row-major batch is always readable in place");
    operand._copy = Some(copy);
    Ok(operand)
}

fn in_place(ptr: u64, dtype: DType, full: &Layout, batch_rank: usize, rows: usize, cols: usize) -> Option<Operand> {
    let strides = full.strides();
    let (row_stride, col_stride) = (strides[batch_rank], strides[batch_rank + 1]);
    let (op, ld) = if col_stride == 1 || cols == 1 {
        // Row-major: consecutive rows are `row_stride` apart (any value >= cols when rows == 1).
        let ld = if rows == 1 { cols } else { row_stride };
        if ld < cols.max(1) {
            return None;
        }
        (cublasOperation_t::CUBLAS_OP_N, ld)
    } else if row_stride == 1 || rows == 1 {
        let ld = if cols == 1 { rows } else { col_stride };
        if ld < rows.max(1) {
            return None;
        }
        (cublasOperation_t::CUBLAS_OP_T, ld)
    } else {
        return None;
    };
    let batch_strides: Vec<i64> = strides[..batch_rank].iter().map(|&s| s as i64).collect();
    let (merged, merged_strides) = merge_dims(&full.shape()[..batch_rank], &[batch_strides]);
    let batch_stride = match merged.len() {
        0 => 0,
        1 => merged_strides[0][0],
        _ => return None,
    };
    Some(Operand { ptr, dtype, op, ld: c_int::try_from(ld).ok()?, batch_stride, _copy: None })
}
