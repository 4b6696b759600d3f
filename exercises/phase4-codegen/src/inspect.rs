//! Exercise `inspect`: compile a model with Inductor, then read its output code: which kernels it
//! generated, what each one fused, and how many bytes each must move.

use engine::backends::Inductor;
use engine::inductor::output_code::KernelCode;
use engine::{Error, Result, Tensor, dynamo};

use crate::models::Model;

/// What kind of loop a kernel is, as the prefix of its name says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// `poi_`: one loop over elements.
    Pointwise,
    /// `per_`: a reduction whose rows fit in registers (on a GPU, a warp or a block per row).
    PersistentReduction,
    /// `red_`: a reduction that loops over each row as many times as it needs.
    LoopedReduction,
}

/// What one generated kernel does, read off the output code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSummary {
    /// The kernel's name (`poi_fused_add_relu_mul_0`).
    pub name: String,
    /// Its kind, from the name's prefix.
    pub kind: KernelKind,
    /// The ops its name lists, in order (`["add", "relu", "mul"]`).
    pub ops: Vec<String>,
    /// The graph nodes it computes, by name (`["add", "relu", "mul"]`).
    pub nodes: Vec<String>,
    /// The fewest bytes it can move: each argument buffer read or written once, 4 bytes a float.
    pub bytes: usize,
}

// ANCHOR: parse_kernel_name
/// **Exercise `inspect`, part 1.** Split a kernel name such as `poi_fused_add_relu_mul_0` into
/// its kind (`poi` is [`KernelKind::Pointwise`], `per` is [`KernelKind::PersistentReduction`],
/// `red` is [`KernelKind::LoopedReduction`]) and the ops it lists (`["add", "relu", "mul"]`).
/// The trailing number is the kernel's position, not an op; op names in kernel names have no `_`
/// of their own (a custom op `phase3::log_clip` appears as `logclip`). Return `None` for a name
/// of any other form.
///
/// Book: `book/src/phase4/exercises.md`, section "inspect".
/// Check: `cargo grader check phase4`.
pub fn parse_kernel_name(name: &str) -> Option<(KernelKind, Vec<String>)> {
    todo!()
}
// ANCHOR_END: parse_kernel_name

// ANCHOR: inspect
/// **Exercise `inspect`, part 2.** Compile `model` with the Inductor backend, call it once on
/// `inputs`, and summarise every kernel of the output code it generated, in launch order: the
/// name, what [`parse_kernel_name`] reads from it, the graph nodes the kernel computes, and the
/// bytes it must move.
///
/// Book: `book/src/phase4/exercises.md`, section "inspect".
/// Check: `cargo grader check phase4`.
pub fn inspect(model: Model, inputs: &[Tensor]) -> Result<Vec<KernelSummary>> {
    todo!()
}
// ANCHOR_END: inspect
