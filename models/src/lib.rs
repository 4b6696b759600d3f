//! The models of the workbook's phases: the code the exercises run but that learners never edit,
//! written once and shared by each exercise crate (`exercises/phaseN-*`) and its solved twin
//! (`solutions/phaseN-*`), which re-export it under the name the exercises use (`model` or
//! `models`). The book's examples and the grader's checks reach it through those crates.

pub mod phase1;
pub mod phase2;
pub mod phase3;
pub mod phase4;
pub mod phase5;
