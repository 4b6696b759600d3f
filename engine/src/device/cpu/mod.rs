//! Eager CPU kernels, the analogue of ATen's CPU kernels: one pass over memory per op,
//! parallel over large outputs, reading any strided layout.

mod matmul;
mod normalize;
mod pointwise;
mod reduce;

use crate::layout::{Layout, numel};
use crate::op::Op;

/// Below this many elements a kernel runs on the calling thread: splitting costs more than it saves.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 15;

/// One operand as a CPU kernel sees it.
#[derive(Clone, Copy)]
pub(crate) enum Input<'a> {
    /// A tensor: its whole buffer and the layout of the view being read.
    Tensor { data: &'a [f32], layout: &'a Layout },
    /// A scalar broadcast everywhere.
    Scalar(f32),
}

impl<'a> Input<'a> {
    fn tensor(&self) -> (&'a [f32], &'a Layout) {
        match *self {
            Input::Tensor { data, layout } => (data, layout),
            Input::Scalar(_) => unreachable!("shape inference rejects scalars where tensors are required"),
        }
    }
}

/// Run one non-view, non-composite op; shapes were checked by [`Op::infer_shape`] beforehand.
pub(crate) fn execute(op: &Op, inputs: &[Input], out_shape: &[usize]) -> Vec<f32> {
    match op {
        Op::Unary(u) => pointwise::unary(*u, inputs[0], out_shape),
        Op::Binary(b) => pointwise::binary(*b, inputs[0], inputs[1], out_shape),
        Op::Where => pointwise::where_(inputs[0], inputs[1], inputs[2], out_shape),
        Op::Contiguous => copy(inputs[0]),
        Op::Reduce { kind, dim, .. } => reduce::reduce(*kind, inputs[0], *dim),
        Op::Softmax { dim } => normalize::softmax(inputs[0], *dim, false),
        Op::LogSoftmax { dim } => normalize::softmax(inputs[0], *dim, true),
        Op::LayerNorm { eps } => normalize::layer_norm(inputs[0], inputs[1], inputs[2], eps.0),
        Op::Matmul => matmul::matmul(inputs[0], inputs[1], out_shape),
        Op::Custom(custom) => {
            let dense: Vec<Vec<f32>> = inputs
                .iter()
                .map(|input| {
                    let (data, layout) = input.tensor();
                    contiguous(data, &layout.expand(out_shape)).into_owned()
                })
                .collect();
            custom.run_cpu(&dense, numel(out_shape))
        }
        Op::Reshape { .. }
        | Op::Permute { .. }
        | Op::Expand { .. }
        | Op::Slice { .. }
        | Op::Linear
        | Op::Cond { .. } => {
            unreachable!("views, linear and cond are handled before device kernels")
        }
    }
}

/// A dense row-major copy of any view.
pub(crate) fn copy(input: Input) -> Vec<f32> {
    let (data, layout) = input.tensor();
    contiguous(data, layout).into_owned()
}

/// The view's elements as a dense slice, borrowing when they already are.
fn contiguous<'a>(data: &'a [f32], layout: &Layout) -> std::borrow::Cow<'a, [f32]> {
    if layout.is_contiguous() {
        std::borrow::Cow::Borrowed(&data[layout.offset()..layout.offset() + layout.numel()])
    } else {
        std::borrow::Cow::Owned(layout.offsets().map(|i| data[i]).collect())
    }
}

/// Splits a contiguous shape around `dim` into `(outer, size, inner)`.
fn split_at_dim(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    (shape[..dim].iter().product(), shape[dim], shape[dim + 1..].iter().product())
}
