//! `grader hint <exercise>`: the hints seen so far plus one more, from a nudge to a near-answer.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use grader::phases;
use grader::state::State;
use grader::workbook::{Workbook, command_name};

/// Shows one more hint than last time (all of them once every one has been seen).
pub fn run(root: Option<&Path>, name: &str) -> Result<ExitCode> {
    let (phase, exercise) = phases::exercise(name)?;
    let workbook = Workbook::find(root)?;
    let state = State::of(&workbook);
    let shown = (state.hints_seen(name) + 1).min(exercise.hints.len());
    state.set_hints_seen(name, shown)?;
    println!(
        "Hints for `{name}` ({}/{}, book: {}#{}):",
        shown,
        exercise.hints.len(),
        phase.book_page,
        exercise.section
    );
    for (i, hint) in exercise.hints[..shown].iter().enumerate() {
        println!("\n{}. {hint}", i + 1);
    }
    if shown < exercise.hints.len() {
        println!("\nRun `{} hint {name}` again for the next hint.", command_name());
    } else {
        println!("\nThat was the last hint. The reference solution is in {}/{}.", phase.solutions_dir, exercise.file);
    }
    Ok(ExitCode::SUCCESS)
}
