//! The result of one check, as a runner writes it and the grader reports it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a check ended. These five strings are part of the grader's JSON contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The learner's code does what the exercise asks.
    Pass,
    /// It runs but gives a wrong answer, panics, crashes or does not finish in time.
    Fail,
    /// It reached a `todo!()` (or `unimplemented!()`): the exercise is not written yet.
    NotStarted,
    /// The check cannot run here (no GPU, for example); the message says why.
    Skipped,
    /// The check could not be run at all: the crate does not compile, or the runner is missing.
    Error,
}

impl Status {
    /// The JSON spelling: `pass`, `fail`, `not_started`, `skipped`, `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotStarted => "not_started",
            Status::Skipped => "skipped",
            Status::Error => "error",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one check run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// How it ended.
    pub status: Status,
    /// For a pass, what was verified; otherwise what went wrong, with the expected values.
    pub message: String,
    /// `file:line` in the learner's code that matters: the `todo!()` reached, or the panic.
    pub location: Option<String>,
}

/// Which crate a run tests: the learner's `exercises/` or the reference `solutions/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// The learner's crates in `exercises/`.
    Exercises,
    /// The solved crates in `solutions/`.
    Solutions,
}

impl Subject {
    /// `exercises` or `solutions`, as in the JSON output and runner names.
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Exercises => "exercises",
            Subject::Solutions => "solutions",
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
