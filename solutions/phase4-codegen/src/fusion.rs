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
    // ANCHOR: solution
    if c.own == LoopKind::Extern {
        return Decision::Refuse(format!("{} is an extern library call: it cannot be fused", c.op));
    }
    let kind = match (&c.group, &c.own) {
        (LoopKind::Extern, _) => return Decision::Refuse("an extern call's output starts a new kernel".into()),
        (LoopKind::Pointwise { shape }, LoopKind::Pointwise { shape: own }) if own == shape => FusionKind::Pointwise,
        (LoopKind::Pointwise { shape }, LoopKind::Reduction { shape: own, .. }) if own == shape => {
            FusionKind::ReductionPrologue
        }
        (LoopKind::Reduction { shape, dim }, LoopKind::Pointwise { shape: own }) => {
            if own == shape {
                FusionKind::RowEpilogue
            } else if is_row_shape(own, shape, *dim) {
                FusionKind::PerRow
            } else {
                return Decision::Refuse(format!("{} loops over {own:?}, the kernel over {shape:?}", c.node));
            }
        }
        (LoopKind::Reduction { shape, dim }, LoopKind::Reduction { shape: own, dim: d })
            if own == shape && d == dim =>
        {
            FusionKind::AnotherReduction
        }
        (group, own) => return Decision::Refuse(format!("the kernel is a {group}, but {} is a {own}", c.node)),
    };
    if let Some(read) = c.reads.iter().find(|r| r.access == Access::Other) {
        return Decision::Refuse(format!(
            "{} reads {} at other elements than its own, so {} must be in memory first",
            c.node, read.buffer, read.buffer
        ));
    }
    Decision::Fuse(kind)
    // ANCHOR_END: solution
}
// ANCHOR_END: can_fuse
