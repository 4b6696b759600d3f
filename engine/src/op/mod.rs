//! The operator catalogue, the analogue of ATen's `native_functions.yaml`: one enum that names
//! every op the engine knows, with its shape rule and its scalar semantics.
//!
//! Eager kernels (CPU and CUDA), graph nodes, decompositions and code generation all speak in
//! these ops, so a learner meets the same names at every stage of the pipeline.
//!
//! ## The catalogue, by class
//!
//! | class | ops | operands | eager kernel (`device::provider::KernelProvider`) | Inductor |
//! | --- | --- | --- | --- | --- |
//! | pointwise | [`UnaryOp`]: one line each in `op/unary.rs` | 1 | `unary`: a loop over the reference function (CPU), the C expression (CUDA) | `PointwiseOp::Unary`, printed from the C expression |
//! | pointwise | [`BinaryOp`]: one line each in `op/binary.rs` | 2 | `binary`, the same way | `PointwiseOp::Binary` |
//! | pointwise | `where` | 3 | `where_` | `PointwiseOp::Where` |
//! | pointwise | [`CustomOp`] (`op/custom.rs`) | its own | `custom`: its compiled C (CPU) or CUDA C | `PointwiseOp::Custom`, its source pasted into the kernel |
//! | pointwise | `to_dtype` | 1 | `copy` into the new dtype | `PointwiseOp::ToDtype`: a store in the new dtype (and a rounding inside a fused chain) |
//! | reduction | `sum`, `mean`, `amax` ([`ReduceOp`]) | 1 | `reduce` | a reduction node, fused with pointwise neighbours |
//! | view | `reshape`, `permute`, `expand`, `slice` | 1 | none: a new layout, from `Op::view_of` (`op/view.rs`) | the same `view_of`, no loop |
//! | view | `contiguous` | 1 | `copy` when not already dense | a copy when not dense |
//! | extern | `matmul` | 2 | `matmul` (a GEMM crate; cuBLAS) | a library call in the call plan |
//! | extern | `scaled_dot_product_attention` ([`AttentionMask`], `op/attention.rs`) | 3 or 4 | `attention`: blocked online softmax (CPU), a flash-attention kernel (CUDA) | an extern kernel call, `flash_attention` |
//! | extern | `scaled_dot_product_attention_backward` (its gradients, for autograd) | 5 or 6 | `attention_backward`: the scores recomputed block by block (CPU), a flash-attention backward (CUDA) | an extern kernel call, `flash_attention_backward` |
//! | extern | `scaled_mm` (FP8 inputs, per-tensor scales) | 4 | `scaled_mm`: cuBLASLt's FP8 GEMM (GPUs of compute capability 8.9 on; refused elsewhere) | an extern kernel call, `scaled_mm` |
//! | composite | `gelu`, `softmax`, `log_softmax`, `layer_norm`, `linear` | 1 to 3 | `unary`, `softmax`, `layer_norm`; `linear` is a matmul and an add | decomposed by [`aot`](crate::aot) first |
//! | higher order | `cond` | 1 + the branches' inputs | the chosen branch's graph, through fx | an eager fallback step |
//! | mutation | `copy_` | 2 | the source written into the first operand's memory | the value stored into the graph input's own memory |
//!
//! [`Op::class`], [`Op::infer_shape`] and [`Op::infer_dtype`] below hold each op's class, shape
//! rule and dtype rule.
//!
//! ## Adding a unary pointwise op
//!
//! The unary ops are one table, in `op/unary.rs`: a line gives the variant, its name, its
//! reference value on an `f32` and its C expression. From that line come the CPU eager kernel
//! (a loop over the reference function), the CUDA eager kernel and the generated C and CUDA C
//! (the C expression), and the graph name. Then:
//!
//! 1. add the line to the table;
//! 2. add the `Tensor` method in `ops/pointwise.rs` (one line in its table);
//! 3. tests: the float64 reference in `tests/common/reference.rs` (the property test
//!    `tests/eager_reference.rs` covers every op of [`UnaryOp::ALL`], on CPU and, in
//!    `tests/gpu_eager.rs`, on CUDA) and a compiled-vs-eager case in `tests/compiled_vs_eager.rs`.
//!
//! `log1p` was added this way.

use std::fmt;

mod attention;
mod binary;
mod custom;
pub(crate) mod subgraph;
mod unary;
mod view;

pub use attention::{AttentionMask, AttentionParams, AttentionSizes};
pub use binary::BinaryOp;
pub(crate) use binary::BinaryVisitor;
pub use custom::{CustomOp, CustomOpBuilder, MAX_CUSTOM_OP_INPUTS};
pub use subgraph::{Subgraph, SubgraphBody};
pub use unary::UnaryOp;
pub(crate) use unary::UnaryVisitor;
pub(crate) use view::ViewOf;

use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::layout::{broadcast_shapes, checked_numel, numel};
use crate::scalar::Scalar;

/// Reductions over one dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum of the elements.
    Sum,
    /// Arithmetic mean.
    Mean,
    /// Largest element (NaN if any element is NaN).
    Max,
}

impl ReduceOp {
    /// The op's name in graphs and kernel names.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "amax",
        }
    }
}

/// One op of the catalogue with its non-tensor parameters. Tensor and scalar operands are not
/// part of the op: they are the node's arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Elementwise function of one input.
    Unary(UnaryOp),
    /// Elementwise function of two broadcast inputs (either may be a scalar).
    Binary(BinaryOp),
    /// `where(cond, a, b)`: `a` where `cond != 0`, else `b`; all three broadcast.
    Where,
    /// Reduction over `dim`, keeping it as size 1 when `keepdim`.
    Reduce {
        /// Which reduction.
        kind: ReduceOp,
        /// The dimension reduced.
        dim: usize,
        /// Keep the reduced dimension with size 1.
        keepdim: bool,
    },
    /// Matrix product of the last two dimensions, batch dimensions broadcast.
    Matmul,
    /// The same elements with a new shape (a view when the input is contiguous).
    Reshape {
        /// The new sizes; their product equals the input's element count.
        shape: Vec<usize>,
    },
    /// Dimensions reordered; output dimension `i` is input dimension `dims[i]`.
    Permute {
        /// A permutation of `0..rank`.
        dims: Vec<usize>,
    },
    /// Broadcast to a larger shape without copying (stride 0).
    Expand {
        /// The target shape.
        shape: Vec<usize>,
    },
    /// Every `step`-th element of `start..end` along `dim`.
    Slice {
        /// The dimension sliced.
        dim: usize,
        /// First index kept.
        start: usize,
        /// One past the last index considered.
        end: usize,
        /// Distance between kept indices (at least 1).
        step: usize,
    },
    /// A dense row-major copy (no copy when already contiguous).
    Contiguous,
    /// The operands joined end to end along `dim` (`torch.cat`): every operand has the same rank
    /// and the same sizes except along `dim`, and the output's size there is their sum.
    Cat {
        /// The dimension joined along.
        dim: usize,
    },
    /// `exp(x - max) / sum(exp(x - max))` along `dim`; composite.
    Softmax {
        /// The dimension normalised.
        dim: usize,
    },
    /// `x - max - log(sum(exp(x - max)))` along `dim`; composite.
    LogSoftmax {
        /// The dimension normalised.
        dim: usize,
    },
    /// Normalise the last dimension to zero mean and unit variance, then scale and shift:
    /// arguments `(x, weight, bias)`; composite.
    LayerNorm {
        /// Added to the variance before the square root.
        eps: Scalar,
    },
    /// `x @ weight.T (+ bias)`: arguments `(x, weight)` or `(x, weight, bias)`; composite.
    Linear,
    /// `cond(pred, operands...)`, the analogue of `torch.cond`: runs `true_graph` on the operands
    /// when the one-element tensor `pred` is nonzero, `false_graph` otherwise. Both subgraphs take
    /// every operand (in order, one placeholder each) and return one tensor of the same shape.
    /// Each subgraph has its own size symbols, bound from its own inputs.
    Cond {
        /// Run when `pred != 0`.
        true_graph: Subgraph,
        /// Run when `pred == 0`.
        false_graph: Subgraph,
    },
    /// `softmax(q @ k^T * scale [+ mask]) @ v` in one kernel, keys visited in tiles with an online
    /// softmax so that no `[L, S]` score matrix is stored (`torch.nn.functional.
    /// scaled_dot_product_attention`): arguments `(q, k, v)` or `(q, k, v, mask)`.
    ScaledDotProductAttention {
        /// How the fourth operand, if any, is read.
        mask: AttentionMask,
        /// Query `i` sees only keys `j <= i` (PyTorch's top-left aligned causal mask).
        causal: bool,
        /// Multiplies `q @ k^T` (PyTorch's default is `1/sqrt(head_dim)`).
        scale: Scalar,
    },
    /// The gradients of [`Op::ScaledDotProductAttention`]'s `q`, `k` and `v` in one kernel that
    /// recomputes the scores block by block (the flash-attention backward, as ATen's
    /// `_scaled_dot_product_flash_attention_backward`): arguments `(grad_out, q, k, v, out)` or
    /// `(grad_out, q, k, v, out, mask)`. The engine's ops have one output, so the three gradients
    /// come packed, flattened and joined in that order: a 1-d tensor of
    /// `q.numel() + k.numel() + v.numel()` elements that autograd slices apart.
    ScaledDotProductAttentionBackward {
        /// How the sixth operand, if any, is read.
        mask: AttentionMask,
        /// Query `i` saw only keys `j <= i`.
        causal: bool,
        /// Multiplied `q @ k^T`.
        scale: Scalar,
    },
    /// A registered elementwise op with its own kernel source ([`CustomOp`]): its inputs broadcast
    /// together and its C (or CUDA C) function computes each output element.
    Custom(CustomOp),
    /// The input's values in another dtype, rounded to nearest (ties to even): PyTorch's
    /// `prims.convert_element_type`, what `tensor.to(dtype)` and autocast record.
    ToDtype {
        /// The dtype converted to.
        dtype: DType,
    },
    /// `(a * scale_a) @ (b * scale_b)` of two 8-bit-float matrices `a[m, k]` and `b[k, n]` with
    /// one-element `f32` scales, accumulated in `f32` and stored as `out_dtype`:
    /// `torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=...)`. Arguments
    /// `(a, b, scale_a, scale_b)`. Runs on GPUs of compute capability 8.9 and newer only.
    ScaledMm {
        /// The dtype of the product (`f32`, `bf16` or `f16`).
        out_dtype: DType,
    },
    /// `target.copy_(source)`: writes the second operand's values into the first operand's memory
    /// and returns them (PyTorch's in-place `aten.copy_`, as an optimizer updates a parameter).
    /// Both operands have the same shape. In a graph the target is always a graph input: a
    /// compiled function that updates a captured tensor records this node, and Inductor stores the
    /// new values straight into the input's memory (see [`crate::inductor`]).
    CopyInto,
}

/// What kind of loop an op becomes, the classification Inductor's lowering starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// One output element from the same-index input elements.
    Pointwise,
    /// Combines many input elements along a dimension.
    Reduction,
    /// Changes only how elements are addressed.
    View,
    /// Handled by a library kernel (matmul).
    Extern,
    /// Defined in terms of other ops; AOT replaces it by its decomposition.
    Composite,
    /// Holds subgraphs and runs one of them (`cond`): a backend compiles each subgraph, or runs
    /// the node eagerly.
    HigherOrder,
    /// Writes into the memory of an existing tensor (`copy_`): never removed, never recomputed.
    Mutation,
}

impl Op {
    /// The op's name as printed in graphs (`add`, `sum`, `softmax`).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Where => "where",
            Op::Reduce { kind, .. } => kind.name(),
            Op::Matmul => "matmul",
            Op::Reshape { .. } => "reshape",
            Op::Permute { .. } => "permute",
            Op::Expand { .. } => "expand",
            Op::Slice { .. } => "slice",
            Op::Contiguous => "contiguous",
            Op::Cat { .. } => "cat",
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::LayerNorm { .. } => "layer_norm",
            Op::Linear => "linear",
            Op::Cond { .. } => "cond",
            Op::ScaledDotProductAttention { .. } => "scaled_dot_product_attention",
            Op::ScaledDotProductAttentionBackward { .. } => "scaled_dot_product_attention_backward",
            Op::Custom(custom) => custom.name(),
            Op::ToDtype { .. } => "to_dtype",
            Op::ScaledMm { .. } => "scaled_mm",
            Op::CopyInto => "copy_",
        }
    }

    /// How the op is lowered.
    pub fn class(&self) -> OpClass {
        match self {
            Op::Unary(UnaryOp::Gelu) => OpClass::Composite,
            Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Custom(_) | Op::ToDtype { .. } => OpClass::Pointwise,
            Op::Reduce { .. } => OpClass::Reduction,
            Op::Matmul
            | Op::ScaledDotProductAttention { .. }
            | Op::ScaledDotProductAttentionBackward { .. }
            | Op::Cat { .. }
            | Op::ScaledMm { .. } => OpClass::Extern,
            Op::Reshape { .. } | Op::Permute { .. } | Op::Expand { .. } | Op::Slice { .. } | Op::Contiguous => {
                OpClass::View
            }
            Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::LayerNorm { .. } | Op::Linear => OpClass::Composite,
            Op::Cond { .. } => OpClass::HigherOrder,
            Op::CopyInto => OpClass::Mutation,
        }
    }

    /// How many operands (tensors or scalars) the op takes: a fixed count, or a range.
    fn arity(&self) -> std::ops::RangeInclusive<usize> {
        match self {
            Op::Binary(_) | Op::Matmul | Op::CopyInto => 2..=2,
            Op::Where | Op::LayerNorm { .. } => 3..=3,
            Op::ScaledMm { .. } => 4..=4,
            Op::Linear => 2..=3,
            Op::ScaledDotProductAttention { mask: AttentionMask::None, .. } => 3..=3,
            Op::ScaledDotProductAttention { .. } => 4..=4,
            Op::ScaledDotProductAttentionBackward { mask: AttentionMask::None, .. } => 5..=5,
            Op::ScaledDotProductAttentionBackward { .. } => 6..=6,
            Op::Cond { true_graph, .. } => {
                let n = 1 + true_graph.body().input_count();
                n..=n
            }
            Op::Custom(custom) => custom.arity()..=custom.arity(),
            Op::Cat { .. } => 1..=usize::MAX,
            _ => 1..=1,
        }
    }

    /// Whether operand `i` may be a scalar rather than a tensor.
    pub fn accepts_scalar(&self, i: usize) -> bool {
        match self {
            Op::Binary(_) => true,
            Op::Where => i > 0,
            _ => false,
        }
    }

    /// The output shape for operands of these shapes (`None` for a scalar operand), checking
    /// every rule the op has. This is the engine's FakeTensor: shape propagation without data.
    pub fn infer_shape(&self, operands: &[Option<&[usize]>], location: SourceLocation) -> Result<Vec<usize>> {
        crate::wires::trip(crate::wires::Wire::InferShape);
        let out = self.output_shape(operands, location)?;
        if checked_numel(&out).is_none() {
            return Err(Error::Shape {
                op: self.name(),
                message: format!("the result, of shape {out:?}, has more elements than fit in memory"),
                shapes: operands.iter().map(|s| s.unwrap_or(&[]).to_vec()).collect(),
                location,
            });
        }
        Ok(out)
    }

    /// The output shape by the op's own rule, before the element count is checked.
    fn output_shape(&self, operands: &[Option<&[usize]>], location: SourceLocation) -> Result<Vec<usize>> {
        let op = self.name();
        let invalid = |message: String| Error::InvalidArgument { op, message, location };
        if !self.arity().contains(&operands.len()) {
            return Err(invalid(format!("takes {:?} operands, got {}", self.arity(), operands.len())));
        }
        for (i, operand) in operands.iter().enumerate() {
            if operand.is_none() && !self.accepts_scalar(i) {
                return Err(invalid(format!("operand {i} must be a tensor, got a scalar")));
            }
        }
        let shapes: Vec<&[usize]> = operands.iter().map(|s| s.unwrap_or(&[])).collect();
        let shape_error = |message: &str| Error::Shape {
            op,
            message: message.to_string(),
            shapes: shapes.iter().map(|s| s.to_vec()).collect(),
            location,
        };
        let check_dim = |dim: usize, rank: usize| {
            if dim < rank {
                Ok(())
            } else {
                Err(invalid(format!("dim {dim} is out of range for a tensor of rank {rank}")))
            }
        };
        match self {
            Op::Unary(_) | Op::Contiguous | Op::ToDtype { .. } => Ok(shapes[0].to_vec()),
            Op::ScaledMm { .. } => {
                let (a, b) = (shapes[0], shapes[1]);
                let scalars = shapes[2..].iter().all(|s| numel(s) == 1);
                if a.len() != 2 || b.len() != 2 || a[1] != b[0] || !scalars {
                    return Err(shape_error("expects a[m, k], b[k, n] and one-element scales"));
                }
                Ok(vec![a[0], b[1]])
            }
            Op::Binary(_) | Op::Where | Op::Custom(_) => shapes[1..]
                .iter()
                .try_fold(shapes[0].to_vec(), |acc, s| broadcast_shapes(&acc, s))
                .ok_or_else(|| shape_error("shapes cannot be broadcast together")),
            Op::Reduce { kind, dim, keepdim } => {
                check_dim(*dim, shapes[0].len())?;
                // As in PyTorch: an empty sum is 0 and an empty mean NaN, but an empty max has no
                // value at all.
                if *kind == ReduceOp::Max && shapes[0][*dim] == 0 {
                    return Err(shape_error(&format!("expected reduction dim {dim} to have non-zero size")));
                }
                let mut out = shapes[0].to_vec();
                if *keepdim {
                    out[*dim] = 1;
                } else {
                    out.remove(*dim);
                }
                Ok(out)
            }
            Op::Softmax { dim } | Op::LogSoftmax { dim } => {
                check_dim(*dim, shapes[0].len())?;
                Ok(shapes[0].to_vec())
            }
            Op::Matmul => matmul_shape(shapes[0], shapes[1]).ok_or_else(|| {
                shape_error(
                    "needs two tensors of rank 2 or more whose inner sizes match and whose batch sizes broadcast",
                )
            }),
            Op::Linear => {
                let (x, w) = (shapes[0], shapes[1]);
                let bias_ok = shapes.get(2).is_none_or(|b| w.len() == 2 && *b == [w[0]]);
                if x.is_empty() || w.len() != 2 || x[x.len() - 1] != w[1] || !bias_ok {
                    return Err(shape_error("expects x[..., in], weight[out, in] and bias[out]"));
                }
                let mut out = x.to_vec();
                *out.last_mut().expect("x has rank >= 1") = w[0];
                Ok(out)
            }
            Op::LayerNorm { .. } => {
                let x = shapes[0];
                let last = x.last().copied();
                if last.is_none() || shapes[1] != [last.unwrap()] || shapes[2] != [last.unwrap()] {
                    return Err(shape_error("expects x[..., d], weight[d] and bias[d]"));
                }
                Ok(x.to_vec())
            }
            Op::Reshape { shape } => {
                if checked_numel(shape) != Some(numel(shapes[0])) {
                    return Err(Error::Shape {
                        op,
                        message: format!("cannot view {} elements as {shape:?}", numel(shapes[0])),
                        shapes: vec![shapes[0].to_vec()],
                        location,
                    });
                }
                Ok(shape.clone())
            }
            Op::Permute { dims } => {
                let rank = shapes[0].len();
                let mut seen = vec![false; rank];
                let is_permutation =
                    dims.len() == rank && dims.iter().all(|&d| d < rank && !std::mem::replace(&mut seen[d], true));
                if !is_permutation {
                    return Err(invalid(format!("{dims:?} is not a permutation of the {rank} dims")));
                }
                Ok(dims.iter().map(|&d| shapes[0][d]).collect())
            }
            Op::Expand { shape } => {
                let from = shapes[0];
                let fits = shape.len() >= from.len()
                    && from.iter().zip(&shape[shape.len() - from.len()..]).all(|(&f, &t)| f == t || f == 1);
                if !fits {
                    return Err(Error::Shape {
                        op,
                        message: format!("cannot expand to {shape:?}: each size must match or be 1"),
                        shapes: vec![from.to_vec()],
                        location,
                    });
                }
                Ok(shape.clone())
            }
            Op::ScaledDotProductAttention { mask, causal, .. } => {
                attention::output_shape(&shapes, *mask, *causal).map_err(|m| shape_error(&m))
            }
            Op::ScaledDotProductAttentionBackward { mask, causal, .. } => {
                attention::backward_output_shape(&shapes, *mask, *causal).map_err(|m| shape_error(&m))
            }
            Op::Cond { true_graph, false_graph } => cond_shape(true_graph, false_graph, &shapes).map_err(&invalid),
            Op::Cat { dim } => {
                check_dim(*dim, shapes[0].len())?;
                cat_shape(&shapes, *dim).map_err(|m| shape_error(&m))
            }
            Op::Slice { dim, start, end, step } => {
                check_dim(*dim, shapes[0].len())?;
                let size = shapes[0][*dim];
                if *step == 0 || start > end || *end > size {
                    return Err(invalid(format!(
                        "slice {start}..{end} step {step} does not fit dim {dim} of size {size} (need start <= end <= size, step >= 1)"
                    )));
                }
                let mut out = shapes[0].to_vec();
                out[*dim] = (end - start).div_ceil(*step);
                Ok(out)
            }
            Op::CopyInto if shapes[0] == shapes[1] => Ok(shapes[0].to_vec()),
            Op::CopyInto => Err(shape_error("copies a tensor of the same shape into the target")),
        }
    }
}

impl Op {
    /// The output's dtype for operands of these dtypes and ranks (`None` for a scalar), checking
    /// the op's dtype rules: PyTorch's type promotion for elementwise ops
    /// ([`DType::result_type`]), one dtype for both sides of a product, 8-bit floats only where
    /// they are accepted. Every op computes in `f32` whatever its dtype (see [`crate::dtype`]).
    pub fn infer_dtype(&self, operands: &[Option<(DType, usize)>], location: SourceLocation) -> Result<DType> {
        let op = self.name();
        let dtypes: Vec<DType> = operands.iter().flatten().map(|&(d, _)| d).collect();
        let error = |message: &str| Error::DType { op, message: message.to_string(), dtypes: dtypes.clone(), location };
        let first = dtypes.first().copied().unwrap_or_default();
        let takes_fp8 = matches!(
            self,
            Op::ToDtype { .. }
                | Op::ScaledMm { .. }
                | Op::Contiguous
                | Op::Reshape { .. }
                | Op::Permute { .. }
                | Op::Expand { .. }
                | Op::Slice { .. }
                | Op::Cat { .. }
        );
        if !takes_fp8 && dtypes.iter().any(|d| d.is_fp8()) {
            return Err(error(
                "8-bit floats are matrix-product inputs only: convert with `to_dtype`, or multiply with `scaled_mm`",
            ));
        }
        // Elementwise promotion over the tensor operands (`where`'s condition does not take part).
        let promoted = |skip: usize| {
            let tensors: Vec<(DType, usize)> = operands.iter().skip(skip).flatten().copied().collect();
            DType::result_type(&tensors).map_err(|(a, b)| {
                error(&format!("PyTorch does not promote {} with {}: convert one with `to_dtype`", a, b))
            })
        };
        let same = |what: &str| {
            if dtypes.iter().all(|&d| d == first) {
                Ok(first)
            } else {
                Err(error(&format!("expected {what} of one dtype (convert with `to_dtype` or run under autocast)")))
            }
        };
        match self {
            Op::Binary(_) | Op::Custom(_) | Op::Cat { .. } => promoted(0),
            Op::Where => promoted(1),
            Op::ToDtype { dtype } => Ok(*dtype),
            Op::Matmul => same("both operands"),
            Op::Linear => same("the input, weight and bias"),
            Op::ScaledDotProductAttention { mask, .. } => {
                let qkv = &dtypes[..3.min(dtypes.len())];
                if qkv.iter().any(|&d| d != first) {
                    return Err(error("expected query, key and value of one dtype"));
                }
                if *mask == AttentionMask::Additive && dtypes.get(3).is_some_and(|&m| m != first && m != DType::F32) {
                    return Err(error("an additive mask has the query's dtype or f32"));
                }
                Ok(first)
            }
            Op::ScaledMm { out_dtype } => {
                if !dtypes[0].is_fp8() || !dtypes[1].is_fp8() || dtypes[0] == dtypes[1] && dtypes[0] == DType::F8E5M2 {
                    return Err(error(
                        "expects 8-bit float matrices (e4m3 x e4m3, e4m3 x e5m2 or e5m2 x e4m3; two e5m2 are not \
                         supported, as in cuBLASLt)",
                    ));
                }
                if dtypes[2..].iter().any(|&d| d != DType::F32) {
                    return Err(error("expects f32 scales"));
                }
                if out_dtype.is_fp8() {
                    return Err(error("the output dtype must be f32, bf16 or f16"));
                }
                Ok(*out_dtype)
            }
            Op::Cond { true_graph, false_graph } => {
                let (t, f) = (true_graph.body().output_dtype(), false_graph.body().output_dtype());
                if t != f {
                    return Err(Error::DType {
                        op,
                        message: "the branches must return one dtype".into(),
                        dtypes: vec![t, f],
                        location,
                    });
                }
                Ok(t)
            }
            _ => Ok(first),
        }
    }
}

/// The output shape of a `cond` whose operands (after the predicate) have these shapes, or what is
/// wrong with them. Each branch checks the operands against its (possibly symbolic) input sizes.
fn cond_shape(true_graph: &Subgraph, false_graph: &Subgraph, shapes: &[&[usize]]) -> Result<Vec<usize>, String> {
    if shapes[0].iter().product::<usize>() != 1 {
        return Err(format!("the predicate must have exactly one element, got shape {:?}", shapes[0]));
    }
    let mut outputs = Vec::with_capacity(2);
    for (branch, graph) in [("true", true_graph), ("false", false_graph)] {
        outputs.push(graph.body().output_shape(&shapes[1..]).map_err(|why| format!("the {branch} branch: {why}"))?);
    }
    if outputs[0] != outputs[1] {
        return Err(format!("the branches return different shapes: {:?} and {:?}", outputs[0], outputs[1]));
    }
    Ok(outputs.swap_remove(0))
}

/// The shape of `torch.cat(shapes, dim)`, or PyTorch's complaint about them. Unlike PyTorch, a
/// one-dimensional empty tensor is not skipped: every operand must have the same rank.
fn cat_shape(shapes: &[&[usize]], dim: usize) -> Result<Vec<usize>, String> {
    let first = shapes[0];
    let mut out = first.to_vec();
    out[dim] = 0;
    for (i, shape) in shapes.iter().enumerate() {
        if shape.len() != first.len() {
            return Err(format!(
                "tensors must have the same number of dimensions: got {} and {} for tensor number {i} in the list",
                first.len(),
                shape.len()
            ));
        }
        if let Some(d) = (0..first.len()).find(|&d| d != dim && shape[d] != first[d]) {
            return Err(format!(
                "sizes of tensors must match except in dimension {dim}: expected size {} but got size {} for tensor number {i} in the list",
                first[d], shape[d]
            ));
        }
        out[dim] += shape[dim];
    }
    Ok(out)
}

/// The shape of `a @ b` for tensors of rank 2 or more, or `None` when they do not multiply.
fn matmul_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    if a.len() < 2 || b.len() < 2 || a[a.len() - 1] != b[b.len() - 2] {
        return None;
    }
    let mut out = broadcast_shapes(&a[..a.len() - 2], &b[..b.len() - 2])?;
    out.push(a[a.len() - 2]);
    out.push(b[b.len() - 1]);
    Some(out)
}

impl Op {
    /// The op's non-tensor parameters as `(name, value)` pairs, printed as keyword arguments.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        match self {
            Op::Reduce { dim, keepdim, .. } => vec![("dim", dim.to_string()), ("keepdim", keepdim.to_string())],
            Op::Softmax { dim } | Op::LogSoftmax { dim } | Op::Cat { dim } => vec![("dim", dim.to_string())],
            Op::Reshape { shape } | Op::Expand { shape } => vec![("shape", format!("{shape:?}"))],
            Op::Permute { dims } => vec![("dims", format!("{dims:?}"))],
            Op::Slice { dim, start, end, step } => vec![
                ("dim", dim.to_string()),
                ("start", start.to_string()),
                ("end", end.to_string()),
                ("step", step.to_string()),
            ],
            Op::LayerNorm { eps } => vec![("eps", eps.to_string())],
            Op::ScaledDotProductAttention { mask, causal, scale }
            | Op::ScaledDotProductAttentionBackward { mask, causal, scale } => {
                vec![("mask", mask.to_string()), ("causal", causal.to_string()), ("scale", scale.to_string())]
            }
            Op::ToDtype { dtype } => vec![("dtype", dtype.to_string())],
            Op::ScaledMm { out_dtype } => vec![("out_dtype", out_dtype.to_string())],
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for Op {
    /// The op with its parameters: `sum(dim=1, keepdim=true)`, or just `relu`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        let params = self.params();
        if !params.is_empty() {
            let joined: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            write!(f, "({})", joined.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here() -> SourceLocation {
        SourceLocation::caller()
    }

    #[test]
    fn broadcast_errors_name_both_shapes() {
        let err = Op::Binary(BinaryOp::Add).infer_shape(&[Some(&[2, 3]), Some(&[4])], here()).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("add: shapes cannot be broadcast together: [2, 3] and [4]"), "{text}");
        assert!(text.contains("op/mod.rs"), "{text}");
    }

    #[test]
    fn relu_keeps_nan_as_pytorch_does() {
        assert!(UnaryOp::Relu.apply(f32::NAN).is_nan());
        assert_eq!(UnaryOp::Relu.apply(-2.0), 0.0);
        let x = crate::Tensor::from_vec(vec![f32::NAN, -1.0, 3.0], &[3]).unwrap();
        let y = x.relu().unwrap().to_vec().unwrap();
        assert!(y[0].is_nan() && y[1] == 0.0 && y[2] == 3.0, "{y:?}");
    }

    #[test]
    fn overflowing_shapes_are_errors_naming_them() {
        let big = 1usize << 62;
        let err = Op::Matmul.infer_shape(&[Some(&[big, 2]), Some(&[2, big])], here()).unwrap_err().to_string();
        assert!(err.starts_with("matmul: the result, of shape"), "{err}");
        assert!(err.contains(&format!("[{big}, 2]")) && err.contains(&format!("[2, {big}]")), "{err}");
        // 2^63 + 1 times 2 wraps to 2: it must not pass for a view of two elements.
        let wrap = Op::Reshape { shape: vec![(1usize << 63) + 1, 2] };
        assert!(wrap.infer_shape(&[Some(&[2])], here()).is_err());
        let x = crate::Tensor::zeros(&[2]);
        assert!(x.reshape(&[(1usize << 63) + 1, 2]).is_err());
        let expand = Op::Expand { shape: vec![big, big] };
        assert!(expand.infer_shape(&[Some(&[1])], here()).is_err());
    }

    #[test]
    fn matmul_broadcasts_batch_dims() {
        let shape = Op::Matmul.infer_shape(&[Some(&[5, 1, 2, 3]), Some(&[4, 3, 7])], here()).unwrap();
        assert_eq!(shape, vec![5, 4, 2, 7]);
        assert!(Op::Matmul.infer_shape(&[Some(&[2, 3]), Some(&[4, 7])], here()).is_err());
    }

    #[test]
    fn scalars_only_where_allowed() {
        assert!(Op::Binary(BinaryOp::Mul).infer_shape(&[Some(&[2]), None], here()).is_ok());
        assert!(Op::Unary(UnaryOp::Exp).infer_shape(&[None], here()).is_err());
        assert!(Op::Where.infer_shape(&[None, Some(&[2]), Some(&[2])], here()).is_err());
    }
}
