//! Phase 5 (benchmarking): everything the grader knows about the phase, in one place.
//!
//! The checks themselves are in `src/checks/`, compiled into two runner binaries,
//! `phase5-exercises` and `phase5-solutions`, that differ only in the crate they test (`subject`).
//! See the grader's crate documentation for how to add a phase.

use grader_harness::{CheckSpec, Exercise, Phase};

/// Phase 5: timing code honestly, eager against compiled, the cost of compiling.
pub const PHASE: Phase = Phase {
    name: "phase5",
    title: "Benchmarking",
    exercises_dir: "exercises/phase5-benchmarking",
    solutions_dir: "solutions/phase5-benchmarking",
    runner_package: "checks-phase5",
    book_page: "book/src/phase5/exercises.md",
    exercises: EXERCISES,
};

/// The exercises, core ones first. The speed challenge (`src/challenge.rs`, its checks in
/// `checks/challenge.rs`) is the last core exercise: its `Exercise` entry goes at the end of this
/// list.
const EXERCISES: &[Exercise] = &[CHALLENGE];

/// The speed challenge: correctness on any machine; speed, timed by the judge, on a GPU.
const CHALLENGE: Exercise = Exercise {
    name: "challenge",
    file: "src/challenge.rs",
    section: "challenge",
    stretch: false,
    hints: &[
        "Start by copying `Block::challenge_forward` and its helpers into `forward`, keeping `block` as the only \
         field: check that it passes `challenge_matches_block` once the graph break is gone (the finite-scores \
         check reads a value back to the host; drop it).",
        "Three projections of the same input are one GEMM with the weights stacked: build `wqkv` \
         (`[3 * d_model, d_model]`) and `bqkv` once in `new` (there is no `cat` op: stack the values of \
         `to_vec()` and `Tensor::from_vec`), then `linear` once and split the result with `reshape`, `permute` and \
         `slice`, all views. `x.layer_norm` and `softmax(-1)` are one op each.",
        "Fold `1/sqrt(head_dim)` into the query rows of `wqkv` and `bqkv` in `new`, so no pass over the scores \
         scales them. Keep q, k and v as `[1, batch, heads, seq, head_dim]` slices: the matrix products read them \
         in place, where a reshape to drop the leading 1 would copy.",
    ],
    checks: &[
        CheckSpec::new("challenge_matches_block").with_timeout(COMPILES),
        CheckSpec::new("challenge_is_faster").with_timeout(COMPILES).timed_on_gpu(),
    ],
    forbidden: &[],
};

/// Checks that compile a block with the system C compiler or NVRTC get more time than the default.
const COMPILES: u64 = 180;
