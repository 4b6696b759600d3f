//! The phase 2 checks, written once against `crate::subject`: the learner's crate in the
//! `phase2-exercises` runner, the reference crate in `phase2-solutions`.
//!
//! Each check compares the learner's answer with the grader's own reading of the same graph
//! (the engine's `explain`, the recorded shapes, its own liveness), and every graph pass is run
//! against the original on the same inputs.

pub mod cse;
pub mod dead_code;
pub mod explain_report;
pub mod line_table;
pub mod recompiles;
pub mod shape_prop;
mod support;
