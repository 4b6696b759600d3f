//! Shape propagation with symbolic sizes: the symbolic twin of [`Op::infer_shape`], run for every
//! node whose inputs have a symbolic size.
//!
//! Each rule knows the concrete output shape already (the trace computed it), so it only has to
//! say which output sizes are symbolic. A rule may have to assume something about the symbols
//! (broadcasting `s0` against `8` needs `s0 == 8`); it then records the assumption as a
//! specialization, which rewrites the graph and becomes a guard. Every rule keeps one invariant:
//! evaluated at the traced sizes, each symbolic size equals the concrete one. Together with the
//! cache comparing whole graphs, that makes any rule safe; a better rule only means fewer
//! recompiles.

use super::graph::Graph;
use super::symbolic::{SymInt, SymShape, Symbol};
use crate::error::SourceLocation;
use crate::op::Op;

impl Graph {
    /// The symbolic shape of `op`'s output, given its operands' symbolic shapes (`None` for a
    /// scalar) and the concrete output shape.
    pub(crate) fn sym_output_shape(
        &mut self,
        op: &Op,
        inputs: &[Option<SymShape>],
        out: &[usize],
        location: SourceLocation,
    ) -> SymShape {
        if inputs.iter().flatten().all(SymShape::is_static) {
            return SymShape::from_static(out);
        }
        let loc = Some(location);
        let name = op.name();
        let tensors: Vec<&SymShape> = inputs.iter().flatten().collect();
        let x = tensors[0];
        let shape = match op {
            Op::Unary(_) | Op::Contiguous | Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::ToDtype { .. } => {
                x.clone()
            }
            Op::ScaledMm { .. } => self.matmul(x, tensors[1], out, loc),
            Op::CopyInto => {
                for (target, source) in x.dims().iter().zip(tensors[1].dims()) {
                    self.unify(target, source, "copy_: the source must have the target's shape", loc);
                }
                x.clone()
            }
            Op::Binary(_) | Op::Where | Op::Custom(_) => self.broadcast(&tensors, out, name, loc),
            Op::Reduce { dim, keepdim, .. } => {
                let mut dims = x.dims().to_vec();
                if *keepdim {
                    dims[*dim] = SymInt::constant(1);
                } else {
                    dims.remove(*dim);
                }
                SymShape(dims)
            }
            Op::Permute { dims } => SymShape(dims.iter().map(|&d| x.dims()[d].clone()).collect()),
            Op::Matmul => self.matmul(x, tensors[1], out, loc),
            Op::Linear => {
                let (w, last) = (tensors[1], x.rank() - 1);
                self.unify(&x.dims()[last], &w.dims()[1], "linear: the input's last size must equal the weight's", loc);
                if let Some(bias) = tensors.get(2) {
                    self.unify(
                        &bias.dims()[0],
                        &w.dims()[0],
                        "linear: the bias size must equal the weight's rows",
                        loc,
                    );
                }
                let mut dims = x.dims()[..last].to_vec();
                dims.push(w.dims()[0].clone());
                SymShape(dims)
            }
            Op::LayerNorm { .. } => {
                let last = &x.dims()[x.rank() - 1];
                for param in &tensors[1..] {
                    self.unify(last, &param.dims()[0], "layer_norm: weight and bias must match the last size", loc);
                }
                x.clone()
            }
            Op::ScaledDotProductAttention { .. } => {
                let (k, v, last) = (tensors[1], tensors[2], x.rank() - 1);
                let why = "scaled_dot_product_attention: q, k and v sizes must agree";
                for d in 0..last - 1 {
                    self.unify(&x.dims()[d], &k.dims()[d], why, loc);
                    self.unify(&x.dims()[d], &v.dims()[d], why, loc);
                }
                self.unify(&x.dims()[last], &k.dims()[last], why, loc);
                self.unify(&k.dims()[last - 1], &v.dims()[last - 1], why, loc);
                if let Some(mask) = tensors.get(3) {
                    for d in mask.dims() {
                        self.specialize(d, "scaled_dot_product_attention: a mask has static sizes", loc);
                    }
                }
                let mut dims = x.dims()[..last].to_vec();
                dims.push(v.dims()[last].clone());
                SymShape(dims)
            }
            Op::ScaledDotProductAttentionBackward { .. } => {
                // The packed gradients' length is a sum of products of sizes: every size is fixed.
                for t in &tensors {
                    for d in t.dims() {
                        self.specialize(d, "scaled_dot_product_attention_backward: its sizes are fixed", loc);
                    }
                }
                SymShape::from_static(out)
            }
            Op::Reshape { shape } => self.reshape(x, shape, loc),
            Op::Expand { shape } => self.expand(x, shape),
            Op::Slice { dim, .. } => {
                self.specialize(&x.dims()[*dim], "slice: a slice of a dynamic dimension has a fixed size", loc);
                let mut dims = x.dims().to_vec();
                dims[*dim] = SymInt::constant(out[*dim]);
                SymShape(dims)
            }
            Op::Cat { dim } => {
                // A size here is a product of symbols, never a sum: the joined sizes are fixed.
                let mut dims = x.dims().to_vec();
                for t in &tensors {
                    self.specialize(&t.dims()[*dim], "cat: the joined dimension has a fixed size", loc);
                    for (d, size) in t.dims().iter().enumerate().filter(|&(d, _)| d != *dim) {
                        dims[d] = self.unify(&dims[d], size, "cat: sizes must match except in the joined dim", loc);
                    }
                }
                dims[*dim] = SymInt::constant(out[*dim]);
                SymShape(dims)
            }
            Op::Cond { true_graph, false_graph } => {
                let operands = &tensors[1..];
                let a = branch_output(true_graph, operands);
                let b = branch_output(false_graph, operands);
                SymShape(
                    a.dims()
                        .iter()
                        .zip(b.dims())
                        .map(|(a, b)| self.unify(a, b, "cond: both branches must return the same shape", loc))
                        .collect(),
                )
            }
        };
        // Later assumptions may have replaced symbols in sizes computed earlier.
        SymShape(shape.dims().iter().map(|d| self.resolve(d)).collect())
    }

    // ANCHOR: sym_broadcast
    /// Broadcasting: at each output position, a size-1 operand size stretches; the others must
    /// be equal, so a symbol meeting a static size is specialized and two symbols are unified.
    fn broadcast(&mut self, shapes: &[&SymShape], out: &[usize], op: &str, loc: Option<SourceLocation>) -> SymShape {
        let rank = out.len();
        let reason = format!("{op}: broadcasting needs equal sizes");
        let dims = (0..rank).map(|k| {
            let sizes: Vec<SymInt> = shapes
                .iter()
                .filter_map(|s| (k + s.rank()).checked_sub(rank).map(|i| s.dims()[i].clone()))
                .filter(|d| d.as_constant() != Some(1))
                .collect();
            if out[k] <= 1 || sizes.is_empty() {
                return SymInt::constant(out[k]);
            }
            if sizes.iter().any(SymInt::is_static) {
                for size in &sizes {
                    self.specialize(size, &format!("{op}: broadcast against a static size"), loc);
                }
                return SymInt::constant(out[k]);
            }
            sizes[1..].iter().fold(sizes[0].clone(), |acc, d| self.unify(&acc, d, &reason, loc))
        });
        SymShape(dims.collect())
    }
    // ANCHOR_END: sym_broadcast

    fn matmul(&mut self, a: &SymShape, b: &SymShape, out: &[usize], loc: Option<SourceLocation>) -> SymShape {
        let (ra, rb, r) = (a.rank(), b.rank(), out.len());
        let batch_a = SymShape(a.dims()[..ra - 2].to_vec());
        let batch_b = SymShape(b.dims()[..rb - 2].to_vec());
        let mut dims = self.broadcast(&[&batch_a, &batch_b], &out[..r - 2], "matmul", loc).0;
        self.unify(&a.dims()[ra - 1], &b.dims()[rb - 2], "matmul: inner sizes must match", loc);
        dims.push(a.dims()[ra - 2].clone());
        dims.push(b.dims()[rb - 1].clone());
        SymShape(dims)
    }

    /// A reshape keeps the sizes of the leading and trailing dims it does not change
    /// (`[s0, 4, 8]` to `[s0, 32]` keeps `s0`), and lets one size of the dims in between absorb
    /// their symbols (`[s0, 4, 8]` to `[4*s0, 8]`). When no size can, the symbols are
    /// specialized. Matching by position, not by value, keeps a static size that happens to
    /// equal a symbol's traced value static.
    fn reshape(&mut self, x: &SymShape, target: &[usize], loc: Option<SourceLocation>) -> SymShape {
        let (r, t) = (x.rank(), target.len());
        let same = |i: usize, j: usize| self.hint(&x.dims()[i]) == target[j];
        let prefix = (0..r.min(t)).take_while(|&i| same(i, i)).count();
        let suffix = (0..(r - prefix).min(t - prefix)).take_while(|&k| same(r - 1 - k, t - 1 - k)).count();
        let middle = SymShape(x.dims()[prefix..r - suffix].to_vec()).numel();
        let targets = &target[prefix..t - suffix];
        let mut dims: Vec<SymInt> = x.dims()[..prefix].to_vec();
        if middle.is_static() {
            dims.extend(targets.iter().map(|&n| SymInt::constant(n)));
        } else {
            let product: usize = targets.iter().product();
            let absorber = targets.iter().enumerate().find_map(|(j, &n)| {
                let others = SymInt::constant(product / n.max(1));
                (n >= 2).then(|| middle.div_exact(&others)).flatten().map(|size| (j, size))
            });
            let Some((j, size)) = absorber else {
                self.specialize(&x.numel(), "reshape: the new shape splits a dynamic size", loc);
                return SymShape::from_static(target);
            };
            dims.extend(
                targets.iter().enumerate().map(|(k, &n)| if k == j { size.clone() } else { SymInt::constant(n) }),
            );
        }
        dims.extend_from_slice(&x.dims()[r - suffix..]);
        SymShape(dims)
    }

    /// An expand keeps the input's sizes where they are not 1. A new or stretched size is a
    /// constant: the target is a list of numbers, so the rule cannot tell that one came from a
    /// dynamic size (broadcasting in a pointwise op keeps sizes symbolic instead).
    fn expand(&self, x: &SymShape, target: &[usize]) -> SymShape {
        let lead = target.len() - x.rank();
        let dims = target.iter().enumerate().map(|(i, &t)| match i.checked_sub(lead).map(|j| &x.dims()[j]) {
            Some(size) if size.as_constant() != Some(1) => size.clone(),
            _ => SymInt::constant(t),
        });
        SymShape(dims.collect())
    }
}

/// A branch's output shape in terms of the parent graph's sizes: each of the branch's symbols
/// stands for the size of the operand dimension it was read from.
fn branch_output(branch: &Graph, operands: &[&SymShape]) -> SymShape {
    let parent_size = |symbol: Symbol| {
        let (_, info) = branch.symbols().find(|(s, _)| *s == symbol).expect("output sizes use free symbols");
        let input =
            branch.placeholders().iter().position(|&p| p == info.placeholder).expect("symbols come from placeholders");
        operands[input].dims()[info.dim].clone()
    };
    let output = &branch.node(branch.outputs()[0]).sym_shape;
    SymShape(
        output
            .dims()
            .iter()
            .map(|d| d.symbols().iter().fold(SymInt::constant(d.coeff()), |acc, &s| acc.mul(&parent_size(s))))
            .collect(),
    )
}
