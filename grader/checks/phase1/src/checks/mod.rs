//! The phase 1 checks, written once against `crate::subject`: the learner's crate in the
//! `phase1-exercises` runner, the reference crate in `phase1-solutions`.
//!
//! Checks never trust what the learner's code says about itself: they hand it instrumented
//! backends ([`support::Probe`]) whose behaviour the grader knows, and compare against the
//! engine's own capture and interpreter.

pub mod compare;
pub mod deny_ops;
pub mod interpreter;
pub mod latency;
pub mod partitioner;
pub mod recording;
mod support;
