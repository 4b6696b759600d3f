//! The phase 4 checks, written once against `crate::subject`: the learner's crate in the
//! `phase4-exercises` runner, the reference crate in `phase4-solutions`.
//!
//! Checks never trust what the learner's code says about itself: summaries are compared with the
//! engine's own output code, fusion decisions are plugged into the real scheduler (which rejects
//! an illegal fusion), and printed kernels are compiled and run against eager execution.

pub mod derivative;
pub mod fusion;
pub mod inspect;
pub mod partition;
pub mod pointwise;
pub mod reduction;
mod support;
