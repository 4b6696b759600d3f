//! Per-phase data: which crate a phase tests, its exercises in the order a learner does them,
//! their hints and book sections, the checks that grade each one, and the mistakes those checks
//! must catch.
//!
//! Each phase declares this once, in one `const PHASE: Phase` in its check crate's `phase.rs`
//! (`grader/checks/phaseN/src/phase.rs`), with every check named by its function (see
//! [`crate::declare`]). The grader links the crate's library, which holds that declaration without
//! the crate under test, to know a phase's checks even when the learner's crate does not compile;
//! the phase's two runner binaries compile the same declaration with the check functions linked.

use crate::check::{CheckResult, Context};

/// One phase of the course.
#[derive(Debug)]
pub struct Phase {
    /// The name learners type: `phase1`.
    pub name: &'static str,
    /// A short title: `Backends`.
    pub title: &'static str,
    /// The learner's crate, relative to the workbook root: `exercises/phase1-backends`.
    pub exercises_dir: &'static str,
    /// The solved twin: `solutions/phase1-backends`.
    pub solutions_dir: &'static str,
    /// The cargo package of the check runner: `checks-phase1`.
    pub runner_package: &'static str,
    /// The book page describing the exercises: `book/src/phase1/exercises.md`.
    pub book_page: &'static str,
    /// The exercises, core ones first, in the order the book presents them.
    pub exercises: &'static [Exercise],
    /// Deliberately wrong variants of the solutions, each caught by the checks it names
    /// (`grader dev mutants`).
    pub mutants: &'static [Mutant],
}

/// One exercise: a function or trait impl the learner writes.
#[derive(Debug)]
pub struct Exercise {
    /// The name learners type in `grader hint NAME`: `compare_backends`.
    pub name: &'static str,
    /// The file holding its stub, relative to the exercise crate: `src/compare.rs`.
    pub file: &'static str,
    /// The heading anchor of its section on the phase's book page: `compare-backends`.
    pub section: &'static str,
    /// Stretch exercises are optional: their checks never fail a run.
    pub stretch: bool,
    /// Hints from a nudge to a near-answer; `grader hint` reveals one more each time.
    pub hints: &'static [&'static str],
    /// The checks grading it, in the order they run.
    pub checks: &'static [CheckSpec],
    /// Engine items that already do what the exercise asks: the grader refuses a crate that
    /// uses them, so that the exercise is solved, not delegated.
    pub forbidden: &'static [Forbidden],
}

/// An engine item an exercise asks the learner to write for themselves.
#[derive(Debug)]
pub struct Forbidden {
    /// The item as the tail of its path: `fx::Interpreter`, `scheduler::can_fuse`, `infer_shape`,
    /// or a method as `.op_count`. With a module part, only uses through that module count (the
    /// learner's own `can_fuse` is fine); without one, any use of the name does; a method counts
    /// when called (`x.op_count()`) or named through its type (`Report::op_count`).
    pub path: &'static str,
    /// Refused in every file of the crate (`true`), or only in the exercise's own file, for an
    /// item another exercise of the phase needs.
    pub everywhere: bool,
    /// Why, in the learner's terms: `this exercise asks you to write the interpreter yourself`.
    pub why: &'static str,
}

/// A check as the grader sees it before running it.
#[derive(Debug)]
pub struct CheckSpec {
    /// Unique within the phase: `reports_every_backend`.
    pub id: &'static str,
    /// Wall-clock limit for the check's process, in seconds; past it the check fails as a
    /// probable endless loop.
    pub timeout_secs: u64,
    /// Whether the check times code on a GPU. The grader runs such checks only while it holds
    /// the machine-wide lock of that GPU, so two learners' timings never overlap on one device;
    /// every other check (correctness) runs at once, never waiting for the lock.
    pub gpu_timing: bool,
    /// The check runs only on a GPU: where there is none it is skipped, also when the crate does
    /// not compile, so that a score counts the same checks either way.
    pub needs_gpu: bool,
    /// The check never uses a GPU (pure logic on random data): its runners start without one
    /// (the GPU's device files closed to them, `CUDA_VISIBLE_DEVICES` empty) and take no hold on
    /// its lock, so on a lab's shared GPU they start at once even while other graders time there.
    pub without_gpu: bool,
    /// The function that runs it, where it is linked: in a phase's runner binaries, not in the
    /// phase data the grader links (see [`crate::declare`]).
    pub run: Option<fn(&Context) -> CheckResult>,
}

impl CheckSpec {
    /// The time limit most checks get: generous for debug builds, short enough to catch a loop.
    pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

    /// A check with the default time limit, that times nothing on a GPU.
    pub const fn new(id: &'static str) -> CheckSpec {
        CheckSpec {
            id,
            timeout_secs: CheckSpec::DEFAULT_TIMEOUT_SECS,
            gpu_timing: false,
            needs_gpu: false,
            without_gpu: false,
            run: None,
        }
    }

    /// The same check, run by `run`.
    pub const fn runs(self, run: fn(&Context) -> CheckResult) -> CheckSpec {
        CheckSpec { run: Some(run), ..self }
    }

    /// The same check with a time limit of `secs` seconds.
    pub const fn with_timeout(self, secs: u64) -> CheckSpec {
        CheckSpec { timeout_secs: secs, ..self }
    }

    /// The same check, marked as timing code on a GPU (see [`CheckSpec::gpu_timing`]); it needs
    /// one too.
    pub const fn timed_on_gpu(self) -> CheckSpec {
        assert!(!self.without_gpu, "a check run without a GPU cannot time one");
        CheckSpec { gpu_timing: true, needs_gpu: true, ..self }
    }

    /// The same check, marked as timing code on whatever device the machine has: on a GPU it
    /// holds the GPU's lock (see [`CheckSpec::gpu_timing`]); where there is none it runs on the
    /// CPU rather than being skipped.
    pub const fn timed(self) -> CheckSpec {
        assert!(!self.without_gpu, "a check run without a GPU cannot time one");
        CheckSpec { gpu_timing: true, ..self }
    }

    /// The same check, marked as needing a GPU (see [`CheckSpec::needs_gpu`]).
    pub const fn on_gpu(self) -> CheckSpec {
        assert!(!self.without_gpu, "a check run without a GPU cannot need one");
        CheckSpec { needs_gpu: true, ..self }
    }

    /// The same check, run without a GPU (see [`CheckSpec::without_gpu`]).
    pub const fn without_gpu(self) -> CheckSpec {
        assert!(!self.needs_gpu && !self.gpu_timing, "a check that needs or times a GPU must have one");
        CheckSpec { without_gpu: true, ..self }
    }
}

/// A deliberately wrong variant of a solution file: the solution with the first occurrence of
/// `find` replaced by `replace`. `grader dev mutants` copies the solution into the exercise crate,
/// applies the mistake and expects exactly the checks in `fails` to fail (or, for a mutant that is
/// `refused`, the grader to refuse the crate before building it).
#[derive(Debug)]
pub struct Mutant {
    /// What the mistake is, in a few words: `median does not sort`.
    pub name: &'static str,
    /// The solution file it changes, relative to the solution crate: `src/latency.rs`.
    pub file: &'static str,
    /// The text it replaces, as it is in the solution file.
    pub find: &'static str,
    /// What it puts there instead.
    pub replace: &'static str,
    /// The ids of the checks that must fail.
    pub fails: &'static [&'static str],
    /// The ids of checks that may fail too (their verdict depends on timings the mistake changes).
    pub may_fail: &'static [&'static str],
    /// The grader must refuse the crate before building it (the mistake delegates the exercise).
    pub refused: bool,
}

impl Mutant {
    /// The mistake `name`: `find` replaced by `replace` in `file`, failing no check yet.
    pub const fn new(name: &'static str, file: &'static str, find: &'static str, replace: &'static str) -> Mutant {
        Mutant { name, file, find, replace, fails: &[], may_fail: &[], refused: false }
    }

    /// The same mistake, failing the checks `ids` (written `crate::check_ids![module::check]`).
    pub const fn fails(self, ids: &'static [&'static str]) -> Mutant {
        Mutant { fails: ids, ..self }
    }

    /// The same mistake, which may also fail the checks `ids`.
    pub const fn may_fail(self, ids: &'static [&'static str]) -> Mutant {
        Mutant { may_fail: ids, ..self }
    }

    /// The same mistake, which the grader must refuse before building.
    pub const fn refused(self) -> Mutant {
        Mutant { refused: true, ..self }
    }
}

impl Phase {
    /// Every check of the phase with its exercise, in running order.
    pub fn checks(&self) -> impl Iterator<Item = (&'static Exercise, &'static CheckSpec)> + '_ {
        self.exercises.iter().flat_map(|e| e.checks.iter().map(move |c| (e, c)))
    }

    /// The exercise called `name`, if the phase has one.
    pub fn exercise(&self, name: &str) -> Option<&'static Exercise> {
        self.exercises.iter().find(|e| e.name == name)
    }
}
