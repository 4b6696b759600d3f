//! The binary pointwise ops as one table: each line names an op, its reference value on a pair of
//! `f32` (what every kernel must match) and the same function as a C expression over `{a}` and
//! `{b}` (what the CUDA eager kernels and generated C and CUDA C compute). Comparisons return 1.0
//! or 0.0: the engine has no boolean dtype yet, so masks are `f32`.

/// Implements [`BinaryOp`]'s catalogue from one line per op:
/// `Variant "name" |a, b| reference, "C expression over {a} and {b}";`.
macro_rules! binary_ops {
    ($($(#[$doc:meta])* $variant:ident $name:literal |$a:ident, $b:ident| $apply:expr, $c:literal;)*) => {
        /// Elementwise functions of two inputs, broadcast together.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum BinaryOp {
            $($(#[$doc])* $variant,)*
        }

        impl BinaryOp {
            /// Every binary op.
            pub const ALL: [BinaryOp; [$(stringify!($variant)),*].len()] = [$(BinaryOp::$variant),*];

            /// The op's name in graphs and kernel names.
            pub fn name(self) -> &'static str {
                match self {
                    $(BinaryOp::$variant => $name,)*
                }
            }

            /// The op's value on one pair of elements: the reference semantics every kernel must
            /// match.
            pub fn apply(self, a: f32, b: f32) -> f32 {
                self.with_fn(Apply(a, b))
            }

            /// The same function as a C expression over `a` and `b` (names or literals; each may
            /// appear more than once), valid in C99 with `<math.h>` and in CUDA C.
            pub fn c_expr(self, a: &str, b: &str) -> String {
                match self {
                    $(BinaryOp::$variant => format!($c, a = a, b = b),)*
                }
            }

            /// Hands the op's reference function to `visitor` as its own closure type, so that a
            /// kernel looping over it is compiled once per op, with no branch in the loop.
            pub(crate) fn with_fn<V: BinaryVisitor>(self, visitor: V) -> V::Output {
                match self {
                    $(BinaryOp::$variant => visitor.visit(|$a: f32, $b: f32| -> f32 { $apply }),)*
                }
            }
        }
    };
}

/// Something done with a binary op's reference function (see [`BinaryOp::with_fn`]).
pub(crate) trait BinaryVisitor {
    /// What the visit returns.
    type Output;
    /// Uses the function `f`.
    fn visit(self, f: impl Fn(f32, f32) -> f32 + Sync) -> Self::Output;
}

/// Applies the function to one pair.
struct Apply(f32, f32);

impl BinaryVisitor for Apply {
    type Output = f32;
    fn visit(self, f: impl Fn(f32, f32) -> f32 + Sync) -> f32 {
        f(self.0, self.1)
    }
}

fn mask(c: bool) -> f32 {
    if c { 1.0 } else { 0.0 }
}

binary_ops! {
    /// `a + b`
    Add "add" |a, b| a + b, "({a} + {b})";
    /// `a - b`
    Sub "sub" |a, b| a - b, "({a} - {b})";
    /// `a * b`
    Mul "mul" |a, b| a * b, "({a} * {b})";
    /// `a / b`
    Div "div" |a, b| a / b, "({a} / {b})";
    /// Elementwise maximum, `torch.maximum`; NaN propagates (`f32::max` and `fmaxf` would drop
    /// it; `a + b` is NaN when either is).
    Maximum "maximum" |a, b| if a.is_nan() || b.is_nan() { f32::NAN } else { a.max(b) },
        "(({a} != {a} || {b} != {b}) ? ({a} + {b}) : fmaxf({a}, {b}))";
    /// Elementwise minimum, `torch.minimum`; NaN propagates.
    Minimum "minimum" |a, b| if a.is_nan() || b.is_nan() { f32::NAN } else { a.min(b) },
        "(({a} != {a} || {b} != {b}) ? ({a} + {b}) : fminf({a}, {b}))";
    /// `a ^ b`
    Pow "pow" |a, b| a.powf(b), "powf({a}, {b})";
    /// `a == b`
    Eq "eq" |a, b| mask(a == b), "({a} == {b} ? 1.0f : 0.0f)";
    /// `a != b`
    Ne "ne" |a, b| mask(a != b), "({a} != {b} ? 1.0f : 0.0f)";
    /// `a < b`
    Lt "lt" |a, b| mask(a < b), "({a} < {b} ? 1.0f : 0.0f)";
    /// `a <= b`
    Le "le" |a, b| mask(a <= b), "({a} <= {b} ? 1.0f : 0.0f)";
    /// `a > b`
    Gt "gt" |a, b| mask(a > b), "({a} > {b} ? 1.0f : 0.0f)";
    /// `a >= b`
    Ge "ge" |a, b| mask(a >= b), "({a} >= {b} ? 1.0f : 0.0f)";
}
