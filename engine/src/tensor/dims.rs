//! The sizes a symbolic tensor carries, kept inside the tensor itself when there are few of them.
//!
//! A dynamo capture makes a symbolic tensor for every op of every call; copying its shape into a
//! `Vec` of its own cost one heap allocation and one free per op on the cached call's path.

use std::ops::Deref;

/// Ranks up to this are stored inline (the workbook's tensors have at most 4 dimensions); the
/// heap form is for unusual code.
const INLINE: usize = 6;

/// A shape, inline up to [`INLINE`] dimensions.
pub(crate) enum Dims {
    /// The first `rank` entries of `sizes`.
    Inline { rank: u8, sizes: [usize; INLINE] },
    /// More dimensions than fit inline.
    Heap(Box<[usize]>),
}

impl Dims {
    /// A copy of `shape`.
    pub fn new(shape: &[usize]) -> Dims {
        if shape.len() > INLINE {
            return Dims::Heap(shape.into());
        }
        // Element by element: a copy of a slice of unknown length calls `memcpy`.
        let sizes = std::array::from_fn(|d| shape.get(d).copied().unwrap_or(0));
        Dims::Inline { rank: shape.len() as u8, sizes }
    }
}

impl Deref for Dims {
    type Target = [usize];

    fn deref(&self) -> &[usize] {
        match self {
            Dims::Inline { rank, sizes } => &sizes[..*rank as usize],
            Dims::Heap(sizes) => sizes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Dims;

    #[test]
    fn holds_any_rank() {
        for rank in 0..10 {
            let shape: Vec<usize> = (1..=rank).collect();
            assert_eq!(&*Dims::new(&shape), shape.as_slice());
        }
    }
}
