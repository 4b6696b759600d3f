//! The unary pointwise ops as one table, the part of ATen's `native_functions.yaml` for
//! elementwise functions of one input: each line names an op, its reference value on one `f32`
//! (what every kernel must match) and the same function as a C expression (what the CUDA eager
//! kernels and generated C and CUDA C compute). Everything else about a unary op (its `Tensor`
//! method aside) is derived from this table.

/// Implements [`UnaryOp`]'s catalogue from one line per op:
/// `Variant "name" |x| reference, "C expression over {x}";`.
macro_rules! unary_ops {
    ($($(#[$doc:meta])* $variant:ident $name:literal |$x:ident| $apply:expr, $c:literal;)*) => {
        /// Elementwise functions of one input.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $($(#[$doc])* $variant,)*
        }

        impl UnaryOp {
            /// Every unary op, for tests and generators that must cover the catalogue.
            pub const ALL: [UnaryOp; [$(stringify!($variant)),*].len()] = [$(UnaryOp::$variant),*];

            /// The op's name in graphs and kernel names.
            pub fn name(self) -> &'static str {
                match self {
                    $(UnaryOp::$variant => $name,)*
                }
            }

            /// The op's value on one element: the reference semantics every kernel must match.
            pub fn apply(self, x: f32) -> f32 {
                self.with_fn(Apply(x))
            }

            /// The same function as a C expression over the variable or literal `x`, valid in C99
            /// (with `<math.h>`) and in CUDA C. `x` may appear more than once, so pass a name, not
            /// an expression with side effects.
            pub fn c_expr(self, x: &str) -> String {
                match self {
                    $(UnaryOp::$variant => format!($c, x = x),)*
                }
            }

            /// Hands the op's reference function to `visitor` as its own closure type, so that a
            /// kernel looping over it is compiled once per op, with no branch in the loop.
            pub(crate) fn with_fn<V: UnaryVisitor>(self, visitor: V) -> V::Output {
                match self {
                    $(UnaryOp::$variant => visitor.visit(|$x: f32| -> f32 { $apply }),)*
                }
            }
        }
    };
}

/// Something done with a unary op's reference function (see [`UnaryOp::with_fn`]).
pub(crate) trait UnaryVisitor {
    /// What the visit returns.
    type Output;
    /// Uses the function `f`.
    fn visit(self, f: impl Fn(f32) -> f32 + Sync) -> Self::Output;
}

/// Applies the function to one value.
struct Apply(f32);

impl UnaryVisitor for Apply {
    type Output = f32;
    fn visit(self, f: impl Fn(f32) -> f32 + Sync) -> f32 {
        f(self.0)
    }
}

unary_ops! {
    /// `-x`
    Neg "neg" |x| -x, "(-{x})";
    /// `e^x`
    Exp "exp" |x| x.exp(), "expf({x})";
    /// Natural logarithm.
    Log "log" |x| x.ln(), "logf({x})";
    /// `log(1 + x)`, accurate for small `x` (where `log(1.0 + x)` loses digits).
    Log1p "log1p" |x| x.ln_1p(), "log1pf({x})";
    /// Square root.
    Sqrt "sqrt" |x| x.sqrt(), "sqrtf({x})";
    /// `1 / sqrt(x)`
    Rsqrt "rsqrt" |x| 1.0 / x.sqrt(), "(1.0f / sqrtf({x}))";
    /// Sine.
    Sin "sin" |x| x.sin(), "sinf({x})";
    /// Cosine.
    Cos "cos" |x| x.cos(), "cosf({x})";
    /// Hyperbolic tangent.
    Tanh "tanh" |x| x.tanh(), "tanhf({x})";
    /// The Gauss error function.
    Erf "erf" |x| libm::erff(x), "erff({x})";
    /// Absolute value.
    Abs "abs" |x| x.abs(), "fabsf({x})";
    /// `max(x, 0)`; NaN stays NaN, as in PyTorch (`f32::max` and `fmaxf` would give 0). A select
    /// rather than `fmaxf` also lets GCC vectorise it without fast-math.
    Relu "relu" |x| if x <= 0.0 { 0.0 } else { x }, "({x} <= 0.0f ? 0.0f : {x})";
    /// `1 / (1 + e^-x)`
    Sigmoid "sigmoid" |x| 1.0 / (1.0 + (-x).exp()), "(1.0f / (1.0f + expf(-{x})))";
    /// `x * Φ(x)` with the exact (erf) form; a composite that AOT decomposes.
    Gelu "gelu" |x| 0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2)),
        "(0.5f * {x} * (1.0f + erff({x} * 0.70710678118654752f)))";
}
