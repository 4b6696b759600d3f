//! Index expressions, the analogue of the sympy expressions in TorchInductor's IR (`x0 + 32*x1`,
//! `ModularIndexing(xindex, 1, 32)`): every load and store addresses memory as an affine function
//! of the loop coordinates, so broadcasting (a zero coefficient), permutes and slices (other
//! coefficients and an offset) become index arithmetic instead of copies.
//!
//! Two forms: [`Affine`] over one coordinate per dimension, which lowering and fusion compare, and
//! [`FlatIndex`] over the flat loop variables a kernel really has (`x`, the flat element or row
//! index, and `r`, the position along the reduced dimension), which the printers print.

use crate::layout::Layout;

/// `offset + Σ coeffs[d] * i_d` over the coordinates `i_d` of an iteration space.
///
/// Canonical: the coefficient of a size-1 dimension is always 0 (its coordinate is always 0), so
/// two affines that address the same elements compare equal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Affine {
    /// Constant part, in elements.
    pub offset: usize,
    /// One coefficient per coordinate, in elements.
    pub coeffs: Vec<usize>,
}

impl Affine {
    /// Where element `i` of a tensor with this view `layout` sits, read at the coordinates of an
    /// iteration space of shape `iter_shape` that the view broadcasts to (dimensions aligned at
    /// the right, size-1 and missing dimensions repeated, as in PyTorch).
    pub fn of_view(layout: &Layout, iter_shape: &[usize]) -> Affine {
        let lead = iter_shape.len() - layout.shape().len();
        let coeffs = iter_shape
            .iter()
            .enumerate()
            .map(|(d, &size)| match d.checked_sub(lead) {
                Some(j) if size != 1 && layout.shape()[j] != 1 => layout.strides()[j],
                _ => 0,
            })
            .collect();
        Affine { offset: layout.offset(), coeffs }
    }

    /// The index of a dense row-major buffer of `shape` at its own coordinates: where a kernel
    /// stores the node that owns it.
    pub fn contiguous(shape: &[usize]) -> Affine {
        Affine::of_view(&Layout::contiguous(shape), shape)
    }

    /// The same index over a space with one more coordinate at `dim`, which it ignores: how a
    /// per-row value is addressed from inside the loop over the row.
    pub fn with_dim_inserted(&self, dim: usize) -> Affine {
        let mut coeffs = self.coeffs.clone();
        coeffs.insert(dim, 0);
        Affine { offset: self.offset, coeffs }
    }
}

/// A loop variable of a generated kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Var {
    /// `x`: the flat element index of a pointwise kernel, or the row index of a reduction.
    X,
    /// `r`: the position along the reduced dimension.
    R,
}

impl Var {
    /// The variable's name in generated code.
    pub fn name(self) -> &'static str {
        match self {
            Var::X => "x",
            Var::R => "r",
        }
    }
}

/// One term of a flat index: `((var / div) % modulo) * coeff`, the `ModularIndexing` of
/// Inductor's index expressions. `div == 1` and `modulo == None` leave those parts out.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Term {
    /// The loop variable.
    pub var: Var,
    /// Divisor applied first (1 for none).
    pub div: usize,
    /// Modulus applied next (`None` when the variable never reaches it).
    pub modulo: Option<usize>,
    /// Multiplier applied last.
    pub coeff: usize,
}

impl Term {
    /// The term as a C expression with its variable named `name`: `(name / 4) % 8`, `name * 3`.
    fn render(&self, name: &str) -> String {
        // `/` and `%` bind tighter than `+`, so a term needs parentheses only before `*`.
        let mut text = name.to_string();
        if self.div != 1 {
            text = format!("{text} / {}", self.div);
        }
        if let Some(m) = self.modulo {
            text = if self.div != 1 { format!("({text}) % {m}") } else { format!("{text} % {m}") };
        }
        if self.coeff != 1 {
            text = if self.div != 1 || self.modulo.is_some() {
                format!("({text}) * {}", self.coeff)
            } else {
                format!("{text} * {}", self.coeff)
            };
        }
        text
    }
}

/// An index as generated code computes it: an offset plus terms over the loop variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlatIndex {
    /// Constant part, in elements.
    pub offset: usize,
    /// Terms over `x` and `r`, innermost dimensions first.
    pub terms: Vec<Term>,
}

impl FlatIndex {
    /// Rewrites `affine`, over the coordinates of `shape`, in terms of the flat loop variables:
    /// `x` runs over every dimension but `reduced` in row-major order, `r` over `reduced`.
    ///
    /// Neighbouring dimensions that step through memory like one dense block merge into one
    /// term, so a contiguous read prints as `x` and a bias broadcast over rows as `x % 32`.
    pub fn new(affine: &Affine, shape: &[usize], reduced: Option<usize>) -> FlatIndex {
        let mut terms: Vec<Term> = Vec::new();
        let x_numel: usize = shape.iter().enumerate().filter(|&(d, _)| Some(d) != reduced).map(|(_, &s)| s).product();
        let mut div = 1;
        for d in (0..shape.len()).rev() {
            let (size, coeff) = (shape[d], affine.coeffs[d]);
            if Some(d) == reduced {
                if coeff != 0 {
                    terms.push(Term { var: Var::R, div: 1, modulo: None, coeff });
                }
                continue;
            }
            if coeff != 0 && size != 1 {
                match terms.last_mut() {
                    // The previous term covers the dims just inside this one and this dim steps
                    // over exactly that block: one wider term.
                    Some(t)
                        if t.var == Var::X
                            && t.modulo.is_some_and(|m| t.div * m == div)
                            && coeff == t.coeff * t.modulo.unwrap_or(1) =>
                    {
                        t.modulo = t.modulo.map(|m| m * size);
                    }
                    _ => terms.push(Term { var: Var::X, div, modulo: Some(size), coeff }),
                }
            }
            div *= size;
        }
        for t in &mut terms {
            // The outermost dimension needs no modulus: `x` never reaches it.
            if t.var == Var::X && t.modulo.is_some_and(|m| t.div * m >= x_numel) {
                t.modulo = None;
            }
        }
        FlatIndex { offset: affine.offset, terms }
    }

    /// The index as a C expression (also valid CUDA C), e.g. `128 + (x / 32) * 8 + r`.
    pub fn to_c(&self) -> String {
        self.render("x", "r")
    }

    /// The index as a C expression with the loop variables named `x` and `r`.
    pub fn render(&self, x: &str, r: &str) -> String {
        let terms = self.terms.iter().rev().map(|t| match t.var {
            Var::X => t.render(x),
            Var::R => t.render(r),
        });
        self.join(terms.collect())
    }

    /// The offset and the printed terms as one sum; the offset only when it is not 0 or stands
    /// alone.
    fn join(&self, terms: Vec<String>) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.offset != 0 || terms.is_empty() {
            parts.push(self.offset.to_string());
        }
        parts.extend(terms);
        parts.join(" + ")
    }

    /// The shortest run of consecutive `x` the index is built from, if it divides `x` or takes
    /// a modulus of it: 32 for `x % 32` and for `x / 32`, 4 for `(x / 4) % 8`. An index made of
    /// `x` alone has none. A printer that loops over `x` in rows of this length reads the index
    /// at the row and the column instead (see [`FlatIndex::render_tiled`]).
    pub fn x_block(&self) -> Option<usize> {
        self.terms
            .iter()
            .filter(|t| t.var == Var::X)
            .filter_map(|t| if t.div > 1 { Some(t.div) } else { t.modulo })
            .min()
    }

    /// The index of a pointwise kernel as a C expression over `x = row * tile + col`, with
    /// `0 <= col < tile` and the variables named `row` and `col`. With `tile` 32, `x % 32`
    /// prints as `col`, `x / 32` as `row`, `x % 64` as `(row % 2) * 32 + col` and `x` as
    /// `row * 32 + col`: no division or modulus of the column is left. A term whose blocks are
    /// no multiple of `tile` prints over `x` itself, spelled `(row * tile + col)`.
    pub fn render_tiled(&self, tile: usize, row: &str, col: &str) -> String {
        let x = format!("({row} * {tile} + {col})");
        let col_times = |coeff: usize| if coeff == 1 { col.to_string() } else { format!("{col} * {coeff}") };
        let terms = self.terms.iter().rev().map(|t| {
            debug_assert_eq!(t.var, Var::X, "a tiled index belongs to a pointwise kernel");
            // The row's part of the term, as a term over `row`; the column's part is `col`.
            let on_row = |div, modulo, coeff| Term { var: Var::X, div, modulo, coeff }.render(row);
            match (t.div, t.modulo) {
                // Whole rows: `x / div` is `row / (div / tile)`.
                (div, modulo) if div.is_multiple_of(tile) => on_row(div / tile, modulo, t.coeff),
                // `x` itself, whole rows plus the column.
                (1, None) => format!("{} + {}", on_row(1, None, tile * t.coeff), col_times(t.coeff)),
                // A block of exactly one row is the column.
                (1, Some(m)) if m == tile => col_times(t.coeff),
                // A block of several rows: the row's place in it, plus the column.
                (1, Some(m)) if m.is_multiple_of(tile) => {
                    format!("{} + {}", on_row(1, Some(m / tile), tile * t.coeff), col_times(t.coeff))
                }
                _ => t.render(&x),
            }
        });
        self.join(terms.collect())
    }

    /// The element the index addresses at `x` and `r`: what generated code computes, evaluated
    /// (the interpreter target's reading of it).
    pub fn at(&self, x: usize, r: usize) -> usize {
        let term = |t: &Term| {
            let v = match t.var {
                Var::X => x,
                Var::R => r,
            } / t.div;
            t.modulo.map_or(v, |m| v % m) * t.coeff
        };
        self.offset + self.terms.iter().map(term).sum::<usize>()
    }

    /// Whether the index uses loop variable `var`.
    pub fn uses(&self, var: Var) -> bool {
        self.terms.iter().any(|t| t.var == var)
    }

    /// The coefficient of `r`, when the index moves with it.
    pub fn r_coeff(&self) -> Option<usize> {
        self.terms.iter().find(|t| t.var == Var::R).map(|t| t.coeff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(layout: &Layout, shape: &[usize], reduced: Option<usize>) -> String {
        FlatIndex::new(&Affine::of_view(layout, shape), shape, reduced).to_c()
    }

    #[test]
    fn dense_reads_are_the_flat_index() {
        assert_eq!(flat(&Layout::contiguous(&[4, 32]), &[4, 32], None), "x");
        assert_eq!(flat(&Layout::contiguous(&[2, 3, 5]), &[2, 3, 5], None), "x");
    }

    #[test]
    fn broadcasts_become_modulus_or_division() {
        assert_eq!(flat(&Layout::contiguous(&[32]), &[4, 32], None), "x % 32");
        assert_eq!(flat(&Layout::contiguous(&[4, 1]), &[4, 32], None), "x / 32");
        assert_eq!(flat(&Layout::contiguous(&[]), &[4, 32], None), "0");
    }

    #[test]
    fn permutes_and_slices_use_their_strides() {
        let t = Layout::contiguous(&[3, 4]).permute(&[1, 0]);
        assert_eq!(flat(&t, &[4, 3], None), "x / 3 + (x % 3) * 4");
        let s = Layout::contiguous(&[4, 10]).slice(1, 2, 10, 2);
        assert_eq!(flat(&s, &[4, 4], None), "2 + (x / 4) * 10 + (x % 4) * 2");
    }

    #[test]
    fn reductions_split_rows_and_the_reduced_dim() {
        let x = Layout::contiguous(&[8, 16]);
        assert_eq!(flat(&x, &[8, 16], Some(1)), "x * 16 + r");
        assert_eq!(flat(&x, &[8, 16], Some(0)), "r * 16 + x");
        let w = Layout::contiguous(&[16]);
        assert_eq!(flat(&w, &[8, 16], Some(1)), "r");
        let row = Affine::contiguous(&[8, 1]);
        assert_eq!(FlatIndex::new(&row, &[8, 16], Some(1)).to_c(), "x");
    }

    #[test]
    fn tiled_indices_read_at_the_row_and_the_column() {
        let tiled = |layout: &Layout, shape: &[usize]| {
            let index = FlatIndex::new(&Affine::of_view(layout, shape), shape, None);
            (index.x_block(), index.render_tiled(32, "row", "col"))
        };
        assert_eq!(tiled(&Layout::contiguous(&[4, 32]), &[4, 32]), (None, "row * 32 + col".into()));
        assert_eq!(tiled(&Layout::contiguous(&[32]), &[4, 32]), (Some(32), "col".into()));
        assert_eq!(tiled(&Layout::contiguous(&[4, 1]), &[4, 32]), (Some(32), "row".into()));
        // A block of two rows, and a per-row value of a 3-d shape.
        assert_eq!(tiled(&Layout::contiguous(&[2, 32]), &[3, 2, 32]), (Some(64), "(row % 2) * 32 + col".into()));
        assert_eq!(tiled(&Layout::contiguous(&[2, 1]), &[3, 2, 32]), (Some(32), "row % 2".into()));
        let t = Layout::contiguous(&[32, 4]).permute(&[1, 0]);
        assert_eq!(tiled(&t, &[4, 32]), (Some(32), "row + col * 4".into()));
        let s = Layout::contiguous(&[4, 70]).slice(1, 2, 66, 2);
        assert_eq!(tiled(&s, &[4, 32]), (Some(32), "2 + row * 70 + col * 2".into()));
    }

    #[test]
    fn terms_that_do_not_split_at_the_tile_read_the_flat_index() {
        // No kernel's indices mix blocks of 32 and 12 (they are all over one shape), but the
        // printing stays exact if one did.
        let term = |div, modulo| Term { var: Var::X, div, modulo, coeff: 1 };
        let index = FlatIndex { offset: 0, terms: vec![term(1, Some(12)), term(1, Some(32))] };
        assert_eq!(index.x_block(), Some(12));
        assert_eq!(index.render_tiled(32, "row", "col"), "col + (row * 32 + col) % 12");
    }

    #[test]
    fn size_one_dims_are_canonical() {
        let a = Affine::of_view(&Layout::contiguous(&[4, 1]), &[4, 1]);
        let b = Affine::of_view(&Layout::new(vec![4, 1], vec![1, 7], 0), &[4, 1]);
        assert_eq!(a, b);
    }
}
