//! Per-phase data: which crate a phase tests, its exercises in the order a learner does them,
//! their hints and book sections, and the checks that grade each one.
//!
//! Each phase keeps this in one `const PHASE: Phase` in its runner crate's `lib.rs`
//! (`grader/checks/phaseN/src/lib.rs`). The grader links that library (without the crate under
//! test) to know a phase's checks even when the learner's crate does not compile.

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
}

impl CheckSpec {
    /// The time limit most checks get: generous for debug builds, short enough to catch a loop.
    pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

    /// A check with the default time limit, that times nothing on a GPU.
    pub const fn new(id: &'static str) -> CheckSpec {
        CheckSpec { id, timeout_secs: CheckSpec::DEFAULT_TIMEOUT_SECS, gpu_timing: false, needs_gpu: false }
    }

    /// The same check with a time limit of `secs` seconds.
    pub const fn with_timeout(self, secs: u64) -> CheckSpec {
        CheckSpec { timeout_secs: secs, ..self }
    }

    /// The same check, marked as timing code on a GPU (see [`CheckSpec::gpu_timing`]); it needs
    /// one too.
    pub const fn timed_on_gpu(self) -> CheckSpec {
        CheckSpec { gpu_timing: true, needs_gpu: true, ..self }
    }

    /// The same check, marked as timing code on whatever device the machine has: on a GPU it
    /// holds the GPU's lock (see [`CheckSpec::gpu_timing`]); where there is none it runs on the
    /// CPU rather than being skipped.
    pub const fn timed(self) -> CheckSpec {
        CheckSpec { gpu_timing: true, ..self }
    }

    /// The same check, marked as needing a GPU (see [`CheckSpec::needs_gpu`]).
    pub const fn on_gpu(self) -> CheckSpec {
        CheckSpec { needs_gpu: true, ..self }
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
