//! Exercise `challenge`: the speed challenge. Rewrite the naive transformer block in a form the
//! compiler does well with, correct first, then timed by the grader.

use engine::{Result, Tensor};

use crate::models::{Block, BlockShape, LAYER_NORM_EPS};

/// Your version of the block: what you derive from the given block's weights once, in
/// [`FastBlock::new`], and the forward pass the grader exports, checks and times.
///
/// Start from `models::Block::challenge_forward` (in `models/src/phase5.rs`): correct, and slow
/// in the ways real code often is. The grader exports your `forward` as one graph (a graph break
/// fails the challenge), checks it on inputs of its own against the naive block, then compiles it
/// with the engine's Inductor and times it against the naive block compiled. Keep the fields
/// you need (the stub starts with the given `block`).
pub struct FastBlock {
    block: Block,
}

impl FastBlock {
    /// Derives what your forward pass needs from `block`'s weights (fused weights, say), on the
    /// block's device. Runs once, untimed.
    pub fn new(block: &Block) -> Result<FastBlock> {
        todo!("build your block from the given one's weights")
    }

    /// The block on `x` (`[batch, seq, d_model]`), computing what `Block::naive_forward` does.
    /// Book: phase 5, "challenge". Check: `cargo grader check phase5`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        todo!("the block, in one graph, in a form the compiler does well with")
    }
}
