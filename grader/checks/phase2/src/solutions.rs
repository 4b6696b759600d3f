//! The phase 2 check runner for the reference crate, `solutions/phase2-capture`.

grader_harness::runner!(solution);
