//! The phase 4 check runner for the reference crate, `solutions/phase4-codegen`.

grader_harness::runner!(solution);
