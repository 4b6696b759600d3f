//! Phase 5 (benchmarking): everything the grader knows about the phase, in one place.
//!
//! The checks themselves are in `src/checks/`, compiled into two runner binaries,
//! `phase5-exercises` and `phase5-solutions`, that differ only in the crate they test (`subject`).
//! See the grader's crate documentation for how to add a phase.

use grader_harness::{Exercise, Phase};

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
const EXERCISES: &[Exercise] = &[];
