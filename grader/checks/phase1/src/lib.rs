//! Phase 1 (backends): the phase data the grader links, declared in `src/phase.rs`. The checks are in
//! `src/checks/`, compiled into two runner binaries, `phase1-exercises` and `phase1-solutions`,
//! that differ only in the crate they test. See `grader_harness::declare`, and the grader's crate
//! documentation for how to add a phase.

grader_harness::phase_data!();
