//! The phase 1 check runner for the reference crate, `solutions/phase1-backends`.

grader_harness::runner!(solution);
