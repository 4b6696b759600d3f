//! A scalar constant baked into a graph (`x * 2.0`), compared and hashed by its bits so that graphs
//! containing it can be cache keys, as Dynamo guards on Python constants.

use std::fmt;
use std::hash::{Hash, Hasher};

/// An `f32` that compares and hashes by bit pattern (so `NaN == NaN` and `0.0 != -0.0`).
#[derive(Clone, Copy, Debug)]
pub struct Scalar(pub f32);

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Scalar {}

impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{:?}` keeps a trailing `.0` on whole numbers, so `2.0` never reads as the integer `2`.
        write!(f, "{:?}", self.0)
    }
}
