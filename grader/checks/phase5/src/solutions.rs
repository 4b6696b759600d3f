//! The phase 5 check runner for the reference crate, `solutions/phase5-benchmarking`.

grader_harness::runner!(solution);
