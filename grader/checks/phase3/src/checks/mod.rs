//! The phase 3 checks, written once against `crate::subject`: the learner's crate in the
//! `phase3-exercises` runner, the reference crate in `phase3-solutions`.
//!
//! Every fixed model is checked three ways: `explain` finds one graph and no break, the model
//! compiles with `fullgraph(true)`, and its outputs equal the original's (run eagerly) on random
//! inputs, including inputs that take each side of every branch.

pub mod branch;
pub mod break_cost;
pub mod custom_op;
pub mod logging;
pub mod regional;
pub mod round_trip;
pub mod schedule;
mod support;
