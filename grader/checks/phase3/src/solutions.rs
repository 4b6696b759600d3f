//! The phase 3 check runner for the reference crate, `solutions/phase3-graph-breaks`.

grader_harness::runner!(solution);
