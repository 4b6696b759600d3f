//! Phase 4 of the workbook: the code Inductor generates, read and written.
//!
//! [`models`] gives the models the exercises compile. The exercises, in order:
//!
//! | exercise | module | what you write |
//! | --- | --- | --- |
//! | `inspect` | [`inspect`] | compile a model with Inductor and say what each generated kernel fused |
//! | `can_fuse` | [`fusion`] | the fusion decision, with a reason for every refusal |
//! | `pointwise_c` | [`pointwise`] | print a fused pointwise kernel as C |
//! | `pointwise_cuda` | [`pointwise`] | print the same kernel as CUDA C |
//! | `reduction_c` (stretch) | [`reduction`] | print a row-reduction kernel as C |
//! | `layer_norm_backward` | [`derivative`] | the derivative of layer norm, as tensor ops |
//! | `save_or_recompute` (deep) | [`partition`] | what a forward saves for its backward when memory has a price |
//!
//! Read `book/src/phase4/exercises.md`, then check your work with `cargo grader check phase4`.
//! Stuck? `cargo grader hint <exercise>` shows one more hint each time.

// The stubs do not use their parameters and imports yet. Delete this line once you are done, to
// get the compiler's warnings about your own code back.
#![allow(unused_variables, unused_imports, dead_code)]

pub mod derivative;
pub mod fusion;
pub mod inspect;
// The given models live once in the shared `workbook-models` crate, for both this crate and its
// twin; `crate::models` names them as if they were here.
pub use workbook_models::phase4 as models;
pub mod partition;
pub mod pointwise;
pub mod reduction;

pub use derivative::layer_norm_backward;
pub use fusion::can_fuse;
pub use inspect::{KernelKind, KernelSummary, inspect, parse_kernel_name};
pub use models::{Model, catalogue};
pub use partition::{Kind, SaveProblem, Value, choose_saved, plan_cost};
pub use pointwise::{pointwise_c, pointwise_cuda};
pub use reduction::reduction_c;
