//! Phase 2 of the workbook: graph capture, what TorchDynamo hands to a compiler.
//!
//! [`model`] gives the models the phase reads. The exercises, in order:
//!
//! | exercise | module | what you write |
//! | --- | --- | --- |
//! | `explain_report` | [`explain_report`] | run `explain` and summarize what was captured |
//! | `line_table` | [`line_table`] | group a graph's nodes by the source line that made them |
//! | `shape_propagation` | [`shape_prop`] | broadcasting, and every node's shape without running anything |
//! | `dead_code` | [`dead_code`] | a pass that removes nodes no output needs |
//! | `recompiles` (deep) | [`recompiles`] | what a compiled function's cache does on a sequence of calls |
//! | `cse` (stretch) | [`cse`] | a pass that computes each distinct expression once |
//!
//! Read `book/src/phase2/exercises.md`, then check your work with `cargo grader check phase2`.
//! Stuck? `cargo grader hint <exercise>` shows one more hint each time.

// The stubs do not use their parameters and imports yet. Delete this line once you are done, to
// get the compiler's warnings about your own code back.
#![allow(unused_variables, unused_imports, dead_code)]

pub mod cse;
pub mod dead_code;
pub mod explain_report;
pub mod line_table;
pub mod recompiles;
// The given models live once in the shared `workbook-models` crate, for both this crate and its
// twin; `crate::model` names them as if they were here.
pub use workbook_models::phase2 as model;
pub mod shape_prop;

pub use cse::eliminate_common_subexpressions;
pub use dead_code::eliminate_dead_code;
pub use explain_report::{CaptureSummary, summarize};
pub use line_table::{LineOps, line_table};
pub use model::{Attention, WIDTH, example_input, shape_rule, wasteful};
pub use recompiles::{BIAS, Body, Call, Outcome, predict};
pub use shape_prop::{broadcast, propagate};
