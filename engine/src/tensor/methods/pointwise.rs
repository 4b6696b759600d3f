//! Elementwise methods: unary math, binary arithmetic and comparisons with broadcasting, `where_`,
//! and conversion to another dtype. Binary ops and `where_` follow PyTorch's type promotion
//! (`bf16 + f32` is `f32`; `bf16 * 2.0` stays `bf16`); comparisons return 1.0 / 0.0 in that
//! dtype (the engine has no boolean dtype).

use crate::dtype::DType;
use crate::error::{Result, SourceLocation};
use crate::op::{BinaryOp, Op, UnaryOp};
use crate::tensor::{Operand, Tensor};

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $method:ident => $variant:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $method(&self) -> Result<Tensor> {
                    self.apply(Op::Unary(UnaryOp::$variant), &[], SourceLocation::caller())
                }
            )*
        }
    };
}

unary_methods! {
    /// `-x`, elementwise.
    neg => Neg;
    /// `e^x`, elementwise.
    exp => Exp;
    /// Natural logarithm, elementwise.
    log => Log;
    /// `log(1 + x)`, elementwise, accurate for small `x`.
    log1p => Log1p;
    /// Square root, elementwise.
    sqrt => Sqrt;
    /// `1 / sqrt(x)`, elementwise.
    rsqrt => Rsqrt;
    /// Sine, elementwise.
    sin => Sin;
    /// Cosine, elementwise.
    cos => Cos;
    /// Hyperbolic tangent, elementwise.
    tanh => Tanh;
    /// The error function, elementwise.
    erf => Erf;
    /// Absolute value, elementwise.
    abs => Abs;
    /// `max(x, 0)`, elementwise.
    relu => Relu;
    /// `1 / (1 + e^-x)`, elementwise.
    sigmoid => Sigmoid;
    /// GELU with the exact erf form, `x * Φ(x)`; AOT decomposes it into `erf`, `mul` and `add`.
    gelu => Gelu;
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $method:ident => $variant:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $method<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
                    self.apply(Op::Binary(BinaryOp::$variant), &[other.into()], SourceLocation::caller())
                }
            )*
        }
    };
}

binary_methods! {
    /// `self + other`, broadcast; `other` is a tensor or an `f32`.
    add => Add;
    /// `self - other`, broadcast.
    sub => Sub;
    /// `self * other`, broadcast.
    mul => Mul;
    /// `self / other`, broadcast.
    div => Div;
    /// Elementwise maximum, broadcast (`torch.maximum`).
    maximum => Maximum;
    /// Elementwise minimum, broadcast (`torch.minimum`).
    minimum => Minimum;
    /// `self ^ other`, broadcast.
    pow => Pow;
    /// `self == other` as 1.0 / 0.0.
    eq => Eq;
    /// `self != other` as 1.0 / 0.0.
    ne => Ne;
    /// `self < other` as 1.0 / 0.0.
    lt => Lt;
    /// `self <= other` as 1.0 / 0.0.
    le => Le;
    /// `self > other` as 1.0 / 0.0.
    gt => Gt;
    /// `self >= other` as 1.0 / 0.0.
    ge => Ge;
}

impl Tensor {
    /// The values converted to `dtype`, rounded to nearest (ties to even), as
    /// `tensor.to(dtype)`: the tensor itself when it already has that dtype. Inside a compiled
    /// function it is a `to_dtype` node, which generated code fuses into its neighbours (a load
    /// or a store in the other dtype).
    ///
    /// ```
    /// use engine::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0, 1.0 + 1.0 / 256.0, 3.14159], &[3])?.to_dtype(DType::BF16)?;
    /// assert_eq!(x.to_vec()?, vec![1.0, 1.0, 3.140625]);
    /// # Ok::<(), engine::Error>(())
    /// ```
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.to_dtype_at(dtype, SourceLocation::caller())
    }

    /// [`Tensor::to_dtype`] recorded at `location`.
    pub(crate) fn to_dtype_at(&self, dtype: DType, location: SourceLocation) -> Result<Tensor> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        self.apply(Op::ToDtype { dtype }, &[], location)
    }

    /// `torch.where(cond, a, b)` with `self` as the condition: `a` where `self != 0`, else `b`.
    /// All three broadcast; `a` and `b` may be scalars. Unlike an `if` on a tensor's value, this
    /// stays inside the graph.
    #[track_caller]
    pub fn where_<'a, 'b>(&self, a: impl Into<Operand<'a>>, b: impl Into<Operand<'b>>) -> Result<Tensor> {
        self.apply(Op::Where, &[a.into(), b.into()], SourceLocation::caller())
    }
}
