//! Phase 1 of the workbook: backends, the `backend=` of `torch.compile`.
//!
//! [`model`] gives a small MLP and the list of backends. The exercises, in order:
//!
//! | exercise | module | what you write |
//! | --- | --- | --- |
//! | `compare_backends` | [`compare`] | compile the MLP with each backend and measure the difference from eager |
//! | `latency` | [`latency`] | time the first call against the steady state |
//! | `interpreter` | [`interpreter`] | a backend that runs a graph node by node |
//! | `recording` | [`recording`] | a backend that keeps every graph it is handed |
//! | `partitioner` (deep) | [`partitioner`] | a backend for a compiler that runs only some ops: the fewest legal partitions |
//! | `deny_ops` (stretch) | [`deny_ops`] | a backend that refuses graphs calling given ops |
//!
//! Read `book/src/phase1/exercises.md`, then check your work with `cargo grader check phase1`.
//! Stuck? `cargo grader hint <exercise>` shows one more hint each time.

// The stubs do not use their parameters and imports yet. Delete this line once you are done, to
// get the compiler's warnings about your own code back.
#![allow(unused_variables, unused_imports, dead_code)]

pub mod compare;
pub mod deny_ops;
pub mod interpreter;
pub mod latency;
// The given models live once in the shared `workbook-models` crate, for both this crate and its
// twin; `crate::model` names them as if they were here.
pub use workbook_models::phase1 as model;
pub mod partitioner;
pub mod recording;

pub use compare::{BackendDiff, compare_backends};
pub use deny_ops::DenyOps;
pub use interpreter::{GraphInterpreter, interpret};
pub use latency::{BATCH, Latency, measure_latency, median};
pub use model::{Mlp, backends, example_input, workload};
pub use partitioner::{CapabilityBackend, partition};
pub use recording::RecordingBackend;
