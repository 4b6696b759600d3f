//! Kernel parameters shared with `kernels/eager.cu`: `#[repr(C)]` twins of its structs, and the
//! host-side preparation of shapes and strides (merging dims, fast-division constants) that lets
//! one strided kernel read any layout.

use cudarc::driver::DeviceRepr;

use crate::dtype::DType;

/// The most dimensions a strided kernel indexes after merging; more is an error.
pub(crate) const MAX_DIMS: usize = 8;

/// How the kernels name a dtype (`DTYPE_F32` ... in `kernels/dtypes.cuh`).
pub(crate) fn dtype_code(dtype: DType) -> i32 {
    match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        DType::F8E4M3 => 3,
        DType::F8E5M2 => 4,
    }
}

/// `DenseIn`: a pointer to contiguous elements of a dtype, or (null) a value broadcast everywhere.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DenseIn {
    pub ptr: u64,
    pub value: f32,
    pub dtype: i32,
}

/// `StridedIn`: a pointer with strides along the output's dims (innermost first), or a value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StridedIn {
    pub ptr: u64,
    pub value: f32,
    pub dtype: i32,
    pub strides: [i64; MAX_DIMS],
}

/// `RowTypes`: the dtypes of a row kernel's input and output.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RowTypes {
    pub input: i32,
    pub output: i32,
}

impl RowTypes {
    /// The codes of `input` and `output`.
    pub(crate) fn new(input: DType, output: DType) -> RowTypes {
        RowTypes { input: dtype_code(input), output: dtype_code(output) }
    }
}

/// `Geometry`: sizes innermost first with magic numbers for 31-bit fast division.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Geometry {
    pub rank: i32,
    pub small: i32,
    pub sizes: [i64; MAX_DIMS],
    pub magic: [u32; MAX_DIMS],
    pub shift: [u32; MAX_DIMS],
}

/// `ReduceArgs`: one reduction launch (see the kernel for the meaning of each field).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReduceArgs {
    pub input: u64,
    pub out: u64,
    pub n_out: i64,
    pub size: i64,
    pub stride: i64,
    pub chunk: i64,
    pub scale: f32,
    pub columns: i32,
    pub vec: i32,
    pub in_dtype: i32,
    pub out_dtype: i32,
    pub outputs: Geometry,
    pub output_strides: [i64; MAX_DIMS],
}

// SAFETY: plain `#[repr(C)]` data whose layout matches the CUDA C structs field for field.
unsafe impl DeviceRepr for DenseIn {}
// SAFETY: as above.
unsafe impl DeviceRepr for StridedIn {}
// SAFETY: as above.
unsafe impl DeviceRepr for Geometry {}
// SAFETY: as above.
unsafe impl DeviceRepr for ReduceArgs {}
// SAFETY: as above.
unsafe impl DeviceRepr for RowTypes {}

// The CUDA C compiler lays the structs out with the same sizes (checked against nvcc's sizeof).
const _: () = assert!(size_of::<DenseIn>() == 16);
const _: () = assert!(size_of::<StridedIn>() == 16 + 8 * MAX_DIMS);
const _: () = assert!(size_of::<Geometry>() == 8 + 16 * MAX_DIMS);
const _: () = assert!(size_of::<ReduceArgs>() == 72 + size_of::<Geometry>() + 8 * MAX_DIMS);
const _: () = assert!(size_of::<RowTypes>() == 8);

/// Largest linear index the fast 32-bit division handles.
const SMALL_LIMIT: usize = 1 << 31;

impl Geometry {
    /// The geometry of `shape` (outermost first, as the engine stores shapes). The caller has
    /// merged dims so that at most [`MAX_DIMS`] remain.
    pub fn new(shape: &[usize]) -> Geometry {
        debug_assert!(shape.len() <= MAX_DIMS);
        let mut g = Geometry {
            rank: shape.len() as i32,
            small: i32::from(shape.iter().product::<usize>() < SMALL_LIMIT),
            ..Geometry::default()
        };
        for (d, &size) in shape.iter().rev().enumerate() {
            g.sizes[d] = size as i64;
            if g.small == 1 {
                (g.magic[d], g.shift[d]) = magic_divider(size as u32);
            }
        }
        g
    }
}

/// `(magic, shift)` such that `n / d == (umulhi(n, magic) + n) >> shift` for every `n < 2^31`
/// (the round-up method of ATen's `IntDivider`).
fn magic_divider(d: u32) -> (u32, u32) {
    let d = d.max(1) as u64;
    let shift = (0..32).find(|&s| (1u64 << s) >= d).unwrap_or(32);
    let magic = ((1u64 << 32) * ((1u64 << shift) - d)) / d + 1;
    (magic as u32, shift as u32)
}

/// Strides innermost first, padded with zeros: the order `StridedIn` and `ReduceArgs` use.
pub(crate) fn reversed(strides: &[i64]) -> [i64; MAX_DIMS] {
    let mut out = [0; MAX_DIMS];
    for (d, &s) in strides.iter().rev().enumerate() {
        out[d] = s;
    }
    out
}

/// Drops size-1 dims and merges each pair of neighbouring dims that every operand steps through
/// as one (outer stride = inner stride * inner size), as ATen's TensorIterator coalesces
/// dimensions. `strides[k]` are operand `k`'s strides along `shape`. A broadcast `[4096, 4096] +
/// [4096]` stays two dims; a contiguous `[8, 16, 32] + [8, 16, 32]` becomes one.
pub(crate) fn merge_dims(shape: &[usize], strides: &[Vec<i64>]) -> (Vec<usize>, Vec<Vec<i64>>) {
    let mut merged_shape: Vec<usize> = Vec::new();
    let mut merged: Vec<Vec<i64>> = vec![Vec::new(); strides.len()];
    for (d, &size) in shape.iter().enumerate() {
        if size == 1 {
            continue;
        }
        let joins_previous = merged_shape.last().is_some()
            && strides
                .iter()
                .zip(&merged)
                .all(|(s, m)| *m.last().expect("same length as merged_shape") == s[d] * size as i64);
        if joins_previous {
            *merged_shape.last_mut().expect("checked") *= size;
            for (m, s) in merged.iter_mut().zip(strides) {
                *m.last_mut().expect("checked") = s[d];
            }
        } else {
            merged_shape.push(size);
            for (m, s) in merged.iter_mut().zip(strides) {
                m.push(s[d]);
            }
        }
    }
    (merged_shape, merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_division_matches_integer_division() {
        for d in [1u32, 2, 3, 7, 10, 255, 4096, 4097, 1 << 20, (1 << 31) - 1] {
            let (magic, shift) = magic_divider(d);
            for n in [0u32, 1, d - 1, d, d + 1, 12345, (1 << 31) - 1] {
                let q = ((((n as u64) * (magic as u64)) >> 32) + n as u64) >> shift;
                assert_eq!(q, (n / d) as u64, "{n} / {d}");
            }
        }
    }

    #[test]
    fn merging_keeps_broadcasts_and_joins_contiguous_runs() {
        let (shape, strides) = merge_dims(&[8, 16, 32], &[vec![512, 32, 1], vec![512, 32, 1]]);
        assert_eq!((shape, strides), (vec![4096], vec![vec![1], vec![1]]));
        let (shape, strides) = merge_dims(&[4096, 1, 4096], &[vec![4096, 4096, 1], vec![0, 0, 1]]);
        assert_eq!((shape, strides), (vec![4096, 4096], vec![vec![4096, 1], vec![0, 1]]));
        let (shape, _) = merge_dims(&[1, 1], &[vec![1, 1]]);
        assert!(shape.is_empty());
    }
}
