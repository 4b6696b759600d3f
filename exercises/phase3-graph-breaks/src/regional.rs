//! Exercise `regional` (stretch): a repeated layer compiled once, for every layer and every
//! length (regional compilation).

use engine::dynamo::{self, CompileStats, Compiled};
use engine::{Error, Result, SourceLocation, Tensor};

/// Phase 5's naive transformer block, and the stack of [`LAYERS`] of them this exercise runs.
pub use workbook_models::phase5::{Block, BlockShape, LAYERS, Stack};

/// The function every block runs through: the block's input and its weights in, its output out.
pub type BlockFn = Box<dyn Fn(Vec<Tensor>) -> Result<Tensor>>;

// ANCHOR: regional_stack
/// **Exercise `regional` (stretch).** A stack of blocks of one structure, each with weights of its
/// own (a transformer's body), run through one compiled function: regional compilation.
///
/// Compiled whole, `stack.naive_forward` is one graph with every block in it: twelve times the
/// code to generate and compile, and a new sequence length recompiles all of it. Here, `new`
/// makes one compiled function (`dynamo::compile`) that computes one block, and `forward` runs
/// each block of `stack`, in order, through it, each block's output the next one's input. The
/// twelve blocks must share that one compiled graph; their inputs may have any batch and sequence
/// length.
///
/// Judged by `cargo grader check phase3`, with the engine's own count of this process's compiles
/// (`dynamo::counters()`): the output of 12 blocks at three sequence lengths, against the stack
/// run eagerly; 1 compile (and 11 cache hits) for the first call, at most 1 more for a new length,
/// none for a third; less than a third of the compile work of the whole stack compiled as one
/// graph; and a steady state within 1.5x of the whole stack's. `dynamo::compile_region` would do
/// it for you, so it is not allowed here.
///
/// Book: `book/src/phase3/exercises.md`, section "regional" (the idea: `book/src/phase3/regional.md`).
/// Check: `cargo grader check phase3`.
pub struct RegionalStack {
    // Your fields.
}

impl RegionalStack {
    /// The compiled function for blocks of `shape` (the batch and length of their inputs may vary).
    pub fn new(shape: BlockShape) -> RegionalStack {
        todo!()
    }

    /// `stack`'s blocks applied in turn to `x`, each through the one compiled function.
    pub fn forward(&self, stack: &Stack, x: &Tensor) -> Result<Tensor> {
        todo!()
    }

    /// What the compiled function has done so far (the checks count with `dynamo::counters()`).
    pub fn stats(&self) -> CompileStats {
        todo!()
    }
}
// ANCHOR_END: regional_stack
