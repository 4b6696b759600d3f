//! Sizes, strides and offsets: how an N-d tensor maps onto a flat buffer, as in PyTorch's
//! `TensorImpl` (`sizes()`, `strides()`, `storage_offset()`).
//!
//! Views (reshape of a contiguous tensor, permute, expand, slice) change only the layout and share
//! the buffer; kernels read any layout through [`Layout::offsets`].

/// The most elements a tensor may have: its `f32` buffer's size in bytes must fit in an `isize`,
/// as every allocation must.
pub const MAX_NUMEL: usize = isize::MAX as usize / std::mem::size_of::<f32>();

/// The number of elements in a tensor of this shape (1 for a 0-d tensor), or `None` when the
/// product overflows or exceeds [`MAX_NUMEL`]. Shapes entering the engine are checked with it
/// (op shape rules, constructors), so that a size product never wraps around in a release build.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).filter(|&n| n <= MAX_NUMEL)
}

/// The number of elements in a tensor of this shape (1 for a 0-d tensor).
///
/// # Panics
///
/// When the shape has more than [`MAX_NUMEL`] elements; shapes the engine has accepted never do
/// (see [`checked_numel`]).
pub fn numel(shape: &[usize]) -> usize {
    checked_numel(shape).unwrap_or_else(|| panic!("shape {shape:?} has more elements than fit in memory"))
}

/// Row-major (C-order) strides for a shape, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut step: usize = 1;
    for (stride, &size) in strides.iter_mut().zip(shape).rev() {
        *stride = step;
        // Saturating: a shape with a zero-size dim holds no elements however large the others
        // (`[2^62, 0, 2^62]`), so its strides are never used to address one, and must not
        // overflow.
        step = step.saturating_mul(size.max(1));
    }
    strides
}

/// The shape two shapes broadcast to under NumPy/PyTorch rules, or `None` when they do not.
///
/// Shapes are aligned at their last dimension; each pair of sizes must be equal or contain a 1.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    crate::wires::trip(crate::wires::Wire::BroadcastShapes);
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() { 1 } else { a[i - (rank - a.len())] };
        let db = if i < rank - b.len() { 1 } else { b[i - (rank - b.len())] };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// Sizes, strides and starting offset of a tensor's view onto its buffer, in elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
}

impl Layout {
    /// A dense row-major layout starting at element 0.
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout { shape: shape.to_vec(), strides: contiguous_strides(shape), offset: 0 }
    }

    /// A layout from explicit parts; the caller guarantees every index stays inside the buffer.
    pub fn new(shape: Vec<usize>, strides: Vec<usize>, offset: usize) -> Self {
        debug_assert_eq!(shape.len(), strides.len());
        Layout { shape, strides, offset }
    }

    /// Sizes of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Elements to step over to move by one along each dimension (0 for broadcast dimensions).
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Index of the first element in the buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// True when elements are laid out densely in row-major order (dimensions of size 1 may have
    /// any stride, as in PyTorch).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for (&size, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if size != 1 && stride != expected {
                return false;
            }
            expected *= size;
        }
        true
    }

    /// The dims from the largest stride to the smallest (ties in dim order): the order in which
    /// memory holds them, PyTorch's stride order. A layout dense in that order is the dense
    /// layout of `shape` permuted by it.
    pub fn memory_order(&self) -> Vec<usize> {
        let mut dims: Vec<usize> = (0..self.shape.len()).collect();
        dims.sort_by_key(|&d| std::cmp::Reverse(self.strides[d]));
        dims
    }

    /// A view of a dense row-major tensor of this layout's shape with its dims in this layout's
    /// memory order: copying a tensor through it lays its elements out in memory as this layout
    /// holds them (for a layout dense in some order), as PyTorch's `empty_like` keeps a stride
    /// order.
    pub fn dense_in_memory_order(&self) -> Layout {
        Layout::contiguous(&self.shape).permute(&self.memory_order())
    }

    /// The layout with dimensions reordered: output dimension `i` is input dimension `dims[i]`.
    /// `dims` must be a permutation (checked by the op before calling this).
    pub fn permute(&self, dims: &[usize]) -> Layout {
        Layout {
            shape: dims.iter().map(|&d| self.shape[d]).collect(),
            strides: dims.iter().map(|&d| self.strides[d]).collect(),
            offset: self.offset,
        }
    }

    /// The layout broadcast to `shape` (stride 0 on new and size-1 dimensions). The op checks
    /// that the shapes are compatible first.
    pub fn expand(&self, shape: &[usize]) -> Layout {
        let lead = shape.len() - self.shape.len();
        let strides = shape
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                if i < lead {
                    0
                } else {
                    let j = i - lead;
                    if self.shape[j] == size { self.strides[j] } else { 0 }
                }
            })
            .collect();
        Layout { shape: shape.to_vec(), strides, offset: self.offset }
    }

    /// The layout of `start..end` with `step` along `dim`; bounds are checked by the op.
    pub fn slice(&self, dim: usize, start: usize, end: usize, step: usize) -> Layout {
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        shape[dim] = (end.saturating_sub(start)).div_ceil(step);
        strides[dim] = self.strides[dim] * step;
        Layout { shape, strides, offset: self.offset + start * self.strides[dim] }
    }

    /// A view with a new shape over the same elements, or `None` when the strides cannot express
    /// it and a copy is needed. As PyTorch's `computeStride`: the old dims fall into chunks that
    /// are contiguous among themselves, and each chunk may be split or merged freely (a slice of
    /// a row splits into heads without a copy; a transposed matrix cannot be flattened).
    pub fn reshape(&self, shape: &[usize]) -> Option<Layout> {
        if self.is_contiguous() || self.numel() == 0 || self.shape.is_empty() {
            return Some(Layout { shape: shape.to_vec(), strides: contiguous_strides(shape), offset: self.offset });
        }
        let mut strides = vec![0; shape.len()];
        let mut view_d = shape.len();
        let (mut chunk_stride, mut chunk_numel, mut view_numel) = (self.strides[self.shape.len() - 1], 1, 1);
        for d in (0..self.shape.len()).rev() {
            chunk_numel *= self.shape[d];
            let chunk_ends = d == 0 || (self.shape[d - 1] != 1 && self.strides[d - 1] != chunk_numel * chunk_stride);
            if !chunk_ends {
                continue;
            }
            while view_d > 0 && (view_numel < chunk_numel || shape[view_d - 1] == 1) {
                view_d -= 1;
                strides[view_d] = view_numel * chunk_stride;
                view_numel *= shape[view_d];
            }
            if view_numel != chunk_numel {
                return None;
            }
            if d > 0 {
                (chunk_stride, chunk_numel, view_numel) = (self.strides[d - 1], 1, 1);
            }
        }
        (view_d == 0).then(|| Layout { shape: shape.to_vec(), strides, offset: self.offset })
    }

    /// Buffer offsets of every element in row-major order of the logical index.
    pub fn offsets(&self) -> Offsets<'_> {
        self.offsets_from(0)
    }

    /// Buffer offsets starting at the element with row-major position `start`, so that a range of
    /// the output can be processed by one thread.
    pub fn offsets_from(&self, start: usize) -> Offsets<'_> {
        let mut index = vec![0; self.shape.len()];
        let mut rest = start;
        for (i, &size) in self.shape.iter().enumerate().rev() {
            if size > 0 {
                index[i] = rest % size;
                rest /= size;
            }
        }
        let current = self.offset + index.iter().zip(&self.strides).map(|(i, s)| i * s).sum::<usize>();
        Offsets { layout: self, index, current, remaining: self.numel().saturating_sub(start) }
    }
}

/// Iterator over the buffer offsets of a layout's elements in row-major order.
pub struct Offsets<'a> {
    layout: &'a Layout,
    index: Vec<usize>,
    current: usize,
    remaining: usize,
}

impl Iterator for Offsets<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let out = self.current;
        // Odometer step: bump the last dimension, carrying into earlier ones.
        for d in (0..self.index.len()).rev() {
            self.index[d] += 1;
            self.current += self.layout.strides[d];
            if self.index[d] < self.layout.shape[d] {
                break;
            }
            self.current -= self.layout.strides[d] * self.index[d];
            self.index[d] = 0;
        }
        Some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Offsets<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_views_strided_layouts_where_pytorch_does() {
        // A band of columns of a [2, 3, 12] buffer, split into 2 heads of 2: a view.
        let band = Layout::contiguous(&[2, 3, 12]).slice(2, 4, 8, 1);
        let heads = band.reshape(&[2, 3, 2, 2]).expect("the band's last dim splits");
        assert_eq!((heads.strides(), heads.offset()), (&[36, 12, 2, 1][..], 4));
        let flat: Vec<usize> = heads.offsets().collect();
        assert_eq!(flat, band.offsets().collect::<Vec<_>>());
        // Its rows merge (one stride steps over both), but a row does not run into the next, and
        // a transpose does not flatten.
        assert_eq!(band.reshape(&[6, 4]).expect("rows merge").strides(), &[12, 1]);
        assert!(band.reshape(&[24]).is_none());
        assert!(Layout::contiguous(&[3, 4]).permute(&[1, 0]).reshape(&[12]).is_none());
        // A transpose keeps its dims apart, so each may split or gain size-1 dims.
        let t = Layout::contiguous(&[4, 6]).permute(&[1, 0]);
        let split = t.reshape(&[2, 3, 1, 4]).expect("splitting one dim of a transpose is a view");
        assert_eq!(split.offsets().collect::<Vec<_>>(), t.offsets().collect::<Vec<_>>());
    }

    #[test]
    fn broadcasting_follows_numpy_rules() {
        assert_eq!(broadcast_shapes(&[8, 1, 3], &[4, 3]), Some(vec![8, 4, 3]));
        assert_eq!(broadcast_shapes(&[], &[2, 2]), Some(vec![2, 2]));
        assert_eq!(broadcast_shapes(&[2, 3], &[3, 2]), None);
    }

    #[test]
    fn offsets_walk_a_transposed_view() {
        let t = Layout::contiguous(&[2, 3]).permute(&[1, 0]);
        assert_eq!(t.offsets().collect::<Vec<_>>(), vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(t.offsets_from(3).collect::<Vec<_>>(), vec![4, 2, 5]);
        assert!(!t.is_contiguous());
    }

    #[test]
    fn slices_and_expands_compose() {
        let s = Layout::contiguous(&[4, 5]).slice(1, 1, 5, 2);
        assert_eq!(s.shape(), &[4, 2]);
        assert_eq!(s.offsets().take(4).collect::<Vec<_>>(), vec![1, 3, 6, 8]);
        let e = Layout::contiguous(&[3, 1]).expand(&[2, 3, 4]);
        assert_eq!(e.strides(), &[0, 1, 0]);
    }
}
