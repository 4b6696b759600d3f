//! Launching the attention backward kernels (`kernels/attention_backward.cu`), the analogue of the
//! launcher behind ATen's `_scaled_dot_product_flash_attention_backward`: the row statistics,
//! then `dq` (a warp per query row) and `dk`, `dv` (a warp per key row), every operand read in
//! place through its strides as the forward reads them. The three gradients are written densely,
//! one after the other, into one buffer.

use std::sync::Arc;

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use super::attention::{AttnOperand, operand};
use crate::device::cuda::Input;
use crate::device::cuda::buffer::CudaBuffer;
use crate::device::cuda::context::CudaDevice;
use crate::device::cuda::error::CudaError;
use crate::op::{AttentionMask, AttentionParams, AttentionSizes};

/// Warps per block, a row each (`WARPS` in the kernels).
const WARPS: usize = 4;
/// The widest head the kernels keep in shared memory and registers (`MAX_HD`).
const MAX_HEAD_DIM: usize = 128;

/// `AttnBackwardParams`: one launch of each kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct AttnBackwardParams {
    grad_out: AttnOperand,
    q: AttnOperand,
    k: AttnOperand,
    v: AttnOperand,
    out: AttnOperand,
    mask: AttnOperand,
    dq: u64,
    dk: u64,
    dv: u64,
    stats: u64,
    inner: i64,
    batch: i64,
    q_len: i32,
    kv_len: i32,
    head_dim: i32,
    value_dim: i32,
    scale: f32,
    mask_kind: i32,
    causal: i32,
}

// SAFETY: plain `#[repr(C)]` data whose layout matches the CUDA C struct field for field.
unsafe impl DeviceRepr for AttnBackwardParams {}

/// The packed gradients' length for `inputs = [grad_out, q, k, v, ...]`.
fn packed_len(inputs: &[Input]) -> usize {
    (1..4).map(|i| inputs[i].tensor().1.numel()).sum()
}

/// The gradients of `q`, `k` and `v`, flattened and joined, for
/// `inputs = [grad_out, q, k, v, out (, mask)]`.
pub(super) fn attention_backward(
    device: &Arc<CudaDevice>,
    inputs: &[Input],
    params: AttentionParams,
) -> Result<CudaBuffer, CudaError> {
    let packed = CudaBuffer::alloc(device, packed_len(inputs))?;
    attention_backward_into(device, inputs, params, &packed)?;
    Ok(packed)
}

/// [`attention_backward`] written at the start of `packed` (compiled code's planned buffer, which
/// holds at least the packed gradients). Every element is written: a row of `dq` with no keys,
/// or of `dk` and `dv` with no queries, is zeros.
pub(crate) fn attention_backward_into(
    device: &Arc<CudaDevice>,
    inputs: &[Input],
    AttentionParams { mask, causal, scale }: AttentionParams,
    packed: &CudaBuffer,
) -> Result<(), CudaError> {
    let [g, q, k, v] = [0, 1, 2, 3].map(|i| inputs[i].tensor().1.shape());
    let sizes = AttentionSizes::of(q, k, v);
    let AttentionSizes { batch, q_len, kv_len, head_dim, value_dim } = sizes;
    let (nq, nk, nv) = (batch * q_len * head_dim, batch * kv_len * head_dim, batch * kv_len * value_dim);
    debug_assert!(packed.len() >= packed_len(inputs), "the planned buffer holds the packed gradients");
    if nq + nk + nv == 0 {
        return Ok(());
    }
    if head_dim.max(value_dim) > MAX_HEAD_DIM {
        return Err(CudaError::new(format!(
            "the CUDA attention backward takes head dims up to {MAX_HEAD_DIM}, got {}",
            head_dim.max(value_dim)
        )));
    }
    if q_len > i32::MAX as usize || kv_len > i32::MAX as usize {
        return Err(CudaError::new(format!(
            "the CUDA attention backward takes up to 2^31 queries and keys, got {q_len} and {kv_len}"
        )));
    }
    let rank = q.len();
    let mut copies = Vec::new();
    let mut view = |input: Input, last: &[usize]| operand(device, input, &[&q[..rank - 2], last].concat(), &mut copies);
    let grad_out = view(inputs[0], &g[rank - 2..])?;
    let (q_op, k_op, v_op) =
        (view(inputs[1], &q[rank - 2..])?, view(inputs[2], &k[rank - 2..])?, view(inputs[3], &v[rank - 2..])?);
    let out_op = view(inputs[4], &g[rank - 2..])?;
    let mask_op = match inputs.get(5) {
        None => AttnOperand::default(),
        Some(&m) => view(m, &[q_len, kv_len])?,
    };
    let stats = CudaBuffer::alloc(device, (batch * q_len * 2).max(1))?;
    let inner = if rank >= 3 { q[rank - 3] } else { 1 };
    let params = AttnBackwardParams {
        grad_out,
        q: q_op,
        k: k_op,
        v: v_op,
        out: out_op,
        mask: mask_op,
        dq: packed.ptr(),
        dk: packed.ptr_at(nq),
        dv: packed.ptr_at(nq + nk),
        stats: stats.ptr(),
        inner: inner.max(1) as i64,
        batch: batch as i64,
        q_len: q_len as i32,
        kv_len: kv_len as i32,
        head_dim: head_dim as i32,
        value_dim: value_dim as i32,
        scale,
        mask_kind: match mask {
            AttentionMask::None => 0,
            AttentionMask::Boolean => 1,
            AttentionMask::Additive => 2,
        },
        causal: i32::from(causal),
    };
    let config = |rows: usize| LaunchConfig {
        grid_dim: (rows.div_ceil(WARPS) as u32, 1, 1),
        block_dim: (32 * WARPS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    if (batch * q_len.max(kv_len)).div_ceil(WARPS) > i32::MAX as usize {
        return Err(CudaError::new("the CUDA attention backward takes up to 2^31 blocks of rows".to_string()));
    }
    for (kernel, rows) in [
        ("attention_backward_stats", batch * q_len),
        ("attention_backward_dq", batch * q_len),
        ("attention_backward_dkdv", batch * kv_len),
    ] {
        if rows == 0 {
            continue;
        }
        let function = device.eager_kernel("attention_backward", kernel)?;
        let mut launch = device.stream().launch_builder(&function);
        launch.arg(&params);
        // SAFETY: `AttnBackwardParams` mirrors the kernels' struct; every pointer it holds
        // addresses a buffer that outlives the launches on this stream (`copies` and `stats` are
        // dropped after queueing, and frees are stream ordered), and each kernel reads and writes
        // within the sizes and strides given (a warp per row, rows < batch * len).
        unsafe { launch.launch(config(rows)) }?;
    }
    drop(copies);
    drop(stats);
    Ok(())
}
