//! The phase 2 check runner for the learner's crate, `exercises/phase2-capture`.

grader_harness::runner!(exercise);
