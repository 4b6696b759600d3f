//! The argument and return types a compiled closure may have: one tensor, a tuple of tensors, or
//! a `Vec` of them.

use crate::tensor::Tensor;

/// What a compiled closure takes. The closure receives owned tensors (cheap clones); callers of
/// [`Compiled::call`](super::Compiled::call) pass references, `Ref<'a>`.
pub trait Inputs: Sized {
    /// The borrowed form callers pass: `&Tensor`, `(&Tensor, &Tensor)` or `&[Tensor]`.
    type Ref<'a>;
    /// The tensors, in order.
    fn to_vec(refs: Self::Ref<'_>) -> Vec<Tensor>;
    /// Rebuilds the argument from tensors in the same order.
    fn from_vec(tensors: Vec<Tensor>) -> Self;
}

/// What a compiled closure returns: one tensor, a tuple of tensors, or a `Vec` of them.
pub trait Outputs: Sized {
    /// The tensors, in order.
    fn into_vec(self) -> Vec<Tensor>;
    /// Rebuilds the result from tensors in the same order.
    fn from_vec(tensors: Vec<Tensor>) -> Self;
}

impl Inputs for Tensor {
    type Ref<'a> = &'a Tensor;
    fn to_vec(refs: &Tensor) -> Vec<Tensor> {
        vec![refs.clone()]
    }
    fn from_vec(tensors: Vec<Tensor>) -> Self {
        tensors.into_iter().next().expect("one tensor")
    }
}

impl Outputs for Tensor {
    fn into_vec(self) -> Vec<Tensor> {
        vec![self]
    }
    fn from_vec(tensors: Vec<Tensor>) -> Self {
        tensors.into_iter().next().expect("one tensor")
    }
}

impl Inputs for Vec<Tensor> {
    type Ref<'a> = &'a [Tensor];
    fn to_vec(refs: &[Tensor]) -> Vec<Tensor> {
        refs.to_vec()
    }
    fn from_vec(tensors: Vec<Tensor>) -> Self {
        tensors
    }
}

impl Outputs for Vec<Tensor> {
    fn into_vec(self) -> Vec<Tensor> {
        self
    }
    fn from_vec(tensors: Vec<Tensor>) -> Self {
        tensors
    }
}

macro_rules! tuple_io {
    ($($name:ident),+) => {
        impl Inputs for ($(tuple_io!(@tensor $name),)+) {
            type Ref<'a> = ($(tuple_io!(@ref $name),)+);
            fn to_vec(refs: Self::Ref<'_>) -> Vec<Tensor> {
                let ($($name,)+) = refs;
                vec![$($name.clone()),+]
            }
            fn from_vec(tensors: Vec<Tensor>) -> Self {
                let mut it = tensors.into_iter();
                ($(tuple_io!(@next it $name),)+)
            }
        }

        impl Outputs for ($(tuple_io!(@tensor $name),)+) {
            fn into_vec(self) -> Vec<Tensor> {
                let ($($name,)+) = self;
                vec![$($name),+]
            }
            fn from_vec(tensors: Vec<Tensor>) -> Self {
                let mut it = tensors.into_iter();
                ($(tuple_io!(@next it $name),)+)
            }
        }
    };
    (@tensor $name:ident) => { Tensor };
    (@ref $name:ident) => { &'a Tensor };
    (@next $it:ident $name:ident) => { $it.next().expect("one tensor per tuple field") };
}

tuple_io!(a, b);
tuple_io!(a, b, c);
tuple_io!(a, b, c, d);
