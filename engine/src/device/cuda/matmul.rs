//! Matrix products through cuBLAS, as `at::cuda::blas::gemm` does: one strided-batched SGEMM for
//! every batch, reading transposed views in place (cuBLAS's transpose flags) instead of copying.
//!
//! cuBLAS is column-major and the engine row-major. A row-major `C = A @ B` is, read column-major,
//! `C^T = B^T @ A^T`, so the call passes B first and A second with `m` and `n` swapped; each
//! operand's own layout then decides whether cuBLAS reads it as is (`N`) or transposed (`T`).

use std::ffi::{c_int, c_longlong};
use std::sync::Arc;

use cudarc::cublas::{result as cublas, sys::cublasOperation_t};

use super::Input;
use super::buffer::CudaBuffer;
use super::context::CudaDevice;
use super::error::CudaError;
use super::params::merge_dims;
use super::pointwise;
use crate::layout::{Layout, numel};

/// How cuBLAS reads one operand, a `rows x cols` matrix per batch entry.
pub(crate) struct Operand {
    ptr: u64,
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
    let rank = out_shape.len();
    let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
    let (_, a_layout) = a.tensor();
    let k = a_layout.shape()[a_layout.shape().len() - 1];
    let batch = &out_shape[..rank - 2];
    let out = CudaBuffer::alloc(device, numel(out_shape))?;
    if numel(out_shape) == 0 {
        return Ok(out);
    }
    if k == 0 {
        let mut out = out;
        out.fill_zeros()?;
        return Ok(out);
    }
    let int = |what: &str, v: usize| {
        c_int::try_from(v).map_err(|_| CudaError::new(format!("{what} = {v} exceeds cuBLAS's 32-bit sizes")))
    };
    let (m_int, n_int, k_int, batch_int) = (int("m", m)?, int("n", n)?, int("k", k)?, int("batch", numel(batch))?);
    let a = operand(device, a, batch, (m, k))?;
    let b = operand(device, b, batch, (k, n))?;
    sgemm(device, &a, &b, out.ptr(), (m_int, n_int, k_int, batch_int))?;
    Ok(out)
}

/// Queues row-major `C = A @ B` for every batch entry (`C` dense, `[batch, m, n]`) as one cuBLAS
/// strided-batched SGEMM. `dims` is `(m, n, k, batch)`.
pub(crate) fn sgemm(
    device: &CudaDevice,
    a: &Operand,
    b: &Operand,
    c: u64,
    (m, n, k, batch): (c_int, c_int, c_int, c_int),
) -> Result<(), CudaError> {
    let (alpha, beta) = (1.0f32, 0.0f32);
    let blas = device.blas()?;
    device.context().bind_to_thread()?;
    // SAFETY: the pointers address device buffers that hold every element the strides reach, the
    // leading dimensions satisfy cuBLAS's minimums (checked when the operands were built), and
    // the handle is bound to the device's stream, so the call is ordered with the other ops.
    unsafe {
        cublas::sgemm_strided_batched(
            *blas.handle(),
            b.op,
            a.op,
            n,
            m,
            k,
            &alpha,
            b.ptr as *const f32,
            b.ld,
            b.batch_stride,
            a.ptr as *const f32,
            a.ld,
            a.batch_stride,
            &beta,
            c as *mut f32,
            n,
            m as c_longlong * n as c_longlong,
            batch,
        )
    }?;
    Ok(())
}

impl Operand {
    /// A dense row-major `[batch, rows, cols]` operand at `ptr`.
    pub(crate) fn dense(ptr: u64, rows: usize, cols: usize) -> Operand {
        Operand {
            ptr,
            op: cublasOperation_t::CUBLAS_OP_N,
            ld: cols.max(1) as c_int,
            batch_stride: (rows * cols) as c_longlong,
            _copy: None,
        }
    }
}

/// Prepares one operand broadcast to `batch + [rows, cols]`: read in place when its matrices are
/// row- or column-major and its batch dims collapse to one stride, else from a dense copy.
fn operand(
    device: &Arc<CudaDevice>,
    input: Input,
    batch: &[usize],
    (rows, cols): (usize, usize),
) -> Result<Operand, CudaError> {
    let (buffer, layout) = input.tensor();
    let full_shape = [batch, &[rows, cols]].concat();
    let full = layout.expand(&full_shape);
    if let Some(operand) = in_place(buffer.ptr_at(full.offset()), &full, batch.len(), rows, cols) {
        return Ok(operand);
    }
    let copy = pointwise::run(
        device,
        pointwise::Kernels::Eager("copy"),
        &[Input::Tensor { buffer, layout: &full }],
        &full_shape,
    )?;
    let mut operand = in_place(copy.ptr(), &Layout::contiguous(&full_shape), batch.len(), rows, cols)
        .expect("a dense row-major batch is always readable in place");
    operand._copy = Some(copy);
    Ok(operand)
}

fn in_place(ptr: u64, full: &Layout, batch_rank: usize, rows: usize, cols: usize) -> Option<Operand> {
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
    Some(Operand { ptr, op, ld: c_int::try_from(ld).ok()?, batch_stride, _copy: None })
}
