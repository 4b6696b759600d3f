//! Launching the flash-attention kernels (`kernels/attention.cu`), the analogue of the
//! `_flash_attention_forward` launcher behind PyTorch's `scaled_dot_product_attention`: q, k, v
//! and the mask are read in place through their strides (a head split by a reshape and a
//! transpose costs no copy), and the output is written through strides too: compiled code's
//! planned buffer in q's layout (see `inductor::lowering`), eagerly a fresh dense buffer of q's
//! dtype. Float32 runs on the SIMT kernel or, from compute capability 8.0, on TF32x3 tensor cores;
//! bf16 and f16 on the 16-bit tensor cores (`mma.m16n8k16`) from 8.0, with Hopper's warpgroup MMA
//! (`wgmma`) on 9.0 for head dim 64, and before 8.0 through the plain kernels' float32 math path.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use crate::device::cuda::buffer::CudaBuffer;
use crate::device::cuda::context::CudaDevice;
use crate::device::cuda::error::CudaError;
use crate::device::cuda::params::dtype_code;
use crate::device::cuda::pointwise::Dense;
use crate::device::cuda::{Input, Plain};
use crate::device::provider::{DeviceKernels, composed_attention};
use crate::dtype::DType;
use crate::layout::Layout;
use crate::op::{AttentionMask, AttentionParams, AttentionSizes};

/// Threads per block of the float32 kernels and keys per tile, `THREADS` and `BC` in the kernel.
const THREADS: u32 = 128;
const KEY_TILE: usize = 64;
/// Threads per block of the bf16 and f16 kernel, `HALF_THREADS`: 8 warps of 16 queries each.
const HALF_THREADS: u32 = 256;
/// Queries per block of the bf16 and f16 kernel.
const HALF_QUERIES: usize = 128;
/// The head dims the kernels are instantiated for (a smaller one is zero padded to the next), each
/// with the query rows a thread of the SIMT kernel owns (`RT`): a block takes `16 * RT` queries.
const VARIANTS: [(usize, usize); 3] = [(32, 8), (64, 8), (128, 4)];

/// Queries per block of the float32 tensor-core kernel (16 per warp).
const TC_QUERIES: usize = 64;

/// The Hopper kernel (`flash_attention_wgmma_*`): one warpgroup of 128 threads owns 64 queries;
/// shared memory holds q's 64 rows and two k and v tiles of `WGMMA_KEYS` rows, rows of 64 16-bit
/// elements, plus 1 KiB to start them on a 1024-byte boundary.
const WGMMA_THREADS: u32 = 128;
const WGMMA_QUERIES: usize = 64;
const WGMMA_KEYS: usize = 128;
const WGMMA_SHARED: usize = (WGMMA_QUERIES + 2 * 2 * WGMMA_KEYS) * 64 * 2 + 1024;

/// How one attention kernel is launched.
struct KernelChoice {
    name: String,
    /// Queries per block: the grid has `q_len / block_queries` blocks (rounded up) per batch entry.
    block_queries: usize,
    /// Dynamic shared memory per block, in bytes.
    shared: usize,
    threads: u32,
}

/// The kernel for head dim `hd` and `dtype` on `device`: for float32 the tensor-core kernel from
/// compute capability 8.0 on (TF32 `mma.sync`), else the SIMT one; for bf16 and f16 the Hopper
/// kernel (`wgmma`) where [`takes_wgmma`] says it applies, else the 16-bit `mma.sync` kernel (the
/// caller checks the device has it).
fn kernel_for(device: &CudaDevice, hd: usize, rows: usize, dtype: DType, wgmma: bool) -> KernelChoice {
    let float = std::mem::size_of::<f32>();
    if dtype.is_half() && wgmma {
        let name = format!("flash_attention_wgmma_{dtype}_hd64");
        return KernelChoice { name, block_queries: WGMMA_QUERIES, shared: WGMMA_SHARED, threads: WGMMA_THREADS };
    }
    if dtype.is_half() {
        // Two buffers of a k and a v tile, rows of hd + 8 elements; q borrows the second buffer.
        let shared = 4 * KEY_TILE * (hd + 8) * dtype.size_in_bytes();
        let name = format!("flash_attention_{dtype}_hd{hd}");
        return KernelChoice { name, block_queries: HALF_QUERIES, shared, threads: HALF_THREADS };
    }
    if device.facts().compute_capability.0 >= 8 {
        // q and k tiles with rows of hd + 16 floats, v with rows of hd + 4.
        let shared = (TC_QUERIES * (hd + 16) + KEY_TILE * (hd + 16) + KEY_TILE * (hd + 4)) * float;
        let name = format!("flash_attention_tc_hd{hd}");
        return KernelChoice { name, block_queries: TC_QUERIES, shared, threads: THREADS };
    }
    let block_queries = 16 * rows;
    // q^T, k^T, v and p^T tiles.
    let shared = (hd * block_queries + 2 * hd * KEY_TILE + KEY_TILE * block_queries) * float;
    KernelChoice { name: format!("flash_attention_hd{hd}"), block_queries, shared, threads: THREADS }
}

/// `AttnOperand`: a batch of matrices read through strides.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AttnOperand {
    ptr: u64,
    outer_stride: i64,
    inner_stride: i64,
    row_stride: i64,
    col_stride: i64,
}

/// `AttnParams`: one launch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct AttnParams {
    q: AttnOperand,
    k: AttnOperand,
    v: AttnOperand,
    mask: AttnOperand,
    out: AttnOperand,
    inner: i64,
    q_len: i32,
    kv_len: i32,
    head_dim: i32,
    value_dim: i32,
    scale_log2: f32,
    mask_kind: i32,
    causal: i32,
    mask_dtype: i32,
}

// SAFETY: plain `#[repr(C)]` data whose layout matches the CUDA C structs field for field.
unsafe impl DeviceRepr for AttnParams {}

/// How the batch entries of `layout` (expanded to q's batch dims) are addressed: entry `n` is at
/// `(n / inner) * outer_stride + (n % inner) * inner_stride`, where `inner` is the size of the last
/// batch dim (the heads). `None` when the dims before it cannot be merged into one stride.
fn batch_strides(layout: &Layout) -> Option<(i64, i64)> {
    let rank = layout.shape().len();
    if rank < 3 {
        return Some((0, 0));
    }
    let (shape, strides) = (&layout.shape()[..rank - 3], &layout.strides()[..rank - 3]);
    let outer: Vec<(usize, usize)> =
        shape.iter().zip(strides).map(|(&a, &b)| (a, b)).filter(|&(size, _)| size > 1).collect();
    let merges = outer.windows(2).all(|w| w[0].1 == w[1].1 * w[1].0);
    merges.then(|| (outer.last().map_or(0, |d| d.1 as i64), layout.strides()[rank - 3] as i64))
}

/// The kernel's view of one operand expanded to `shape` (q's batch dims, its own last two),
/// read in place when its batch dims allow, else from a dense copy kept alive in `copies`.
pub(super) fn operand(
    device: &Arc<CudaDevice>,
    input: Input,
    shape: &[usize],
    copies: &mut Vec<Dense>,
) -> Result<AttnOperand, CudaError> {
    let (buffer, layout) = input.tensor();
    let full = layout.expand(shape);
    let rank = shape.len();
    let (ptr, layout, (outer_stride, inner_stride)) = match batch_strides(&full) {
        Some(batch) => (buffer.ptr_at(full.offset()), full, batch),
        None => {
            let dense = Dense::of(device, Input::Tensor { buffer, layout: &full })?;
            let layout = dense.layout();
            let batch = batch_strides(&layout).expect("a dense layout merges");
            let ptr = dense.ptr;
            copies.push(dense);
            (ptr, layout, batch)
        }
    };
    Ok(AttnOperand {
        ptr,
        outer_stride,
        inner_stride,
        row_stride: layout.strides()[rank - 2] as i64,
        col_stride: layout.strides()[rank - 1] as i64,
    })
}

/// `softmax(q @ k^T * scale [+ mask]) @ v` for `inputs = [q, k, v (, mask)]`.
pub(super) fn attention(
    device: &Arc<CudaDevice>,
    inputs: &[Input],
    params: AttentionParams,
) -> Result<CudaBuffer, CudaError> {
    let (q, k, v) = (inputs[0].tensor().1.shape(), inputs[1].tensor().1.shape(), inputs[2].tensor().1.shape());
    let sizes = AttentionSizes::of(q, k, v);
    let dtype = inputs[0].tensor().0.dtype();
    if dtype.is_half() && !has_half_kernels(device) {
        return composed_attention(&Plain(device), inputs, params);
    }
    let out = CudaBuffer::alloc_of(device, dtype, sizes.batch * sizes.q_len * sizes.value_dim)?;
    let shape = [&q[..q.len() - 1], &[sizes.value_dim]].concat();
    attention_into(device, inputs, params, &out, &Layout::contiguous(&shape))?;
    Ok(out)
}

/// `value`, dense, written into `out` through `out_layout`, which is dense in the order of its
/// strides: the dense copy of `value` seen in that order is what the memory holds.
fn write_in_layout(
    device: &Arc<CudaDevice>,
    value: &CudaBuffer,
    out: &CudaBuffer,
    out_layout: &Layout,
) -> Result<(), CudaError> {
    if out_layout.is_contiguous() {
        return out.write_from(out_layout.offset(), value, 0, value.len());
    }
    let seen = out_layout.dense_in_memory_order();
    let memory = device.copy(Input::Tensor { buffer: value, layout: &seen }, seen.shape(), value.dtype())?;
    out.write_from(out_layout.offset(), &memory, 0, memory.len())
}

/// Whether the Hopper kernel runs this attention: a device of compute capability 9.0 (the
/// kernel's `wgmma` exists there alone), 16-bit operands, q, k, v and output rows of exactly 64
/// contiguous elements, and every row of every batch entry starting on a 16-byte boundary (the
/// kernel copies rows in 16-byte pieces into the tensor cores' swizzled layout, and writes the
/// output two elements at a time). Any other attention takes the `mma.sync` kernel, which reads
/// any strides.
fn takes_wgmma(device: &CudaDevice, dtype: DType, sizes: &AttentionSizes, operands: [&AttnOperand; 4]) -> bool {
    let aligned = |a: &AttnOperand| {
        a.col_stride == 1
            && [a.row_stride, a.outer_stride, a.inner_stride].iter().all(|s| s % 8 == 0)
            && a.ptr.is_multiple_of(16)
    };
    device.facts().compute_capability == (9, 0)
        && dtype.is_half()
        && sizes.head_dim == 64
        && sizes.value_dim == 64
        && operands.into_iter().all(aligned)
}

/// Whether `device` has the 16-bit tensor cores the bf16 and f16 kernels run on (`mma.m16n8k16`
/// with bf16 operands: compute capability 8.0).
fn has_half_kernels(device: &CudaDevice) -> bool {
    device.facts().compute_capability.0 >= 8
}

/// [`attention`] written into `out` through `out_layout` (compiled code's planned buffer, dense
/// in some order of its dims): rows of adjacent elements, whose batch dims merge as an operand's
/// do (see `batch_strides`).
pub(crate) fn attention_into(
    device: &Arc<CudaDevice>,
    inputs: &[Input],
    AttentionParams { mask, causal, scale }: AttentionParams,
    out: &CudaBuffer,
    out_layout: &Layout,
) -> Result<(), CudaError> {
    let (q, k, v) = (inputs[0].tensor().1.shape(), inputs[1].tensor().1.shape(), inputs[2].tensor().1.shape());
    let sizes = AttentionSizes::of(q, k, v);
    let len = sizes.batch * sizes.q_len * sizes.value_dim;
    debug_assert!(out.len() >= len, "the planned buffer holds the attention output");
    if len == 0 {
        return Ok(());
    }
    let rank = q.len();
    let out_strides = out_layout.strides();
    let (Some((outer_stride, inner_stride)), 1) = (batch_strides(out_layout), out_strides[rank - 1]) else {
        return Err(CudaError::new(format!(
            "the CUDA attention kernel writes rows of adjacent elements whose batch dims merge, \
             got strides {out_strides:?}"
        )));
    };
    let out_op = AttnOperand {
        ptr: out.ptr_at(out_layout.offset()),
        outer_stride,
        inner_stride,
        row_stride: out_strides[rank - 2] as i64,
        col_stride: 1,
    };
    let dtype = inputs[0].tensor().0.dtype();
    if dtype.is_half() && !has_half_kernels(device) {
        // Older GPUs: the float32 math path, copied into the planned buffer.
        let params = AttentionParams { mask, causal, scale };
        let value = composed_attention(&Plain(device), inputs, params)?;
        return write_in_layout(device, &value, out, out_layout);
    }
    let widest = sizes.head_dim.max(sizes.value_dim);
    let Some(&(hd, rows)) = VARIANTS.iter().find(|&&(d, _)| d >= widest) else {
        return Err(CudaError::new(format!(
            "the CUDA attention kernel takes head dims up to {}, got {widest}",
            VARIANTS[VARIANTS.len() - 1].0
        )));
    };
    if sizes.q_len > i32::MAX as usize || sizes.kv_len > i32::MAX as usize || sizes.batch > 65535 {
        return Err(CudaError::new(format!(
            "the CUDA attention kernel takes up to 2^31 queries and keys and 65535 batch entries (heads included), \
             got {} queries, {} keys, {} entries",
            sizes.q_len, sizes.kv_len, sizes.batch
        )));
    }
    let mut copies = Vec::new();
    let mut view = |input: Input, last: &[usize]| operand(device, input, &[&q[..rank - 2], last].concat(), &mut copies);
    let (q_op, k_op, v_op) =
        (view(inputs[0], &q[rank - 2..])?, view(inputs[1], &k[rank - 2..])?, view(inputs[2], &v[rank - 2..])?);
    let mask_op = match inputs.get(3) {
        None => AttnOperand::default(),
        Some(&m) => view(m, &[sizes.q_len, sizes.kv_len])?,
    };
    let wgmma = takes_wgmma(device, dtype, &sizes, [&q_op, &k_op, &v_op, &out_op]);
    let KernelChoice { name, block_queries, shared, threads } = kernel_for(device, hd, rows, dtype, wgmma);
    let inner = if rank >= 3 { q[rank - 3] } else { 1 };
    let params = AttnParams {
        q: q_op,
        k: k_op,
        v: v_op,
        mask: mask_op,
        out: out_op,
        inner: inner.max(1) as i64,
        q_len: sizes.q_len as i32,
        kv_len: sizes.kv_len as i32,
        head_dim: sizes.head_dim as i32,
        value_dim: sizes.value_dim as i32,
        scale_log2: scale * std::f32::consts::LOG2_E,
        mask_kind: match mask {
            AttentionMask::None => 0,
            AttentionMask::Boolean => 1,
            AttentionMask::Additive => 2,
        },
        causal: i32::from(causal),
        mask_dtype: inputs.get(3).map_or(0, |m| dtype_code(m.tensor().0.dtype())),
    };
    let function = device.eager_kernel("attention", &name)?;
    // Past 48 KiB a kernel must opt in to more shared memory.
    function
        .set_attribute(CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared as i32)?;
    let config = LaunchConfig {
        grid_dim: (sizes.q_len.div_ceil(block_queries) as u32, sizes.batch as u32, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: shared as u32,
    };
    let mut launch = device.stream().launch_builder(&function);
    launch.arg(&params);
    // SAFETY: `AttnParams` mirrors the kernel's struct; every pointer it holds addresses a buffer
    // that outlives the launch on this stream (`copies` is dropped after queueing, and frees are
    // stream ordered), and the kernel reads each within the sizes and strides given.
    unsafe { launch.launch(config) }?;
    drop(copies);
    Ok(())
}
