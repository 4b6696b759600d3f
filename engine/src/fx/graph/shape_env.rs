//! A graph's size symbols, the analogue of PyTorch's `ShapeEnv`: which input dimension each
//! symbol comes from, the size it was traced with (its hint), and the symbols that had to give up
//! being free (*specializations*: `s0` became `8`, or `s1` became `s0`).
//!
//! Replacing a symbol rewrites every node's symbolic shape at once, so the graph never holds a
//! stale symbol: what a printed graph shows is exactly what its guards check.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use super::{Graph, Node, NodeId, NodeKind};
use crate::error::SourceLocation;
use crate::fx::symbolic::{SymBindings, SymInt, Symbol};
use crate::op::Op;

/// Where a symbol comes from and the size it was traced with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolInfo {
    /// The placeholder whose dimension introduces the symbol.
    pub placeholder: NodeId,
    /// The dimension of that placeholder.
    pub dim: usize,
    /// The size it had when the graph was traced.
    pub hint: usize,
}

/// A symbol that stopped being free: replaced by a constant (specialized) or by another size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Specialization {
    /// The symbol replaced.
    pub symbol: Symbol,
    /// What it was replaced by.
    pub value: SymInt,
    /// Why: the op and rule that needed it (`add: broadcast against a static size`).
    pub reason: String,
    /// The learner's line of that op, when known.
    pub location: Option<SourceLocation>,
}

impl fmt::Display for Specialization {
    /// `s0 = 8: add broadcasts it against a static size (at model.rs:12)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}: {}", self.symbol, self.value, self.reason)?;
        if let Some(location) = self.location {
            write!(f, " (at {})", location.short())?;
        }
        Ok(())
    }
}

/// An input whose shape a graph cannot run on, as a guard failure reads:
/// `input 0: size mismatch at dim 0, expected 8, got 16`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeMismatch {
    /// The input (placeholder index).
    pub input: usize,
    /// The dimension, when one size is wrong (`None` for a wrong rank or input count).
    pub dim: Option<usize>,
    message: String,
}

impl fmt::Display for SizeMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The symbols of one graph.
#[derive(Clone, Debug, Default)]
pub(crate) struct ShapeEnv {
    /// Every symbol ever introduced, free or replaced.
    symbols: BTreeMap<Symbol, SymbolInfo>,
    /// Replacements, in the order they happened.
    specializations: Vec<Specialization>,
}

impl ShapeEnv {
    fn replacement(&self, symbol: Symbol) -> Option<&SymInt> {
        self.specializations.iter().rev().find(|s| s.symbol == symbol).map(|s| &s.value)
    }
}

impl Graph {
    /// The free symbols (those not replaced), with where they come from.
    pub fn symbols(&self) -> impl Iterator<Item = (Symbol, &SymbolInfo)> + '_ {
        let env = &self.shape_env;
        env.symbols.iter().filter(|(s, _)| env.replacement(**s).is_none()).map(|(s, info)| (*s, info))
    }

    /// True when some size of the graph is symbolic, so that it runs for more than one shape.
    pub fn is_dynamic(&self) -> bool {
        self.symbols().next().is_some()
    }

    /// The symbols that were replaced while the graph was built, with the reason for each.
    pub fn specializations(&self) -> &[Specialization] {
        &self.shape_env.specializations
    }

    /// A new symbol for dimension `dim` of `placeholder`, traced with size `hint`.
    pub(crate) fn new_symbol(&mut self, placeholder: NodeId, dim: usize, hint: usize) -> Symbol {
        let env = &mut self.shape_env;
        let symbol = Symbol(env.symbols.keys().next_back().map_or(0, |s| s.0 + 1));
        env.symbols.insert(symbol, SymbolInfo { placeholder, dim, hint });
        symbol
    }

    /// Takes over a symbol of another graph under the same name.
    pub(crate) fn adopt_symbol(&mut self, symbol: Symbol, info: SymbolInfo) {
        self.shape_env.symbols.insert(symbol, info);
    }

    /// The traced value of a size.
    pub fn hint(&self, size: &SymInt) -> usize {
        size.symbols().iter().fold(size.coeff(), |acc, s| acc * self.shape_env.symbols.get(s).map_or(0, |i| i.hint))
    }

    /// A size with every replaced symbol substituted (sizes read from nodes already are).
    pub(crate) fn resolve(&self, size: &SymInt) -> SymInt {
        let mut out = size.clone();
        while let Some((symbol, by)) =
            out.symbols().iter().find_map(|s| self.shape_env.replacement(*s).map(|by| (*s, by)))
        {
            out = out.substitute(symbol, by);
        }
        out
    }

    /// Replaces `symbol` by `value` in every node, recording why.
    pub(crate) fn replace_symbol(
        &mut self,
        symbol: Symbol,
        value: SymInt,
        reason: String,
        location: Option<SourceLocation>,
    ) {
        for node in self.nodes.iter_mut() {
            if node.sym_shape.dims().iter().any(|d| d.contains(symbol)) {
                node.sym_shape = node.sym_shape.substitute(symbol, &value);
            }
        }
        self.shape_env.specializations.push(Specialization { symbol, value, reason, location });
    }

    /// Makes every symbol of `size` a constant (its hint); returns the constant.
    pub(crate) fn specialize(&mut self, size: &SymInt, reason: &str, location: Option<SourceLocation>) -> SymInt {
        let size = self.resolve(size);
        for &symbol in size.symbols() {
            if self.shape_env.replacement(symbol).is_none() {
                let hint = self.hint(&SymInt::symbol(symbol));
                self.replace_symbol(symbol, SymInt::constant(hint), reason.to_string(), location);
            }
        }
        SymInt::constant(self.hint(&size))
    }

    /// Records that two sizes with the same hint are equal and returns the common size: a symbol
    /// `k*s` is replaced by the other size divided by `k` when that is a product again; otherwise
    /// both are specialized.
    pub(crate) fn unify(&mut self, a: &SymInt, b: &SymInt, reason: &str, location: Option<SourceLocation>) -> SymInt {
        let (a, b) = (self.resolve(a), self.resolve(b));
        if a == b {
            return a;
        }
        // Replace the newer symbol, so that names stay those of the earliest inputs.
        let newer = |x: &SymInt| x.as_scaled_symbol().map(|(_, s)| s.0);
        let pairs = if newer(&a) >= newer(&b) { [(&a, &b), (&b, &a)] } else { [(&b, &a), (&a, &b)] };
        for (scaled, other) in pairs {
            if let Some((k, symbol)) = scaled.as_scaled_symbol()
                && !other.contains(symbol)
                && let Some(value) = other.div_exact(&SymInt::constant(k))
            {
                self.replace_symbol(symbol, value, reason.to_string(), location);
                return other.clone();
            }
        }
        self.specialize(&a, reason, location);
        self.specialize(&b, reason, location)
    }

    /// The value of every free symbol, read from the inputs' shapes, after checking that each
    /// input has the rank, static sizes and equal sizes the graph expects. The message of an
    /// error names the input and dimension: `input 0: size mismatch at dim 0, expected 8, got 16`.
    /// (The size guards of PyTorch's `ShapeEnv`, evaluated.)
    pub fn bind_symbols(&self, input_shapes: &[&[usize]]) -> Result<SymBindings, SizeMismatch> {
        crate::wires::trip(crate::wires::Wire::BindSymbols);
        self.symbol_bindings(input_shapes)
    }

    /// [`Graph::bind_symbols`], for the engine's own use (running a graph, checking a cached
    /// graph's guards), past its trip wire.
    pub(crate) fn symbol_bindings(&self, input_shapes: &[&[usize]]) -> Result<SymBindings, SizeMismatch> {
        let placeholders = self.placeholders();
        if input_shapes.len() != placeholders.len() {
            let message = format!("the graph takes {} inputs, got {}", placeholders.len(), input_shapes.len());
            return Err(SizeMismatch { input: input_shapes.len().min(placeholders.len()), dim: None, message });
        }
        for (i, (&p, shape)) in placeholders.iter().zip(input_shapes).enumerate() {
            let rank = self.node(p).sym_shape.rank();
            if rank != shape.len() {
                let message = format!("input {i}: rank mismatch, expected {rank}, got {}", shape.len());
                return Err(SizeMismatch { input: i, dim: None, message });
            }
        }
        let mismatch = |i: usize, dim: usize, expected: String| SizeMismatch {
            input: i,
            dim: Some(dim),
            message: format!(
                "input {i}: size mismatch at dim {dim}, expected {expected}, got {}",
                input_shapes[i][dim]
            ),
        };
        // A free symbol is still the whole size of the dimension that introduced it.
        let mut bindings = SymBindings::new();
        for (symbol, info) in self.symbols() {
            let i = placeholders.iter().position(|&p| p == info.placeholder).expect("symbols come from placeholders");
            let actual = input_shapes[i][info.dim];
            if actual < 2 {
                return Err(mismatch(i, info.dim, format!("{symbol} (dynamic, at least 2)")));
            }
            bindings.set(symbol, actual);
        }
        for (i, (&p, shape)) in placeholders.iter().zip(input_shapes).enumerate() {
            for (dim, (size, &actual)) in self.node(p).sym_shape.dims().iter().zip(shape.iter()).enumerate() {
                let value = size.eval(&bindings).expect("every free symbol is bound");
                if value != actual {
                    let expected = if size.is_static() { value.to_string() } else { format!("{size} = {value}") };
                    return Err(mismatch(i, dim, expected));
                }
            }
        }
        Ok(bindings)
    }

    /// The op of a call node with its size parameters evaluated for `bindings`: a reshape or an
    /// expand of a dynamic graph takes its target shape from the node's symbolic shape.
    pub fn concrete_op<'a>(&self, node: &'a Node, bindings: &SymBindings) -> Option<Cow<'a, Op>> {
        let NodeKind::Call { op, .. } = &node.kind else { return None };
        if node.sym_shape.is_static() {
            return Some(Cow::Borrowed(op));
        }
        let shape = node.sym_shape.eval(bindings).expect("bindings cover every symbol of the graph");
        Some(match op {
            Op::Reshape { .. } => Cow::Owned(Op::Reshape { shape }),
            Op::Expand { .. } => Cow::Owned(Op::Expand { shape }),
            _ => Cow::Borrowed(op),
        })
    }
}
