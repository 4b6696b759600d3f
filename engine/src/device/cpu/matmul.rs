//! Matrix products through `matrixmultiply`'s SGEMM, which reads any strides, so transposed and
//! broadcast operands need no copy (the role MKL or OpenBLAS play for PyTorch on CPU).

use super::Input;
use crate::layout::{Layout, numel};

/// `a @ b` over broadcast batch dimensions into a dense `out_shape` buffer.
pub(super) fn matmul(a: Input, b: Input, out_shape: &[usize]) -> Vec<f32> {
    let mut out = vec![0.0f32; numel(out_shape)];
    matmul_into(a, b, out_shape, &mut out);
    out
}

/// `a @ b` written into `out`, a dense `out_shape` buffer whose old contents are ignored: how
/// compiled code calls matmul as an extern kernel into memory its call plan owns.
pub(crate) fn matmul_into(a: Input, b: Input, out_shape: &[usize], out: &mut [f32]) {
    let ((ad, al), (bd, bl)) = (a.tensor(), b.tensor());
    let rank = out_shape.len();
    let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
    let k = al.shape()[al.shape().len() - 1];
    let batch = &out_shape[..rank - 2];
    // Broadcast each operand to batch + its own matrix dims, then walk the batch offsets.
    let a_full = al.expand(&[batch, &[m, k]].concat());
    let b_full = bl.expand(&[batch, &[k, n]].concat());
    let batch_layout = |l: &Layout| Layout::new(batch.to_vec(), l.strides()[..batch.len()].to_vec(), l.offset());
    let (a_batch, b_batch) = (batch_layout(&a_full), batch_layout(&b_full));
    let (sa, sb) = (&a_full.strides()[batch.len()..], &b_full.strides()[batch.len()..]);
    assert_eq!(out.len(), numel(out_shape), "matmul_into: the output buffer must match the output shape");
    if k == 0 {
        out.fill(0.0);
        return;
    }
    for ((ao, bo), c) in a_batch.offsets().zip(b_batch.offsets()).zip(out.chunks_mut((m * n).max(1))) {
        // SAFETY: the layouts were checked against the buffers' shapes by shape inference, so every
        // (row, col) offset read stays inside `ad`/`bd`; `c` holds exactly m * n elements.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                ad.as_ptr().add(ao),
                sa[0] as isize,
                sa[1] as isize,
                bd.as_ptr().add(bo),
                sb[0] as isize,
                sb[1] as isize,
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    }
}
