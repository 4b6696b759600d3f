//! Symbolic sizes, the analogue of PyTorch's `SymInt`: a size written in terms of size symbols
//! (`s0`, `s1`, ...) so that one graph serves every batch size.
//!
//! The representation is deliberately small. A size is a [`SymInt`]: a constant times a product of
//! symbols (`16`, `s0`, `4*s0`, `s0*s1`). Products are all that shapes need in practice: broadcasts,
//! matmuls and reductions keep or drop dims, reshapes multiply and divide them, contiguous strides
//! are products of sizes. A rule that would need a sum or a remainder (a slice of a dynamic dim,
//! a reshape that splits a symbol) specializes the symbol instead: it becomes its traced value and
//! the graph is only reused for that value, which is what PyTorch does when it cannot reason about
//! a size symbolically.
//!
//! Every symbol is introduced by one dimension of one placeholder (its *source*), with the size it
//! had when traced (its *hint*). At run time the compiled code reads each symbol's value from its
//! source input ([`SymBindings`]) and evaluates every size from those.
//!
//! # What a backend does with a dynamic graph
//!
//! - [`Node::sym_shape`](super::Node::sym_shape) is the truth about a node's shape; `meta.shape`
//!   and the size parameters of `Reshape` and `Expand` hold the traced (hint) values only.
//!   [`Graph::is_dynamic`](super::Graph::is_dynamic) says whether any size is symbolic;
//!   [`Graph::symbols`](super::Graph::symbols) lists the free symbols with their source and hint.
//! - Each run starts with [`Graph::bind_symbols`](super::Graph::bind_symbols) on the inputs'
//!   shapes: it checks the sizes the graph relies on and returns the bindings; sizes are then
//!   `sym_shape.eval(&bindings)`, and [`Graph::concrete_op`](super::Graph::concrete_op) gives a
//!   node's op with its size parameters evaluated. A kernel that loops over `4*s0*s1` elements
//!   takes that count (or `s0` and `s1`) as an argument.
//! - Inputs with symbolic sizes are contiguous (a non-contiguous input never gets symbols), so
//!   their strides are [`SymShape::contiguous_strides`].
//! - Compiled code must be correct for every binding that passes `bind_symbols`; a decision that
//!   depends on a symbolic size (a tile that fits a row) must be taken at run time, or not at all.

use std::fmt;

/// A size variable, printed `s0`, `s1`, ...: the size of one dynamic dimension of a graph input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(pub u32);

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}

// ANCHOR: symint
/// A size: a constant coefficient times a product of symbols (`16`, `s0`, `4*s0`, `s0*s1`).
///
/// Symbols are kept sorted and may repeat (`s0*s0`), so two equal products are always equal
/// values of this type. A zero coefficient carries no symbols.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SymInt {
    coeff: usize,
    symbols: Vec<Symbol>,
}
// ANCHOR_END: symint

impl SymInt {
    /// A size known when the graph is built.
    pub fn constant(value: usize) -> SymInt {
        SymInt { coeff: value, symbols: Vec::new() }
    }

    /// The size named by one symbol.
    pub fn symbol(symbol: Symbol) -> SymInt {
        SymInt { coeff: 1, symbols: vec![symbol] }
    }

    /// The constant factor.
    pub fn coeff(&self) -> usize {
        self.coeff
    }

    /// The symbols multiplied together, sorted (repeated for powers).
    pub fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }

    /// The value when the size has no symbols.
    pub fn as_constant(&self) -> Option<usize> {
        self.symbols.is_empty().then_some(self.coeff)
    }

    /// `(k, s)` when the size is `k*s` for a single symbol `s`.
    pub fn as_scaled_symbol(&self) -> Option<(usize, Symbol)> {
        match self.symbols.as_slice() {
            [s] => Some((self.coeff, *s)),
            _ => None,
        }
    }

    /// True when the size has no symbols.
    pub fn is_static(&self) -> bool {
        self.symbols.is_empty()
    }

    /// Whether `symbol` occurs in the product.
    pub fn contains(&self, symbol: Symbol) -> bool {
        self.symbols.contains(&symbol)
    }

    /// The product of two sizes.
    pub fn mul(&self, other: &SymInt) -> SymInt {
        let coeff = self.coeff * other.coeff;
        if coeff == 0 {
            return SymInt::constant(0);
        }
        let mut symbols = [self.symbols.as_slice(), other.symbols.as_slice()].concat();
        symbols.sort();
        SymInt { coeff, symbols }
    }

    /// `self / other` when it is again a product of symbols (each symbol of `other` occurs in
    /// `self` and the coefficients divide), or `None`.
    pub fn div_exact(&self, other: &SymInt) -> Option<SymInt> {
        if other.coeff == 0 || !self.coeff.is_multiple_of(other.coeff) {
            return None;
        }
        let mut symbols = self.symbols.clone();
        for s in &other.symbols {
            let at = symbols.iter().position(|x| x == s)?;
            symbols.remove(at);
        }
        Some(SymInt { coeff: self.coeff / other.coeff, symbols })
    }

    /// The size with every occurrence of `symbol` replaced by `by`.
    pub fn substitute(&self, symbol: Symbol, by: &SymInt) -> SymInt {
        if !self.contains(symbol) {
            return self.clone();
        }
        let rest: Vec<Symbol> = self.symbols.iter().copied().filter(|s| *s != symbol).collect();
        let power = self.symbols.len() - rest.len();
        (0..power).fold(SymInt { coeff: self.coeff, symbols: rest }, |acc, _| acc.mul(by))
    }

    /// The value for these symbol values, or `None` when a symbol is unbound.
    pub fn eval(&self, bindings: &SymBindings) -> Option<usize> {
        self.symbols.iter().try_fold(self.coeff, |acc, s| bindings.get(*s).map(|v| acc * v))
    }
}

impl fmt::Display for SymInt {
    /// `16`, `s0`, `4*s0`, `s0*s1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.symbols.is_empty() {
            return write!(f, "{}", self.coeff);
        }
        let mut parts: Vec<String> = Vec::with_capacity(self.symbols.len() + 1);
        if self.coeff != 1 {
            parts.push(self.coeff.to_string());
        }
        parts.extend(self.symbols.iter().map(Symbol::to_string));
        f.write_str(&parts.join("*"))
    }
}

/// A shape whose sizes may be symbolic: what each graph node records next to the concrete shape
/// it was traced with.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct SymShape(pub Vec<SymInt>);

impl SymShape {
    /// A shape with no symbols.
    pub fn from_static(shape: &[usize]) -> SymShape {
        SymShape(shape.iter().map(|&n| SymInt::constant(n)).collect())
    }

    /// The sizes, outermost first.
    pub fn dims(&self) -> &[SymInt] {
        &self.0
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// True when no size has a symbol.
    pub fn is_static(&self) -> bool {
        self.0.iter().all(SymInt::is_static)
    }

    /// The number of elements, as a size.
    pub fn numel(&self) -> SymInt {
        self.0.iter().fold(SymInt::constant(1), |acc, d| acc.mul(d))
    }

    /// Row-major strides of a dense tensor of this shape, in elements (`[s0, 4, 8]` has strides
    /// `[32, 8, 1]`; `[4, s0]` has `[s0, 1]`).
    pub fn contiguous_strides(&self) -> Vec<SymInt> {
        let mut strides = vec![SymInt::constant(1); self.0.len()];
        let mut step = SymInt::constant(1);
        for (stride, size) in strides.iter_mut().zip(&self.0).rev() {
            *stride = step.clone();
            if size.as_constant() != Some(0) {
                step = step.mul(size);
            }
        }
        strides
    }

    /// The concrete sizes for these symbol values, or `None` when a symbol is unbound.
    pub fn eval(&self, bindings: &SymBindings) -> Option<Vec<usize>> {
        self.0.iter().map(|d| d.eval(bindings)).collect()
    }

    /// The shape with `symbol` replaced by `by` everywhere.
    pub fn substitute(&self, symbol: Symbol, by: &SymInt) -> SymShape {
        SymShape(self.0.iter().map(|d| d.substitute(symbol, by)).collect())
    }
}

impl fmt::Display for SymShape {
    /// `[s0, 16]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.0.iter().map(SymInt::to_string).collect();
        write!(f, "[{}]", dims.join(", "))
    }
}

/// The value of each symbol for one run of a graph, read from the inputs' shapes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymBindings(Vec<Option<usize>>);

impl SymBindings {
    /// No symbol bound.
    pub fn new() -> SymBindings {
        SymBindings::default()
    }

    /// The value of `symbol`, if bound.
    pub fn get(&self, symbol: Symbol) -> Option<usize> {
        self.0.get(symbol.0 as usize).copied().flatten()
    }

    /// Binds `symbol` to `value`.
    pub fn set(&mut self, symbol: Symbol, value: usize) {
        let i = symbol.0 as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some(value);
    }

    /// Every bound symbol with its value, in symbol order.
    pub fn iter(&self) -> impl Iterator<Item = (Symbol, usize)> + '_ {
        self.0.iter().enumerate().filter_map(|(i, v)| v.map(|v| (Symbol(i as u32), v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(i: u32) -> SymInt {
        SymInt::symbol(Symbol(i))
    }

    #[test]
    fn products_are_canonical_and_print_readably() {
        let a = s(1).mul(&s(0)).mul(&SymInt::constant(4));
        assert_eq!(a, SymInt::constant(4).mul(&s(0)).mul(&s(1)));
        assert_eq!(a.to_string(), "4*s0*s1");
        assert_eq!(SymInt::constant(0).mul(&s(0)), SymInt::constant(0));
        assert_eq!(SymShape(vec![s(0), SymInt::constant(16)]).to_string(), "[s0, 16]");
    }

    #[test]
    fn division_and_substitution() {
        let a = SymInt::constant(8).mul(&s(0)).mul(&s(0));
        assert_eq!(a.div_exact(&SymInt::constant(2).mul(&s(0))), Some(SymInt::constant(4).mul(&s(0))));
        assert_eq!(a.div_exact(&s(1)), None);
        assert_eq!(a.div_exact(&SymInt::constant(3)), None);
        assert_eq!(a.substitute(Symbol(0), &SymInt::constant(3)), SymInt::constant(72));
        assert_eq!(a.substitute(Symbol(0), &s(2)).to_string(), "8*s2*s2");
    }

    #[test]
    fn strides_and_evaluation() {
        let shape = SymShape(vec![SymInt::constant(4), s(0), SymInt::constant(8)]);
        let strides: Vec<String> = shape.contiguous_strides().iter().map(ToString::to_string).collect();
        assert_eq!(strides, ["8*s0", "8", "1"]);
        let mut b = SymBindings::new();
        assert_eq!(shape.eval(&b), None);
        b.set(Symbol(0), 5);
        assert_eq!(shape.eval(&b), Some(vec![4, 5, 8]));
        assert_eq!(shape.numel().eval(&b), Some(160));
    }
}
