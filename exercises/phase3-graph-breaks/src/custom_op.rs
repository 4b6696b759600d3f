//! Exercise `custom_op`: an opaque host function, registered as an op with its own kernel.

use engine::dynamo::CustomOp;
use engine::{Result, Tensor};

// ANCHOR: log_clip_op
/// **Exercise `custom_op`, part 1.** Register [`log_clip`](crate::models::log_clip) as the
/// elementwise custom op `phase3::log_clip`, with C source for its element function (and, for
/// GPUs, the same as a CUDA `__device__` function).
///
/// Book: `book/src/phase3/exercises.md`, section "custom_op". Check: `cargo grader check phase3`.
pub fn log_clip_op() -> Result<CustomOp> {
    todo!()
}
// ANCHOR_END: log_clip_op

// ANCHOR: clipped
/// **Exercise `custom_op`, part 2.** [`clipped_original`](crate::models::clipped_original) with
/// `op` (made by [`log_clip_op`]) in place of the host function: one graph, the same outputs up to
/// float rounding.
///
/// Book: `book/src/phase3/exercises.md`, section "custom_op". Check: `cargo grader check phase3`.
pub fn clipped(x: &Tensor, op: &CustomOp) -> Result<Tensor> {
    todo!()
}
// ANCHOR_END: clipped
