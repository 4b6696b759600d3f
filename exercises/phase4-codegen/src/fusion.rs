//! Exercise `can_fuse`: the fusion decision, the heart of Inductor's scheduler.

use engine::inductor::scheduler::{Access, Decision, FusionCandidate, FusionKind, LoopKind, is_row_shape};

// ANCHOR: can_fuse
/// **Exercise `can_fuse`.** Decide whether the candidate node joins the kernel group it reads
/// from, and how, or why not. The scheduler calls this for every node that reads a buffer
/// computed by an earlier group; a refusal starts a new kernel, and its reason is printed by
/// `ENGINE_LOGS=fusion`.
///
/// The rules, as TorchInductor applies them:
/// - an extern call (matmul) never fuses, in either direction;
/// - a pointwise node over the same shape as a pointwise group joins it
///   ([`FusionKind::Pointwise`]);
/// - a reduction of the pointwise group's shape turns the group into a reduction kernel with the
///   pointwise nodes as its prologue ([`FusionKind::ReductionPrologue`]);
/// - a reduction group takes pointwise nodes over its full shape ([`FusionKind::RowEpilogue`]),
///   pointwise nodes over one value per row ([`FusionKind::PerRow`]; see [`is_row_shape`]), and
///   reductions of the same shape along the same dim ([`FusionKind::AnotherReduction`]);
/// - whatever the shapes, a node that reads a group's buffer with [`Access::Other`] must wait for
///   that buffer to be in memory: refuse, naming the buffer.
///
/// Anything else is refused with a reason. The scheduler double-checks every "fuse", so an
/// illegal fusion fails loudly instead of computing garbage.
///
/// Book: `book/src/phase4/exercises.md`, section "can_fuse".
/// Check: `cargo grader check phase4`.
pub fn can_fuse(c: &FusionCandidate) -> Decision {
    todo!()
}
// ANCHOR_END: can_fuse
