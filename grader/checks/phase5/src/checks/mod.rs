//! The phase 5 checks, written once against `crate::subject`: the learner's crate in the
//! `phase5-exercises` runner, the reference crate in `phase5-solutions`.
//!
//! Nothing the learner's code measures is taken on trust: the timer is checked against work of a
//! known duration and the engine's own timer, and every time the sweep and the break-even
//! measure is measured again by the judge, in a process that runs no learner code.

pub mod break_even;
pub mod challenge;
pub mod compare;
pub mod fp8;
pub mod modes;
pub mod profile;
mod support;
pub mod sweep;
pub mod timer;
pub mod train;
