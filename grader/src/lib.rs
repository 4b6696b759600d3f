//! The workbook's grader: `cargo grader check phase1`.
//!
//! # How a check run works
//!
//! 1. [`audit`] refuses a learner's crate that could run code outside the grader's view (a build
//!    script, a changed manifest) or names an engine item its exercise forbids. [`runners`] builds
//!    the phase's *check runner* with cargo
//!    (`cargo build -p checks-phase1 --bin phase1-exercises --no-default-features --features exercises`),
//!    so only that phase's crate is compiled, the learner's crate by a compiler confined to what it
//!    may read ([`compile`]). A compile error becomes an `error` status on every
//!    check of the phase, with the compiler's first error and its `file:line`; other phases go on.
//!    With `--prebuilt DIR` (a directory made by `grader pack`) no cargo is needed at all.
//! 2. [`isolation`] runs each check in a child process of its own with a time limit, the
//!    learner's inside the [`sandbox`]. Whatever the learner's code does there (panic, `todo!()`,
//!    abort, segfault, endless loop, a forged result) ends up in that check's
//!    [`Outcome`](grader_harness::Outcome) and nowhere else; [`verdict`] decides it, taking the
//!    learner's process at its word only for a failure, and handing anything else to the judge
//!    (the same check built against the solutions) with a seed drawn for the run.
//! 3. [`report`] prints a table per phase, a score and the next step, or `--json` (stamped by
//!    [`results`]); `--junit FILE` writes JUnit XML ([`junit`]). `grader rollup` reads many
//!    learners' results into one class table ([`rollup`]).
//!
//! The checks themselves live in `grader/checks/phaseN/`, which the grader knows through each
//! check crate's `PHASE` constant (see [`phases`]). The exercise crates' sources are generated
//! from the solutions ([`stubs`]).
//!
//! # Changing or adding an exercise
//!
//! The solution file is the exercise's one source: its doc comments are the stub's, and what the
//! learner writes sits between `// ANCHOR: solution` and `// ANCHOR_END: solution` (see
//! [`stubs`] for the markers). Edit it, then run `cargo grader dev stubs`, which writes the stub
//! and `grader/shipped-stubs.sha256`; CI's `cargo grader dev stubs --check` fails on a stub that
//! differs from its solution. A new exercise also needs its `pub mod` line in the solution's
//! `lib.rs`, an `Exercise` in its phase's `grader/checks/phaseN/src/phase.rs` (its checks named by
//! their functions in `src/checks/`), a section of that name on the phase's book page, and
//! mutants that prove the checks catch what they are for.
//!
//! # Adding a phase
//!
//! 1. Create `solutions/phaseN-topic/` (package `phaseN-topic-solution`) and
//!    `exercises/phaseN-topic/` (package `phaseN-topic`), both with `[lib] name = "phaseN_topic"`.
//!    Write the solution, marking what the learner writes (`// ANCHOR: solution`, see [`stubs`]);
//!    `cargo grader dev stubs` writes the exercise crate's `src/` from it.
//! 2. Copy `grader/checks/phase1/` to `grader/checks/phaseN/`, rename the package `checks-phaseN`,
//!    its bins `phaseN-exercises` / `phaseN-solutions`, and point its `exercise` / `solution`
//!    dependencies at the new crates.
//! 3. Write the checks in its `src/checks/` against `crate::subject`, and declare the phase once
//!    in its `src/phase.rs` (see `grader_harness::declare`): exercises, stub files, book sections,
//!    hints, the checks named by their functions, and the mutants below.
//! 4. Add the three crates to the root `Cargo.toml`'s members, `checks-phaseN` (with
//!    `default-features = false`) to `grader/Cargo.toml`, and one line to [`phases::PHASES`].
//! 5. Prove the checks catch real mistakes: declare deliberately wrong variants of the solution
//!    in `PHASE`'s `mutants`; `grader dev mutants` (part of `grader dev check`, which CI runs)
//!    runs each one and expects the named checks to fail and all others to pass, or, for a mutant
//!    that delegates to a forbidden engine item, the crate to be refused.
//!
//! GPU checks return `Err(Failure::skip(reason))` when there is no GPU: the table shows them as
//! `skipped` with the reason, and they never fail a run. A check that times code on a GPU is
//! marked [`CheckSpec::timed_on_gpu`](grader_harness::CheckSpec::timed_on_gpu): the part of it
//! that times runs only while its grader holds that GPU's machine-wide lock exclusively
//! ([`gpu_lock`]), while every other check's runner shares the GPU, so learners sharing a GPU
//! never time beside anyone else's work.

pub mod audit;
pub mod build_progress;
pub mod compile;
pub mod gpu_lock;
pub mod grade;
pub mod isolation;
pub mod junit;
pub mod phases;
pub mod report;
pub mod results;
pub mod rollup;
pub mod runners;
pub mod sandbox;
pub mod sanitize;
pub mod state;
pub mod stubs;
pub mod verdict;
pub mod workbook;
