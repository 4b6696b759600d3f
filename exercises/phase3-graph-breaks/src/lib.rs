//! Phase 3 of the workbook: graph breaks, where capture has to stop, and how to avoid them.
//!
//! [`models`] gives four models that break their graphs. Each of the first four exercises rewrites
//! one so that it compiles into a single graph with the same outputs; the deep one, `schedule`,
//! asks how few graphs a program that cannot avoid its breaks needs:
//!
//! | exercise | module | the break | the fix |
//! | --- | --- | --- | --- |
//! | `branch` | [`branch`] | an `if` on a tensor's value | `cond` or `where_` |
//! | `logging` | [`logging`] | a log line between ops | `is_compiling` |
//! | `round_trip` | [`round_trip`] | statistics computed from `to_vec()` | tensor ops |
//! | `custom_op` | [`custom_op`] | a Rust function over the values | a custom op with a C kernel |
//! | `break_cost` (stretch) | [`break_cost`] | | measure what a break costs |
//! | `regional` (stretch) | [`regional`] | a model of repeated layers recompiled whole | one compiled layer for all |
//! | `schedule` (deep) | [`schedule`] | a program that has to stop on the host | as few graphs as its dependences allow |
//!
//! Read `book/src/phase3/exercises.md`, then check your work with `cargo grader check phase3`.
//! Stuck? `cargo grader hint <exercise>` shows one more hint each time.

// The stubs do not use their parameters and imports yet. Delete this line once you are done, to
// get the compiler's warnings about your own code back.
#![allow(unused_variables, unused_imports, dead_code)]

pub mod branch;
pub mod break_cost;
pub mod custom_op;
pub mod logging;
pub mod regional;
// The given models live once in the shared `workbook-models` crate, for both this crate and its
// twin; `crate::models` names them as if they were here.
pub use workbook_models::phase3 as models;
pub mod round_trip;
pub mod schedule;

pub use branch::gated;
pub use break_cost::{BreakCost, measure_break_cost};
pub use custom_op::{clipped, log_clip_op};
pub use logging::normalized;
pub use models::{Logger, Model, WIDTH, example_input, layered, log_clip};
pub use regional::RegionalStack;
pub use round_trip::standardized;
pub use schedule::{Kind, Program, Schedule, Stage, Step, fewest_graphs, in_program_order};
