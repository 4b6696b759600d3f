//! Phase 5 of the workbook: benchmarking, measured honestly.
//!
//! [`models`] gives the workloads the course times: the MLP 512-2048-512, the naive transformer
//! block, naive softmax and layer norm. The exercises, in order:
//!
//! | exercise | module | what you write |
//! | --- | --- | --- |
//! | `timer` | [`timer`] | a timer in the spirit of `triton.testing.do_bench` |
//! | `sweep` | [`sweep`] | eager against compiled over batch sizes, the crossover, an SVG plot |
//! | `break_even` | [`break_even`] | how many calls repay the compile time |
//! | `modes` | [`modes`] | the three compile modes against eager, and their break-even |
//! | `challenge` | [`challenge`] | the naive transformer block, rewritten to compile well |
//! | `profile` (stretch) | [`profile`] | the three most expensive kernels of the compiled block, by the profiler |
//! | `train_break_even` | [`train`] | a compiled training step's costs and break-even |
//! | `fp8_scales` | [`fp8`] | per-row scales for 8-bit floats, and the scaled matrix product |
//! | `compare` (deep) | [`compare`] | is one function faster than another, and by how much, within a time budget |
//!
//! Read `book/src/phase5/exercises.md`, then check your work with `cargo grader check phase5`.
//! Stuck? `cargo grader hint <exercise>` shows one more hint each time.

// stub: // The stubs do not use their parameters and imports yet. Delete this line once you are done, to
// stub: // get the compiler's warnings about your own code back.
// stub: #![allow(unused_variables, unused_imports, unused_mut, dead_code)]
// stub:
pub mod break_even;
pub mod challenge;
pub mod compare;
pub mod fp8;
// The given workloads live once in the shared `workbook-models` crate, for both this crate and its
// twin; `crate::models` names them as if they were here.
pub use workbook_models::phase5 as models;
pub mod modes;
pub mod profile;
pub mod sweep;
pub mod timer;
pub mod train;
