//! View ops written once: the layout a view (reshape, permute, expand, slice) reads its input
//! through, over the same buffer. Eager execution and Inductor's lowering both ask this, as ATen's
//! view functions and Inductor's `View` IR compute the same strides.

use super::Op;
use crate::layout::Layout;

/// How a view op's result reads its input's buffer.
pub(crate) enum ViewOf {
    /// Through this layout, without copying.
    Layout(Layout),
    /// Only after a dense copy of the input (a reshape that strides cannot express); the view of
    /// the copy then needs none.
    CopyFirst,
    /// The op is not a view.
    NotAView,
}

impl Op {
    /// The view this op takes of an input laid out as `input` (shapes checked beforehand).
    pub(crate) fn view_of(&self, input: &Layout) -> ViewOf {
        match self {
            Op::Permute { dims } => ViewOf::Layout(input.permute(dims)),
            Op::Expand { shape } => ViewOf::Layout(input.expand(shape)),
            Op::Slice { dim, start, end, step } => ViewOf::Layout(input.slice(*dim, *start, *end, *step)),
            Op::Reshape { shape } => input.reshape(shape).map_or(ViewOf::CopyFirst, ViewOf::Layout),
            _ => ViewOf::NotAView,
        }
    }
}
