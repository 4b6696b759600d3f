//! The phase 5 check runner for the learner's crate, `exercises/phase5-benchmarking`.

grader_harness::runner!(exercise);
