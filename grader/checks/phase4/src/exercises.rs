//! The phase 4 check runner for the learner's crate, `exercises/phase4-codegen`.

grader_harness::runner!(exercise);
