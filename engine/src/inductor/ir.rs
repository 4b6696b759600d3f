//! The loop-level IR, the analogue of TorchInductor's `ir.py` (`Pointwise`, `Reduction`,
//! `ExternKernel`, `ReinterpretView`): each primitive graph node becomes one [`IrNode`] that says
//! what to compute for one element of its iteration space, reading memory through
//! [`Affine`] index expressions. Views are not nodes: they only change how a buffer is indexed.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::index::Affine;
use crate::dtype::DType;
use crate::error::SourceLocation;
use crate::fx::NodeId;
use crate::layout::{Layout, numel};
use crate::op::CustomOp;
use crate::op::{BinaryOp, Op, ReduceOp, UnaryOp};

/// An IR node: its index in [`LoweredGraph::nodes`], and the `N` of its buffer `bufN`. Typed, so
/// that a node cannot be passed where a kernel ([`KernelId`](super::scheduler::KernelId)) or a
/// memory slot ([`SlotId`](super::call_plan::SlotId)) is meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IrId(pub usize);

impl fmt::Display for IrId {
    /// The bare number, as buffer names use it (`buf{id}`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One value per IR node, indexed by [`IrId`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerNode<T>(pub Vec<T>);

impl<T: Clone> PerNode<T> {
    /// `value` for each of `len` nodes.
    pub fn filled(len: usize, value: T) -> Self {
        PerNode(vec![value; len])
    }
}

impl<T> PerNode<T> {
    /// Each node with its value.
    pub fn iter(&self) -> impl Iterator<Item = (IrId, &T)> {
        self.0.iter().enumerate().map(|(i, v)| (IrId(i), v))
    }
}

impl<T> std::ops::Index<IrId> for PerNode<T> {
    type Output = T;
    fn index(&self, id: IrId) -> &T {
        &self.0[id.0]
    }
}

impl<T> std::ops::IndexMut<IrId> for PerNode<T> {
    fn index_mut(&mut self, id: IrId) -> &mut T {
        &mut self.0[id.0]
    }
}

/// A region of memory a kernel can read: a graph input or the output of an IR node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BufferName {
    /// The graph input (placeholder) with this position.
    Input(usize),
    /// The output of this IR node, printed `buf<N>` as in Inductor.
    Node(IrId),
}

impl fmt::Display for BufferName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferName::Input(i) => write!(f, "arg{i}"),
            BufferName::Node(n) => write!(f, "buf{n}"),
        }
    }
}

/// A strided view of a buffer (Inductor's `ReinterpretView`): how a value reaches its readers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// The memory viewed.
    pub buffer: BufferName,
    /// Sizes, strides and offset of the view, in elements of the buffer.
    pub layout: Layout,
}

/// A read of one element: `buffer[index]`, with the index over the reader's iteration space.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Load {
    /// The memory read.
    pub buffer: BufferName,
    /// Which element, as a function of the reader's loop coordinates.
    pub index: Affine,
}

/// An operand of a pointwise computation.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// An element loaded from memory.
    Load(Load),
    /// A constant baked into the kernel.
    Constant(f32),
}

/// The scalar function a pointwise node applies to its operands.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PointwiseOp {
    /// A unary op of the catalogue.
    Unary(UnaryOp),
    /// A binary op of the catalogue.
    Binary(BinaryOp),
    /// `cond != 0 ? a : b`.
    Where,
    /// The operand itself: a copy into a dense buffer (`contiguous`, a reshape that needs one).
    Copy,
    /// A registered custom op: its own C (or CUDA C) function, called per element.
    Custom(CustomOp),
    /// The operand rounded to `dtype` (and back to float, the dtype kernels compute in): an
    /// explicit conversion, `to_dtype`, which rounds where it narrows as eager does. Loads and
    /// stores convert on their own; only a conversion inside a fused chain needs this.
    ToDtype(DType),
}

impl PointwiseOp {
    /// The op's name (`add`, `where`, `copy`, `to_bf16`, or a custom op's function).
    pub fn name(&self) -> &str {
        match self {
            PointwiseOp::Unary(u) => u.name(),
            PointwiseOp::Binary(b) => b.name(),
            PointwiseOp::Where => "where",
            PointwiseOp::Copy => "copy",
            PointwiseOp::Custom(custom) => custom.function(),
            PointwiseOp::ToDtype(DType::F32) => "to_f32",
            PointwiseOp::ToDtype(DType::F16) => "to_f16",
            PointwiseOp::ToDtype(DType::BF16) => "to_bf16",
            PointwiseOp::ToDtype(DType::F8E4M3) => "to_f8e4m3",
            PointwiseOp::ToDtype(DType::F8E5M2) => "to_f8e5m2",
        }
    }
}

/// What an IR node computes.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeBody {
    /// One output element from operands at the same coordinates; the iteration space is the
    /// node's output shape.
    Pointwise {
        /// The scalar function.
        op: PointwiseOp,
        /// Its operands, in order.
        operands: Vec<Operand>,
    },
    /// Combines `input` along `dim` of the iteration space `input_shape`.
    Reduction {
        /// Sum, mean or max.
        kind: ReduceOp,
        /// The dimension of `input_shape` reduced.
        dim: usize,
        /// The element reduced, over the coordinates of `input_shape`.
        input: Load,
        /// The iteration space: the shape of the tensor reduced.
        input_shape: Vec<usize>,
    },
    /// A matrix product done by a library routine (sgemm on CPU, cuBLAS on GPU), as Inductor
    /// leaves matmul to `extern_kernels.mm`.
    Matmul {
        /// Left operand, a view of rank 2 or more.
        a: View,
        /// Right operand.
        b: View,
        /// A bias, ReLU and residual the library applies to the product (see
        /// `modes::gemm_epilogue`).
        epilogue: Epilogue,
    },
    /// A hand-written kernel called on whole views (`flash_attention` for
    /// `scaled_dot_product_attention`), as Inductor calls `aten._scaled_dot_product_flash_attention`
    /// from its output code: the device's eager kernel, run into the planned buffer.
    ExternKernel {
        /// The kernel's name in the output code.
        kernel: &'static str,
        /// The op, with its parameters.
        op: Op,
        /// Its tensor operands, read in place through their views.
        inputs: Vec<View>,
        /// The layout it writes its output in into the node's buffer: the node's shape, dense in
        /// row-major order but for attention, whose output follows q's layout (see
        /// `lowering::attention_strides`), as Inductor takes a fallback kernel's output strides
        /// from the op's meta function.
        out_layout: Layout,
    },
    /// An op Inductor does not lower (`cond`), run by the eager dispatcher on its operands, as
    /// Inductor falls back to ATen for ops it has no lowering for.
    Fallback {
        /// The op, with its size parameters for this compilation.
        op: Op,
        /// Its operands: views of buffers, or scalars.
        args: Vec<FallbackArg>,
    },
}

/// What a GEMM applies to its product before writing it: `relu(a @ b + bias)`, the bias one
/// value per column, or `a @ b + bias + residual`, the residual a tensor of the product's shape
/// (cuBLASLt's `beta * C`, as the `input` of `torch.addmm`; see `modes::gemm_epilogue`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Epilogue {
    /// The bias vector added, a view of `[columns]` elements.
    pub bias: Option<View>,
    /// Whether a ReLU follows (after the bias).
    pub relu: bool,
    /// A dense tensor of the product's shape and dtype added to it (never with a ReLU); boxed,
    /// as most products have none.
    #[serde(default)]
    pub residual: Option<Box<View>>,
    /// The graph nodes absorbed (`add_1`, `relu`), for the output code.
    pub absorbed: Vec<String>,
}

impl Epilogue {
    /// True when the GEMM writes the plain product.
    pub fn is_none(&self) -> bool {
        self.bias.is_none() && !self.relu && self.residual.is_none()
    }
}

/// An operand of a [`NodeBody::Fallback`] node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FallbackArg {
    /// A tensor, read through a view.
    Tensor(View),
    /// A scalar constant.
    Scalar(f32),
}

/// One node of the loop-level IR: a buffer the size of `shape`, and how to compute it.
#[derive(Clone, Debug, PartialEq)]
pub struct IrNode {
    /// The graph node it was lowered from (a view that needed a copy lowers to a copy node).
    pub origin: NodeId,
    /// The origin's name in the graph (`add_1`).
    pub origin_name: String,
    /// The op's name, used in kernel names (`add`, `amax`, `contiguous`).
    pub op_name: &'static str,
    /// The learner's line that produced the origin.
    pub location: Option<SourceLocation>,
    /// Shape of the node's output (a dense row-major buffer).
    pub shape: Vec<usize>,
    /// The element type of its buffer (computation is in `f32` whatever it is).
    pub dtype: DType,
    /// What it computes.
    pub body: NodeBody,
    /// `Some(i)`: the node's value is stored into graph input `i`'s own memory rather than into a
    /// buffer of its own: the in-place update a `copy_` into that input asks for (Inductor keeps
    /// a mutated input's buffer as the node's layout, its `MutationLayout`).
    pub into_input: Option<usize>,
}

impl IrNode {
    /// The loop nest the node needs: its output shape, or for a reduction the shape reduced.
    pub fn iteration_shape(&self) -> &[usize] {
        match &self.body {
            NodeBody::Reduction { input_shape, .. } => input_shape,
            _ => &self.shape,
        }
    }

    /// The loads the node makes from memory (none for an extern call, which reads whole views).
    pub fn loads(&self) -> Vec<&Load> {
        match &self.body {
            NodeBody::Pointwise { operands, .. } => operands
                .iter()
                .filter_map(|o| match o {
                    Operand::Load(l) => Some(l),
                    Operand::Constant(_) => None,
                })
                .collect(),
            NodeBody::Reduction { input, .. } => vec![input],
            NodeBody::Matmul { .. } | NodeBody::ExternKernel { .. } | NodeBody::Fallback { .. } => Vec::new(),
        }
    }

    /// Every buffer the node reads.
    pub fn reads(&self) -> Vec<BufferName> {
        match &self.body {
            NodeBody::Matmul { a, b, epilogue } => {
                let epilogue_reads = epilogue.bias.iter().chain(epilogue.residual.as_deref()).map(|v| v.buffer);
                [a.buffer, b.buffer].into_iter().chain(epilogue_reads).collect()
            }
            NodeBody::ExternKernel { inputs, .. } => inputs.iter().map(|v| v.buffer).collect(),
            NodeBody::Fallback { args, .. } => args
                .iter()
                .filter_map(|a| match a {
                    FallbackArg::Tensor(v) => Some(v.buffer),
                    FallbackArg::Scalar(_) => None,
                })
                .collect(),
            _ => self.loads().iter().map(|l| l.buffer).collect(),
        }
    }

    /// True for a node computed outside generated kernels: a library call or an eager fallback.
    pub fn is_extern(&self) -> bool {
        matches!(self.body, NodeBody::Matmul { .. } | NodeBody::ExternKernel { .. } | NodeBody::Fallback { .. })
    }
}

/// A graph input as the compiled code sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphInput {
    /// The placeholder's name (`x`, `fc1_weight`).
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// The strides it was traced with, which the generated indexing relies on.
    pub strides: Vec<usize>,
    /// Its element type.
    #[serde(default)]
    pub dtype: DType,
}

/// A whole graph in loop-level IR: what [`super::lowering`] produces and the scheduler consumes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoweredGraph {
    /// The graph inputs, in placeholder order.
    pub inputs: Vec<GraphInput>,
    /// The computed nodes, in execution order (a node only reads earlier ones).
    pub nodes: Vec<IrNode>,
    /// What the graph returns: views of inputs or node buffers.
    pub outputs: Vec<View>,
}

impl std::ops::Index<IrId> for LoweredGraph {
    type Output = IrNode;
    fn index(&self, id: IrId) -> &IrNode {
        &self.nodes[id.0]
    }
}

impl LoweredGraph {
    /// Every node's id, in execution order.
    pub fn ids(&self) -> impl Iterator<Item = IrId> + use<> {
        (0..self.nodes.len()).map(IrId)
    }

    /// Each node with its id, in execution order.
    pub fn enumerate(&self) -> impl Iterator<Item = (IrId, &IrNode)> {
        self.nodes.iter().enumerate().map(|(i, n)| (IrId(i), n))
    }

    /// The memory a buffer lives in: the graph input a node writes into in place, otherwise the
    /// buffer itself. Kernels, the call plan and the runtime address buffers through this.
    pub fn memory(&self, buffer: BufferName) -> BufferName {
        match buffer {
            BufferName::Node(n) => self[n].into_input.map_or(buffer, BufferName::Input),
            BufferName::Input(_) => buffer,
        }
    }

    /// The graph inputs the graph writes in place, each with the node whose value it receives.
    pub fn written_inputs(&self) -> impl Iterator<Item = (usize, IrId)> + '_ {
        self.enumerate().filter_map(|(id, node)| node.into_input.map(|input| (input, id)))
    }

    /// The name a buffer has in listings: the placeholder's name for inputs, `bufN` otherwise.
    pub fn buffer_name(&self, buffer: BufferName) -> String {
        match buffer {
            BufferName::Input(i) => self.inputs[i].name.clone(),
            BufferName::Node(_) => buffer.to_string(),
        }
    }

    /// The shape of a buffer's memory (a node's output, or an input as traced).
    pub fn buffer_shape(&self, buffer: BufferName) -> &[usize] {
        match buffer {
            BufferName::Input(i) => &self.inputs[i].shape,
            BufferName::Node(n) => &self[n].shape,
        }
    }

    /// How many elements of a buffer's memory its readers and writers can reach: the last
    /// element a graph input's traced shape and strides address, plus one, or a node's dense
    /// buffer's element count. Every index into the buffer is smaller.
    pub fn buffer_elements(&self, buffer: BufferName) -> usize {
        match buffer {
            BufferName::Input(i) => {
                let GraphInput { shape, strides, .. } = &self.inputs[i];
                if shape.contains(&0) {
                    return 0;
                }
                1 + shape.iter().zip(strides).map(|(&size, &stride)| (size - 1) * stride).sum::<usize>()
            }
            BufferName::Node(n) => numel(&self[n].shape),
        }
    }

    /// The element type of a buffer.
    pub fn buffer_dtype(&self, buffer: BufferName) -> DType {
        match buffer {
            BufferName::Input(i) => self.inputs[i].dtype,
            BufferName::Node(n) => self[n].dtype,
        }
    }
}
