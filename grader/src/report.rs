//! What a check run reports: the JSON contract for instructors' tools, and the table, score and
//! next step a learner reads.
//!
//! # JSON (`--json`)
//!
//! `check phaseN --json` prints one object; `check all --json` prints a JSON array of them, one
//! per phase in course order:
//!
//! ```json
//! {"phase": "phase1", "subject": "exercises", "seed": 7, "checks": [
//!   {"id": "reports_every_backend", "exercise": "compare_backends", "stretch": false,
//!    "status": "not_started", "message": "not started: reached the `todo!()` at ...",
//!    "location": "exercises/phase1-backends/src/compare.rs:28"}]}
//! ```
//!
//! `phase`, `subject` (`exercises` or `solutions`) and `checks` with `id`, `exercise`, `status`
//! (`pass`, `fail`, `not_started`, `skipped` or `error`) and `message` are the stable contract;
//! `seed`, `stretch` and `location` (a `file:line` or `null`) come as extras.
//! `check --json` adds a stamp beside these fields (format version, grader version, learner,
//! time): see [`crate::results`].

use std::fmt::Write;
use std::time::Duration;

use grader_harness::transcript::Entry;
use grader_harness::{Outcome, Phase, Status, Subject};
use serde::{Deserialize, Serialize};
use tabled::settings::object::Columns;
use tabled::settings::{Modify, Style, Width};
use tabled::{Table, Tabled};

use crate::gpu_lock;
use crate::runners::BuildFailure;
use crate::verdict::Grading;
use crate::workbook::command_name;

/// One phase's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseReport {
    /// `phase1`.
    pub phase: String,
    /// Which crates were checked.
    pub subject: Subject,
    /// The seed random inputs were drawn from.
    pub seed: u64,
    /// Every check, in running order.
    pub checks: Vec<CheckReport>,
}

/// One check's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckReport {
    /// The check's id, unique within the phase.
    pub id: String,
    /// The exercise it grades.
    pub exercise: String,
    /// Whether the exercise is a stretch one (never fails a run).
    pub stretch: bool,
    /// How it ended.
    pub status: Status,
    /// What was verified, or what went wrong.
    pub message: String,
    /// The `file:line` that matters, if any.
    pub location: Option<String>,
    /// The answers a passing check recorded (for the workbook's own `dev` checks; not in the
    /// JSON).
    #[serde(skip)]
    pub answers: Option<Vec<Entry>>,
}

impl CheckReport {
    /// A report for check `id` of `exercise` from its outcome.
    pub fn new(phase: &Phase, id: &str, exercise: &str, outcome: Outcome) -> CheckReport {
        let stretch = phase.exercise(exercise).is_some_and(|e| e.stretch);
        CheckReport {
            id: id.into(),
            exercise: exercise.into(),
            stretch,
            status: outcome.status,
            message: outcome.message,
            location: outcome.location,
            answers: None,
        }
    }

    /// Whether this check was not run because the grader refused the crate or its exercise
    /// (`refused by the grader: ...`).
    pub fn is_refusal(&self) -> bool {
        self.message.split_once(' ').is_some_and(|(_, rest)| rest.starts_with("refused by the grader"))
    }

    /// Whether this result makes the run fail: a required check that did not pass or skip.
    pub fn blocks(&self) -> bool {
        !self.stretch && matches!(self.status, Status::Fail | Status::NotStarted | Status::Error)
    }
}

impl PhaseReport {
    /// Grades every check of `phase` with `grading`, each run in its own process; when there are
    /// no runners (the crate does not compile, or was refused), every check is an `error` carrying
    /// the reason. The checks of an exercise in `refused` are not run: each is an `error` carrying
    /// its refusal.
    pub fn run(
        grading: Result<Grading, BuildFailure>,
        phase: &Phase,
        subject: Subject,
        seed: u64,
        refused: &[(&str, BuildFailure)],
    ) -> PhaseReport {
        let checks = phase
            .checks()
            .map(|(exercise, spec)| {
                // A check that needs a GPU is skipped where there is none, whether or not the
                // crate compiles, so that the score counts the same checks either way.
                let no_gpu = spec.needs_gpu.then(engine::device::cuda::unavailable_reason).flatten();
                let refusal = refused.iter().find(|(name, _)| *name == exercise.name).map(|(_, r)| r);
                let (outcome, answers) = match (&grading, no_gpu) {
                    (_, Some(reason)) => (
                        Outcome { status: Status::Skipped, message: format!("needs a GPU: {reason}"), location: None },
                        None,
                    ),
                    (_, None) if let Some(refusal) = refusal => (
                        Outcome {
                            status: Status::Error,
                            message: format!("{} {}", phase.name, refusal.message),
                            location: refusal.location.clone(),
                        },
                        None,
                    ),
                    // A check that times code on a GPU times only while this grader holds its lock,
                    // which its runners ask for around what they time.
                    (Ok(grading), None) => grading.verdict_and_answers(
                        spec.id,
                        seed,
                        Duration::from_secs(spec.timeout_secs),
                        gpu_lock::Timing::for_check(phase, spec).as_ref(),
                    ),
                    (Err(failure), None) => (
                        Outcome {
                            status: Status::Error,
                            message: format!("{} {}", phase.name, failure.message),
                            location: failure.location.clone(),
                        },
                        None,
                    ),
                };
                CheckReport { answers, ..CheckReport::new(phase, spec.id, exercise.name, outcome) }
            })
            .collect();
        PhaseReport { phase: phase.name.to_string(), subject, seed, checks }
    }

    /// True when no required check failed, errored or is not started.
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(CheckReport::blocks)
    }

    /// The exercises with every check passed or skipped, out of all, for core and stretch ones.
    fn exercises_done(&self, phase: &Phase, stretch: bool) -> (usize, usize) {
        let exercises: Vec<_> = phase.exercises.iter().filter(|e| e.stretch == stretch).collect();
        let done = exercises.iter().filter(|e| self.exercise_done(e.name)).count();
        (done, exercises.len())
    }

    /// Whether every check of `exercise` passed or was skipped, and at least one passed: an
    /// exercise whose checks could not run here (no GPU) is not done.
    pub fn exercise_done(&self, exercise: &str) -> bool {
        let mut checks = self.checks.iter().filter(|c| c.exercise == exercise).peekable();
        checks.peek().is_some()
            && checks.clone().all(|c| matches!(c.status, Status::Pass | Status::Skipped))
            && checks.any(|c| c.status == Status::Pass)
    }

    /// The table, the details of what failed, the score and the next step. The table shows each
    /// check's first line cut to 72 characters, or with `verbose` its whole message.
    pub fn render(&self, phase: &Phase, verbose: bool) -> String {
        let mut out = format!("{} · {} ({})\n", phase.name, phase.title, self.subject_dir(phase));
        let rows: Vec<Row> = self.checks.iter().map(|c| Row::new(c, verbose)).collect();
        let mut table = Table::new(rows);
        table.with(Style::rounded());
        if !verbose {
            table.with(Modify::new(Columns::last()).with(Width::truncate(72).suffix("…")));
        }
        let _ = writeln!(out, "{table}");
        let mut shown: Vec<&str> = Vec::new();
        for check in self.checks.iter().filter(|c| matches!(c.status, Status::Fail | Status::Error)) {
            // A compile error is every check's error: show it once.
            if shown.contains(&check.message.as_str()) {
                continue;
            }
            shown.push(&check.message);
            let sharing = self.checks.iter().filter(|c| c.message == check.message).count();
            let title = if sharing == self.checks.len() && sharing > 1 {
                format!("every check of {}", phase.name)
            } else {
                format!("{} · {}", check.exercise, check.id)
            };
            let _ = writeln!(out, "\n── {title}: {} ──\n{}", check.status, check.message.trim_end());
        }
        let (core_done, core) = self.exercises_done(phase, false);
        let (stretch_done, stretch) = self.exercises_done(phase, true);
        // Skipped checks neither pass nor count against the learner: they are left out of the
        // total and named, so the score never claims what was not checked.
        let required: Vec<_> = self.checks.iter().filter(|c| !c.stretch).collect();
        let passing = required.iter().filter(|c| c.status == Status::Pass).count();
        let skipped = required.iter().filter(|c| c.status == Status::Skipped).count();
        let skipped_note = if skipped > 0 { format!(", {skipped} skipped") } else { String::new() };
        let _ = writeln!(
            out,
            "\nScore: {core_done}/{core} exercises done ({passing}/{} required checks passed{skipped_note}), \
             stretch {stretch_done}/{stretch}",
            required.len() - skipped
        );
        let _ = writeln!(out, "{}", self.next_step(phase));
        out
    }

    fn subject_dir(&self, phase: &Phase) -> &'static str {
        match self.subject {
            Subject::Exercises => phase.exercises_dir,
            Subject::Solutions => phase.solutions_dir,
        }
    }

    /// Whether every check of `exercise` was skipped, so nothing about it is known here.
    fn exercise_unchecked(&self, exercise: &str) -> bool {
        self.checks.iter().filter(|c| c.exercise == exercise).all(|c| c.status == Status::Skipped)
    }

    /// Points at the first exercise not done, core ones before stretch ones. Exercises that
    /// could not be checked on this machine are named, not pointed at.
    fn next_step(&self, phase: &Phase) -> String {
        let mut order: Vec<_> = phase.exercises.iter().filter(|e| !e.stretch).collect();
        order.extend(phase.exercises.iter().filter(|e| e.stretch));
        let (unchecked, order): (Vec<_>, Vec<_>) = order.into_iter().partition(|e| self.exercise_unchecked(e.name));
        let Some(exercise) = order.into_iter().find(|e| !self.exercise_done(e.name)) else {
            if unchecked.is_empty() {
                return match crate::phases::PHASES.last() {
                    Some(last) if last.name == phase.name => format!(
                        "Next: {} is complete, and it is the last phase: the workbook is done. The instructor guide's \
                         key questions make a good review.",
                        phase.name
                    ),
                    _ => format!("Next: {} is complete. On to the next phase!", phase.name),
                };
            }
            let names: Vec<String> = unchecked.iter().map(|e| format!("`{}`", e.name)).collect();
            return format!(
                "Next: {} is complete here, but {} could not be checked on this machine (see the skipped \
                 reasons above): run the grader on a GPU machine (book: Set-up) to finish it",
                phase.name,
                names.join(", ")
            );
        };
        if let Some(error) = self.checks.iter().find(|c| c.status == Status::Error) {
            let place = error.location.as_deref().map(|l| format!(" at {l}")).unwrap_or_default();
            if error.message.contains("set-up problem") {
                return format!(
                    "Next: fix this machine's set-up (shown above; `{} doctor` checks it), then check again",
                    command_name()
                );
            }
            return format!("Next: fix the error{place} (shown above), then check again");
        }
        let first = self
            .checks
            .iter()
            .find(|c| c.exercise == exercise.name && !matches!(c.status, Status::Pass | Status::Skipped));
        let file = format!("{}/{}", self.subject_dir(phase), exercise.file);
        let (verb, place) = match first {
            Some(c) if c.status == Status::NotStarted => ("write", c.location.clone().unwrap_or(file)),
            _ => ("fix", file),
        };
        let stretch = if exercise.stretch { " (stretch)" } else { "" };
        format!(
            "Next: {verb} `{}`{stretch} in {place}\n      read {}#{} · stuck? {} hint {}",
            exercise.name,
            phase.book_page,
            exercise.section,
            command_name(),
            exercise.name
        )
    }
}

/// A table row.
#[derive(Tabled)]
struct Row {
    exercise: String,
    check: String,
    status: &'static str,
    result: String,
}

impl Row {
    /// The row of `check`: its result is the first line of its message, or all of it with
    /// `verbose`.
    fn new(check: &CheckReport, verbose: bool) -> Row {
        let status = match check.status {
            Status::Pass => "✓ pass",
            Status::Fail => "✗ fail",
            Status::NotStarted => "· not started",
            Status::Skipped => "– skipped",
            Status::Error => "! error",
        };
        let exercise = if check.stretch { format!("{} (stretch)", check.exercise) } else { check.exercise.clone() };
        let refused = check.status == Status::Error && check.is_refusal();
        let status = if refused { "! refused" } else { status };
        let result = match (&check.status, &check.location) {
            (Status::NotStarted, Some(location)) => format!("todo!() at {location}"),
            (Status::Error, Some(location)) if refused => format!("refused at {location}"),
            (Status::Error, Some(location)) => format!("compile error at {location}"),
            _ if verbose => check.message.trim_end().to_string(),
            _ => check.message.lines().next().unwrap_or("").to_string(),
        };
        Row { exercise, check: check.id.clone(), status, result }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::PHASES;

    /// A report of `phase` with every check passed.
    fn all_passed(phase: &Phase) -> PhaseReport {
        let checks = phase
            .checks()
            .map(|(exercise, spec)| {
                let outcome = Outcome { status: Status::Pass, message: String::new(), location: None };
                CheckReport::new(phase, spec.id, exercise.name, outcome)
            })
            .collect();
        PhaseReport { phase: phase.name.into(), subject: Subject::Solutions, seed: 0, checks }
    }

    /// An exercise refused for naming a forbidden item reads "refused" on its own rows; the other
    /// exercises' rows are graded (here: a build that failed for another reason reads as that).
    #[test]
    fn a_refusal_shows_on_its_exercises_rows_only() {
        let phase = PHASES[0];
        let refused = phase.exercises[2].name;
        let refusal = BuildFailure {
            message: "refused by the grader: `fx::Interpreter` is off limits here".into(),
            location: Some("exercises/phase1-backends/src/interpreter.rs:9".into()),
        };
        let other = BuildFailure { message: "does not compile".into(), location: Some("src/a.rs:1".into()) };
        let report = PhaseReport::run(Err(other), phase, Subject::Exercises, 1, &[(refused, refusal)]);
        for check in report.checks.iter().filter(|c| c.status != Status::Skipped) {
            assert_eq!(check.is_refusal(), check.exercise == refused, "{check:?}");
        }
        let mut passed = all_passed(phase);
        for (check, graded) in passed.checks.iter_mut().zip(&report.checks) {
            if graded.exercise == refused {
                *check = graded.clone();
            }
        }
        let table = passed.render(phase, false);
        let rows: Vec<&str> = table.lines().filter(|l| l.contains("! refused")).collect();
        let expected = phase.checks().filter(|(e, _)| e.name == refused).count();
        assert_eq!(rows.len(), expected, "{table}");
        assert!(rows.iter().all(|r| r.contains(refused) && r.contains("refused at exercises/")), "{table}");
        assert!(!table.contains("compile error"), "{table}");
    }

    /// The table cuts a long message at 72 characters; `--verbose` shows it whole.
    #[test]
    fn verbose_shows_messages_whole() {
        let phase = PHASES[0];
        let mut report = all_passed(phase);
        let long = format!("{} the end of a long message", "word ".repeat(30));
        report.checks[0].message = format!("{long}\nand its second line");
        let short = report.render(phase, false);
        assert!(!short.contains("the end of a long message") && short.contains('…'), "{short}");
        let whole = report.render(phase, true);
        assert!(whole.contains("the end of a long message") && whole.contains("and its second line"), "{whole}");
    }

    #[test]
    fn a_finished_phase_points_at_the_next_one_unless_it_is_the_last() {
        let (first, last) = (PHASES[0], PHASES[PHASES.len() - 1]);
        assert_eq!(all_passed(first).next_step(first), "Next: phase1 is complete. On to the next phase!");
        let end = all_passed(last).next_step(last);
        assert!(end.contains("last phase") && !end.contains("next phase"), "{end}");
    }
}
