//! What the grader and its per-phase check runners share.
//!
//! The grader never runs a learner's code in its own process. Each phase has a *runner*: a small
//! binary (`grader/checks/phaseN/`) linked against the crate under test, either the learner's
//! `exercises/` crate or its twin in `solutions/`. The grader starts the runner once per check:
//!
//! ```text
//! <runner> list                                   # the check ids, one per line
//! <runner> run <check-id> --seed N --result FILE  # runs one check, writes its Record to FILE as JSON
//! <runner> run <check-id> --seed N --result FILE --judge RUN  # the verdict on another run's Record
//! ```
//!
//! A runner that dies before finishing (an abort, a segfault, a CUDA fault, the time limit) is
//! reported by the grader from its exit status, so no check can spoil another's result. What a
//! runner linked with learner code writes is never taken as a pass: the judge, built against the
//! reference solution, decides (see [`runner::judge`]).
//!
//! Modules:
//! - [`phase`]: the per-phase data (exercises, hints, book section, checks, mutants), one `const`
//!   per phase;
//! - [`declare`]: how a phase is declared once, for the grader and for its two runners;
//! - [`check`]: what a check is and how it reports (pass message, [`Failure`]);
//! - [`outcome`]: the result a runner writes, with its [`Status`];
//! - [`runner`]: the `main` of every runner, with the panic hook that turns `todo!()` into
//!   "not started";
//! - [`random`]: seeded property tests whose failures show the shrunk input;
//! - [`programs`]: random programs (static or with a dynamic batch) for checks that take a graph;
//! - [`transcript`]: the answers a check records, which the judge compares with the reference's;
//! - [`seal`]: the seal on a runner's result, keyed with the seed the learner's process is not given;
//! - [`wires`]: the engine items an exercise forbids, armed while its checks run;
//! - [`timing`]: the timed part of a check, run while the grader holds the GPU's lock;
//! - [`tolerance`]: how far a value may be from the expected one;
//! - [`close`]: float comparison with a readable diff;
//! - [`confine`]: the runner closing its own `/proc/<pid>` once CUDA has started.

pub mod check;
pub mod close;
pub mod confine;
pub mod declare;
pub mod outcome;
pub mod phase;
pub mod programs;
pub mod random;
pub mod runner;
pub mod seal;
pub mod timing;
pub mod tolerance;
pub mod transcript;
pub mod wires;

pub use check::{Check, CheckResult, Context, Failure, ensure, gpu, showing_on_panic};
pub use close::{assert_close, check_close, max_abs_diff};
pub use outcome::{Outcome, Status, Subject};
pub use phase::{CheckSpec, Exercise, Forbidden, Mutant, Phase};
pub use random::{draw, for_all, secret_duration};
pub use runner::Record;
pub use timing::timed;
pub use tolerance::Tolerance;
pub use transcript::{fingerprint, judged_artifact, record, record_artifact, record_floats, record_tensor};
