//! The phase 3 check runner for the learner's crate, `exercises/phase3-graph-breaks`.

grader_harness::runner!(exercise);
