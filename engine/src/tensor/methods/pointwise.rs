//! Elementwise methods: unary math, binary arithmetic and comparisons with broadcasting, `where_`.

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
    /// `torch.where(cond, a, b)` with `self` as the condition: `a` where `self != 0`, else `b`.
    /// All three broadcast; `a` and `b` may be scalars. Unlike an `if` on a tensor's value, this
    /// stays inside the graph.
    #[track_caller]
    pub fn where_<'a, 'b>(&self, a: impl Into<Operand<'a>>, b: impl Into<Operand<'b>>) -> Result<Tensor> {
        self.apply(Op::Where, &[a.into(), b.into()], SourceLocation::caller())
    }
}
