//! The phase 1 check runner for the learner's crate, `exercises/phase1-backends`.

grader_harness::runner!(exercise);
