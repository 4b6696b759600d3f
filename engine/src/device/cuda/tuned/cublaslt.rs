//! GEMMs through cuBLASLt with a fused epilogue, the analogue of `at::cuda::blas::gemm_and_bias`
//! (what PyTorch's `addmm` and `_addmm_activation` call): `relu(a @ b + bias)` in one launch, the
//! bias and the ReLU applied to the product while it is still in registers.
//!
//! Unlike cuBLAS, cuBLASLt takes the algorithm as an argument and lists the ones that fit a
//! problem ([`LtGemm::algorithms`]), which is what max-autotune times. The descriptors of a problem
//! are built once ([`LtGemm::new`]); a call only passes pointers.
//!
//! The problem is stated in cuBLASLt's column-major terms, swapped from the engine's row-major
//! product exactly as `device::cuda::matmul` swaps it for cuBLAS: `C^T = B^T @ A^T`. The bias, one value
//! per column of the row-major product, is then one value per row of cuBLASLt's output, which is
//! the vector its bias epilogue adds.
//!
//! GELU is not offered: cuBLASLt's GELU epilogue is the tanh approximation, up to 5e-4 away from
//! the exact (erf) GELU the engine computes, which is more than rounding; as in PyTorch, an exact
//! GELU stays a kernel of its own.

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::DevicePtr;

use crate::compile_time::{self, Stage};
use crate::device::cuda::Input;
use crate::device::cuda::buffer::CudaBuffer;
use crate::device::cuda::context::CudaDevice;
use crate::device::cuda::error::CudaError;
use crate::device::cuda::matmul::{Accumulation, Dims, Operand, Prepared, prepare};
use crate::dtype::DType;

/// What the GEMM applies to the product before writing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Epilogue {
    /// The product as it is.
    #[default]
    None,
    /// Adds a bias, one value per output column.
    Bias,
    /// `max(product, 0)`.
    Relu,
    /// `max(product + bias, 0)`.
    BiasRelu,
}

impl Epilogue {
    /// The epilogue with a bias added (`Relu` becomes `BiasRelu`).
    pub fn with_bias(self) -> Epilogue {
        match self {
            Epilogue::None | Epilogue::Bias => Epilogue::Bias,
            Epilogue::Relu | Epilogue::BiasRelu => Epilogue::BiasRelu,
        }
    }

    /// The epilogue with a ReLU applied last.
    pub fn with_relu(self) -> Epilogue {
        match self {
            Epilogue::None | Epilogue::Relu => Epilogue::Relu,
            Epilogue::Bias | Epilogue::BiasRelu => Epilogue::BiasRelu,
        }
    }

    /// Whether the epilogue reads a bias vector.
    pub fn has_bias(self) -> bool {
        matches!(self, Epilogue::Bias | Epilogue::BiasRelu)
    }

    /// Whether the epilogue ends with a ReLU.
    pub fn has_relu(self) -> bool {
        matches!(self, Epilogue::Relu | Epilogue::BiasRelu)
    }

    /// How the output code names it: `bias`, `relu`, `bias+relu`, or `none`.
    pub fn name(self) -> &'static str {
        match self {
            Epilogue::None => "none",
            Epilogue::Bias => "bias",
            Epilogue::Relu => "relu",
            Epilogue::BiasRelu => "bias+relu",
        }
    }

    fn code(self) -> sys::cublasLtEpilogue_t {
        match self {
            Epilogue::None => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
            Epilogue::Bias => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            Epilogue::Relu => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU,
            Epilogue::BiasRelu => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
        }
    }
}

/// One algorithm cuBLASLt offers for a problem: an opaque 64-byte value, stable for a given
/// library version, which is how max-autotune's disk cache stores a choice.
pub type Algorithm = [u64; 8];

/// The version of the cuBLASLt library loaded (`120903` for 12.9.3), once it is known to load.
pub fn lt_version(device: &CudaDevice) -> Result<usize, CudaError> {
    device.lt()?;
    // SAFETY: the handle was created, so the library is present; the call takes no arguments.
    Ok(unsafe { sys::cublasLtGetVersion() })
}

/// One GEMM problem in cuBLASLt's column-major terms: `D[m, n] = op(A)[m, k] @ op(B)[k, n]`, over
/// `batch` matrices, and its epilogue. Built from the row-major product's operands by
/// [`Problem::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Problem {
    /// Rows of D (the row-major product's columns).
    pub m: u64,
    /// Columns of D (the row-major product's rows, times the batch when it folds into them).
    pub n: u64,
    /// The reduced dimension.
    pub k: u64,
    /// Matrices in the batch (1 once a broadcast right operand is folded into `n`).
    pub batch: i32,
    /// Whether A (the row-major right operand) is read transposed, its leading dimension and its
    /// batch stride.
    pub a: (bool, i64, i64),
    /// The same for B (the row-major left operand).
    pub b: (bool, i64, i64),
    /// The epilogue.
    pub epilogue: Epilogue,
    /// The element types of A, B and D (the product, and the bias when there is one).
    pub types: [DType; 3],
    /// How the product accumulates (TF32 tensor cores for float32 operands under
    /// `set_float32_matmul_precision(High)`), fixed when the problem is stated.
    pub accumulation: Accumulation,
    /// Whether A and B are multiplied by per-tensor scales passed with each call (the FP8
    /// products of `torch._scaled_mm`).
    pub scaled: bool,
}

impl Problem {
    /// The problem of the row-major `left @ right` with `dims = (m, n, k, batch)` of the row-major
    /// product. A right operand shared by every batch entry (a weight) with a left operand whose
    /// rows run on across the batch is folded into one GEMM of `batch * m` rows: one large
    /// problem runs faster than a batch of small ones.
    pub(crate) fn new(left: &Operand, right: &Operand, dims: Dims, epilogue: Epilogue) -> Problem {
        let (m, n, k, batch) = dims;
        let transposed = |o: &Operand| o.transposed();
        let mut problem = Problem {
            m: n as u64,
            n: m as u64,
            k: k as u64,
            batch: batch as i32,
            a: (transposed(right), right.ld() as i64, right.batch_stride()),
            b: (transposed(left), left.ld() as i64, left.batch_stride()),
            epilogue,
            types: [right.dtype(), left.dtype(), left.dtype()],
            accumulation: Accumulation::of(left.dtype()),
            scaled: false,
        };
        let folds = batch > 1
            && right.batch_stride() == 0
            && !transposed(left)
            && left.batch_stride() == left.ld() as i64 * m as i64;
        if folds {
            problem.n *= batch as u64;
            problem.batch = 1;
            problem.a.2 = 0;
            problem.b.2 = 0;
        }
        problem
    }

    /// Elements of D from one batch entry to the next.
    fn stride_d(&self) -> i64 {
        (self.m * self.n) as i64
    }

    /// Multiply-adds times two: the FLOPs of the product.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }
}

/// What a call adds to the product, by device address: the epilogue's bias vector of the
/// product's columns, and a residual, a matrix laid out as the product (`out`), read as
/// cuBLASLt's `C` with `beta = 1`: `D = epilogue(A @ B + C [+ bias])` into a buffer of its own,
/// as `torch.addmm(input, ...)` passes `input` to cuBLAS.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Addends {
    /// The bias vector, when the epilogue has one.
    pub bias: Option<u64>,
    /// The residual `C`.
    pub residual: Option<u64>,
}

/// A problem's descriptors, made once, and the algorithm chosen for it.
pub struct LtGemm {
    problem: Problem,
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    /// The algorithm used when every pointer is 16-byte aligned.
    algorithm: Algorithm,
    /// One that takes any alignment, asked of the heuristics on the first unaligned call: most
    /// programs never make one, and a heuristic query costs tens of microseconds of every
    /// compile (and of every warm start from the FX graph cache) that builds the GEMM.
    unaligned: OnceLock<Algorithm>,
    /// Setting the bias pointer writes the descriptor: one call at a time.
    calls: Mutex<()>,
}

// SAFETY: the descriptors are written only under `calls` (the bias pointer) or before the value is
// shared; cuBLASLt only reads them during a call.
unsafe impl Send for LtGemm {}
unsafe impl Sync for LtGemm {}

impl Drop for LtGemm {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created by `new` and is destroyed once.
        unsafe {
            let _ = lt::destroy_matmul_desc(self.desc);
            for layout in self.layouts {
                let _ = lt::destroy_matrix_layout(layout);
            }
        }
    }
}

fn set_desc<T>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    value: &T,
) -> Result<(), CudaError> {
    // SAFETY: `value` is the type the attribute takes (the callers pass i32 flags, epilogue codes,
    // device pointers and i64 strides, as cuBLASLt documents them), alive for the call.
    unsafe { lt::set_matmul_desc_attribute(desc, attr, (value as *const T).cast(), size_of::<T>()) }?;
    Ok(())
}

/// cuBLASLt's compute type for an accumulation.
fn lt_compute_type(accumulation: Accumulation) -> sys::cublasComputeType_t {
    use sys::cublasComputeType_t::*;
    match accumulation {
        Accumulation::F32 => CUBLAS_COMPUTE_32F,
        Accumulation::Tf32 => CUBLAS_COMPUTE_32F_FAST_TF32,
        Accumulation::Bf16 => CUBLAS_COMPUTE_32F_FAST_16BF,
    }
}

/// cuBLASLt's name for `dtype`'s elements.
fn lt_data_type(dtype: DType) -> sys::cudaDataType_t {
    use sys::cudaDataType_t::*;
    match dtype {
        DType::F32 => CUDA_R_32F,
        DType::F16 => CUDA_R_16F,
        DType::BF16 => CUDA_R_16BF,
        DType::F8E4M3 => CUDA_R_8F_E4M3,
        DType::F8E5M2 => CUDA_R_8F_E5M2,
    }
}

fn layout(
    dtype: DType,
    rows: u64,
    cols: u64,
    ld: i64,
    batch: i32,
    stride: i64,
) -> Result<sys::cublasLtMatrixLayout_t, CudaError> {
    let layout = lt::create_matrix_layout(lt_data_type(dtype), rows, cols, ld)?;
    if batch > 1 {
        use sys::cublasLtMatrixLayoutAttribute_t as Attr;
        // SAFETY: the batch count is an i32 and the stride an i64, as cuBLASLt documents them.
        unsafe {
            lt::set_matrix_layout_attribute(
                layout,
                Attr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                (&batch as *const i32).cast(),
                4,
            )?;
            lt::set_matrix_layout_attribute(
                layout,
                Attr::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                (&stride as *const i64).cast(),
                8,
            )?;
        }
    }
    Ok(layout)
}

impl LtGemm {
    /// The descriptors of `problem`, with `algorithm` (one of [`LtGemm::algorithms`]) for aligned
    /// pointers; `None` takes cuBLASLt's own first choice.
    pub fn new(device: &CudaDevice, problem: Problem, algorithm: Option<Algorithm>) -> Result<LtGemm, CudaError> {
        use sys::cublasLtMatmulDescAttributes_t as Attr;
        let p = problem;
        // Accumulation is float32 (TF32 or bf16 tensor cores for float32 operands when the matmul
        // precision allows); alpha and beta are floats.
        let desc = lt::create_matmul_desc(lt_compute_type(p.accumulation), sys::cudaDataType_t::CUDA_R_32F)?;
        let shape = |dtype: DType, (t, ld, stride): (bool, i64, i64), rows: u64, cols: u64| {
            if t {
                layout(dtype, cols, rows, ld, p.batch, stride)
            } else {
                layout(dtype, rows, cols, ld, p.batch, stride)
            }
        };
        let [ta, tb, td] = p.types;
        let layouts = [
            shape(ta, p.a, p.m, p.k)?,
            shape(tb, p.b, p.k, p.n)?,
            layout(td, p.m, p.n, p.m as i64, p.batch, p.stride_d())?,
        ];
        let mut gemm =
            LtGemm { problem, desc, layouts, algorithm: [0; 8], unaligned: OnceLock::new(), calls: Mutex::new(()) };
        set_desc(desc, Attr::CUBLASLT_MATMUL_DESC_TRANSA, &(p.a.0 as i32))?;
        set_desc(desc, Attr::CUBLASLT_MATMUL_DESC_TRANSB, &(p.b.0 as i32))?;
        set_desc(desc, Attr::CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epilogue.code())?;
        if p.epilogue.has_bias() {
            // Every batch entry adds the same bias.
            set_desc(desc, Attr::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &0i64)?;
        }
        gemm.algorithm = match algorithm {
            Some(a) => a,
            None => gemm.first_algorithm(device, 16)?,
        };
        Ok(gemm)
    }

    /// The heuristics' first algorithm for pointers aligned to `alignment` bytes.
    fn first_algorithm(&self, device: &CudaDevice, alignment: u32) -> Result<Algorithm, CudaError> {
        self.algorithms(device, 1, alignment)?
            .into_iter()
            .next()
            .ok_or_else(|| CudaError::new(format!("cuBLASLt has no algorithm for {:?}", self.problem)))
    }

    /// The algorithm for pointers of any alignment, asked for once.
    fn unaligned(&self, device: &CudaDevice) -> Result<Algorithm, CudaError> {
        if let Some(algorithm) = self.unaligned.get() {
            return Ok(*algorithm);
        }
        let algorithm = self.first_algorithm(device, 4)?;
        Ok(*self.unaligned.get_or_init(|| algorithm))
    }

    /// The problem.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// The algorithm used for aligned pointers.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Up to `count` algorithms cuBLASLt's heuristics rank first for this problem, for pointers
    /// aligned to `alignment` bytes, best first.
    pub fn algorithms(&self, device: &CudaDevice, count: usize, alignment: u32) -> Result<Vec<Algorithm>, CudaError> {
        let p = self.problem;
        let what = || format!("{}x{}x{} (batch {}, {})", p.m, p.n, p.k, p.batch, p.epilogue.name());
        compile_time::timed(Stage::CublasLt, what, || self.query_algorithms(device, count, alignment))
    }

    fn query_algorithms(&self, device: &CudaDevice, count: usize, alignment: u32) -> Result<Vec<Algorithm>, CudaError> {
        use sys::cublasLtMatmulPreferenceAttributes_t as Pref;
        let handle = device.lt()?;
        let pref = lt::create_matmul_pref()?;
        let workspace = handle.workspace.len() as u64;
        // SAFETY: the workspace size is a u64 and the alignments u32, as cuBLASLt documents them.
        let set = unsafe {
            let mut set = lt::set_matmul_pref_attribute(
                pref,
                Pref::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace as *const u64).cast(),
                8,
            );
            for attr in [
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            ] {
                set =
                    set.and_then(|()| lt::set_matmul_pref_attribute(pref, attr, (&alignment as *const u32).cast(), 4));
            }
            set
        };
        let mut results = vec![std::mem::MaybeUninit::<sys::cublasLtMatmulHeuristicResult_t>::zeroed(); count.max(1)];
        let mut found = 0i32;
        let [a, b, d] = self.layouts;
        // SAFETY: every descriptor is alive; `results` has room for `count` results.
        let status = set.and_then(|()| unsafe {
            sys::cublasLtMatmulAlgoGetHeuristic(
                handle.handle,
                self.desc,
                a,
                b,
                d,
                d,
                pref,
                results.len() as i32,
                results.as_mut_ptr().cast(),
                &mut found,
            )
            .result()
        });
        // SAFETY: created above, destroyed once.
        let _ = unsafe { lt::destroy_matmul_pref(pref) };
        status?;
        Ok(results[..found.max(0) as usize]
            .iter()
            // SAFETY: cuBLASLt filled the first `found` results.
            .map(|r| unsafe { r.assume_init() })
            .filter(|r| r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
            .map(|r| r.algo.data)
            .collect())
    }

    /// The same descriptors with another algorithm (for timing candidates).
    pub fn with_algorithm(&self, device: &CudaDevice, algorithm: Algorithm) -> Result<LtGemm, CudaError> {
        LtGemm::new(device, self.problem, Some(algorithm))
    }

    /// Queues `D = epilogue(A @ B [+ bias])` on the device's stream. Pointers are device addresses
    /// of the first elements (in the engine's row-major terms: `left`, `right`, the product).
    ///
    /// # Safety
    /// The buffers must hold every element the problem's sizes and strides reach, and `bias` (when
    /// the epilogue has one) the product's columns.
    pub unsafe fn run(
        &self,
        device: &CudaDevice,
        left: u64,
        right: u64,
        out: u64,
        bias: Option<u64>,
    ) -> Result<(), CudaError> {
        // SAFETY: forwarded to the caller; an unscaled problem takes no scales.
        unsafe { self.run_scaled(device, left, right, out, Addends { bias, residual: None }, None) }
    }

    /// [`LtGemm::run`] for a scaled problem (`scales` are the device addresses of the left and
    /// the right operand's one-float scales) or one that adds a residual (see [`Addends`]).
    ///
    /// # Safety
    /// As for [`LtGemm::run`]; the scales hold one float each, the residual the product's elements.
    pub(crate) unsafe fn run_scaled(
        &self,
        device: &CudaDevice,
        left: u64,
        right: u64,
        out: u64,
        Addends { bias, residual }: Addends,
        scales: Option<(u64, u64)>,
    ) -> Result<(), CudaError> {
        use sys::cublasLtMatmulDescAttributes_t as Attr;
        let handle = device.lt()?;
        let _call = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bias) = bias {
            set_desc(self.desc, Attr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias)?;
        }
        if let Some((left_scale, right_scale)) = scales {
            // cuBLASLt's A is the row-major right operand, its B the left one.
            set_desc(self.desc, Attr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &right_scale)?;
            set_desc(self.desc, Attr::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &left_scale)?;
        }
        let aligned = [left, right, out, bias.unwrap_or(0), residual.unwrap_or(0)].iter().all(|p| p % 16 == 0);
        let data = if aligned { self.algorithm } else { self.unaligned(device)? };
        let algorithm = sys::cublasLtMatmulAlgo_t { data };
        // C has D's layout: the residual's elements where they are, or D's own (ignored at beta 0).
        let (c, beta) = match residual {
            Some(residual) => (residual, 1.0f32),
            None => (out, 0.0f32),
        };
        let alpha = 1.0f32;
        let [a, b, d] = self.layouts;
        let (workspace, _guard) = handle.workspace.device_ptr(device.stream());
        device.context().bind_to_thread()?;
        // SAFETY: the caller guarantees the buffers; the descriptors and the workspace are alive.
        unsafe {
            lt::matmul(
                handle.handle,
                self.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                right as *const c_void,
                a,
                left as *const c_void,
                b,
                c as *const c_void,
                d,
                out as *mut c_void,
                d,
                &algorithm,
                workspace as *mut c_void,
                handle.workspace.len(),
                device.stream().cu_stream() as *mut _,
            )
        }?;
        Ok(())
    }
}

/// `(a * scale_a) @ (b * scale_b)` of two FP8 matrices into a new buffer of `dtype`, as
/// `torch._scaled_mm` (see [`scaled_mm_into`]): eager mode's product.
pub(crate) fn scaled_mm(
    device: &Arc<CudaDevice>,
    inputs: [Input; 4],
    out_shape: &[usize],
    dtype: DType,
) -> Result<CudaBuffer, CudaError> {
    let out = CudaBuffer::alloc_of(device, dtype, out_shape.iter().product())?;
    scaled_mm_into(device, inputs, None, out_shape, &out)?;
    Ok(out)
}

/// `(a * scale_a) @ (b * scale_b) [+ bias]` of two FP8 matrices written into `out` (a buffer of
/// the product's dtype holding at least `m * n` elements: a compiled graph's planned buffer, so
/// that the product lands where the next kernel reads it, with no copy), as `torch._scaled_mm`;
/// `bias`, a dense vector of `n` elements of the product's dtype, is added by cuBLASLt's epilogue
/// before the result is rounded (a compiled graph folds a bias add into it):
/// cuBLASLt's FP8 kernels (compute capability 8.9 on) take the left operand row-major and the
/// right one column-major ("TN" in its column-major terms) with `k` and `n` multiples of 16, as
/// PyTorch requires; a row-major right operand is copied transposed first (a weight stored
/// `[n, k]` and passed as `w.t()` needs no copy). Accumulation is float32.
pub(crate) fn scaled_mm_into(
    device: &Arc<CudaDevice>,
    [a, b, scale_a, scale_b]: [Input; 4],
    bias: Option<Input>,
    out_shape: &[usize],
    out: &CudaBuffer,
) -> Result<(), CudaError> {
    use crate::device::cuda::pointwise::{self, Dense};
    let dtype = out.dtype();
    let (m, n) = (out_shape[0], out_shape[1]);
    let (right, right_layout) = b.tensor();
    let k = right_layout.shape()[0];
    if !k.is_multiple_of(16) || !n.is_multiple_of(16) {
        return Err(CudaError::new(format!(
            "FP8 products need k and n to be multiples of 16 (cuBLASLt's FP8 kernels), got a [{m}, {k}] @ b [{k}, {n}]"
        )));
    }
    if let Some(bias) = bias {
        let (buffer, layout) = bias.tensor();
        if layout.shape() != [n] || layout.strides() != [1] || buffer.dtype() != dtype {
            return Err(CudaError::new(format!(
                "an FP8 product's bias is a dense vector of its {n} columns in {dtype}, got {:?} (strides {:?}) in {}",
                layout.shape(),
                layout.strides(),
                buffer.dtype()
            )));
        }
    }
    if out.len() < m * n {
        return Err(CudaError::new(format!(
            "the FP8 product's output buffer holds {} elements, the product [{m}, {n}] needs {}",
            out.len(),
            m * n
        )));
    }
    let left = Dense::of(device, a)?;
    let column_major = right_layout.strides() == [1, k];
    let transposed_copy = if column_major {
        None
    } else {
        let t = right_layout.permute(&[1, 0]);
        let view = Input::Tensor { buffer: right, layout: &t };
        Some(pointwise::run(device, pointwise::Kernels::Eager("copy"), &[view], &[n, k], right.dtype())?)
    };
    let right_ptr = transposed_copy.as_ref().map_or(right.ptr_at(right_layout.offset()), |c| c.ptr());
    let left_op = Operand::dense(left.ptr, left.dtype, m, k);
    let right_op = Operand::column_major(right_ptr, right.dtype(), k, n);
    let epilogue = if bias.is_some() { Epilogue::Bias } else { Epilogue::None };
    let mut problem = Problem::new(&left_op, &right_op, (m, n, k, 1), epilogue);
    problem.types[2] = dtype;
    problem.scaled = true;
    let gemm = cached_gemm(device, problem)?;
    let address = |input: Input| {
        let (buffer, layout) = input.tensor();
        buffer.ptr_at(layout.offset())
    };
    let scales = Some((address(scale_a), address(scale_b)));
    let addends = Addends { bias: bias.map(address), residual: None };
    // SAFETY: `left` is a dense [m, k] matrix, `right_ptr` a dense [n, k] one (b column-major),
    // `out` holds m * n elements of `dtype`, the bias (checked above) n of them, and each scale is
    // a one-element float tensor (checked by the op's shape and dtype rules). The copies are freed
    // after the launch in stream order.
    unsafe { gemm.run_scaled(device, left.ptr, right_ptr, out.ptr(), addends, scales) }?;
    drop(transposed_copy);
    Ok(())
}

/// The descriptors of `problem` on `device`, made once per process: eager FP8 products of one
/// shape reuse them (and the heuristics' choice) as compiled GEMMs do.
fn cached_gemm(device: &Arc<CudaDevice>, problem: Problem) -> Result<Arc<LtGemm>, CudaError> {
    type Cache = Mutex<std::collections::HashMap<(usize, Problem), Arc<LtGemm>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (device.facts().ordinal, problem);
    let cache = CACHE.get_or_init(Default::default);
    if let Some(gemm) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(gemm.clone());
    }
    let gemm = Arc::new(LtGemm::new(device, problem, None)?);
    cache.lock().unwrap_or_else(|p| p.into_inner()).insert(key, gemm.clone());
    Ok(gemm)
}

/// `epilogue(a @ b [+ bias] [+ residual])` through the cuBLASLt GEMM chosen for it, into `out`
/// (see [`Addends`]).
pub(crate) fn matmul_lt(
    device: &Arc<CudaDevice>,
    a: Input,
    b: Input,
    out: &mut CudaBuffer,
    out_shape: &[usize],
    gemm: &LtGemm,
    addends: Addends,
) -> Result<(), CudaError> {
    let Prepared::Gemm { a, b, dims } = prepare(device, a, b, out_shape)? else {
        return Err(CudaError::new("a cuBLASLt GEMM was chosen for an empty product"));
    };
    if Problem::new(&a, &b, dims, gemm.problem().epilogue) != *gemm.problem() {
        return Err(CudaError::new("the operands' layout differs from the one the GEMM was tuned for"));
    }
    // SAFETY: the operands and `out` hold the problem's elements (the problem was built from these
    // shapes and strides), and the caller passes a bias of the product's columns and a residual of
    // its elements, laid out as `out`.
    unsafe { gemm.run_scaled(device, a.ptr(), b.ptr(), out.ptr(), addends, None) }
}
