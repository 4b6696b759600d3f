//! `grader list`: every exercise with its status at the last check and the hints seen.

use std::path::Path;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Result;
use grader::phases::PHASES;
use grader::state::State;
use grader::workbook::{Workbook, command_name};
use grader_harness::Status;
use tabled::settings::Style;
use tabled::{Table, Tabled};

#[derive(Tabled)]
struct Row {
    phase: &'static str,
    exercise: String,
    status: String,
    file: String,
    hints: String,
}

/// Prints the progress table.
pub fn run(root: Option<&Path>) -> Result<ExitCode> {
    let workbook = Workbook::find(root)?;
    let state = State::of(&workbook);
    let last = state.last_results();
    let mut rows = Vec::new();
    for phase in PHASES {
        let report = last.phases.get(phase.name);
        for exercise in phase.exercises {
            let status = match report {
                None => "not checked yet".to_string(),
                Some((_, r)) if r.exercise_done(exercise.name) => "✓ done".to_string(),
                Some((_, r)) => {
                    // Checks skipped on this machine (no GPU) say nothing about the learner's work.
                    let checks: Vec<_> = r
                        .checks
                        .iter()
                        .filter(|c| c.exercise == exercise.name && c.status != Status::Skipped)
                        .collect();
                    let passed = checks.iter().filter(|c| c.status == Status::Pass).count();
                    if checks.is_empty() {
                        "– needs a GPU to check".to_string()
                    } else if checks.iter().all(|c| c.status == Status::NotStarted) {
                        "· not started".to_string()
                    } else if let Some(error) = checks.iter().find(|c| c.status == Status::Error) {
                        error_label(&error.message).to_string()
                    } else {
                        format!("{passed}/{} checks pass", checks.len())
                    }
                }
            };
            let name =
                if exercise.stretch { format!("{} (stretch)", exercise.name) } else { exercise.name.to_string() };
            let hints = format!("{}/{}", state.hints_seen(exercise.name), exercise.hints.len());
            rows.push(Row {
                phase: phase.name,
                exercise: name,
                status,
                file: format!("{}/{}", phase.exercises_dir, exercise.file),
                hints,
            });
        }
    }
    println!("{}", Table::new(rows).with(Style::rounded()));
    let oldest = last.phases.values().map(|(when, _)| *when).min();
    match oldest.and_then(|when| SystemTime::now().duration_since(when).ok()) {
        Some(age) => println!(
            "Status as of the last check on this machine ({} ago), refreshed with `{} check all`. This is a local \
             record, not a grade: a grade that counts comes from re-grading your exercises in a clean copy of the \
             workbook (`grader regrade`).",
            humantime::format_duration(std::time::Duration::from_secs(age.as_secs())),
            command_name()
        ),
        None => println!("No check has run yet: `{} check phase1`.", command_name()),
    }
    Ok(ExitCode::SUCCESS)
}

/// What an `error` status stands for, from the message the grader gave it.
fn error_label(message: &str) -> &'static str {
    if message.contains("does not compile") {
        "! does not compile"
    } else if message.contains("refused by the grader") {
        "! refused"
    } else if message.contains("set-up problem") {
        "! set-up problem"
    } else {
        "! error"
    }
}
