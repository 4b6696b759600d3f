//! `grader reset <exercise>`: put the stub back, keeping the learner's version as a backup.
//!
//! The stub comes from git: the given revision, else the newest revision of the file (from HEAD
//! back) that still holds a `todo!()`, so work the learner committed is skipped. Without git,
//! it comes from the pristine copy the grader took the first time it saw the file.

use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Result, bail};
use grader::phases;
use grader::state::State;
use grader::workbook::Workbook;

/// Restores the stub of `name`.
pub fn run(root: Option<&Path>, name: &str, from: Option<&str>) -> Result<ExitCode> {
    let (phase, exercise) = phases::exercise(name)?;
    let workbook = Workbook::find(root)?;
    let state = State::of(&workbook);
    let relative = format!("{}/{}", phase.exercises_dir, exercise.file);
    let (stub, source) = match from {
        Some(rev) => (git_show(&workbook, rev, &relative)?, format!("git revision {rev}")),
        None => match newest_stub_in_git(&workbook, &relative) {
            Some((rev, stub)) => (stub, format!("git revision {}", &rev[..rev.len().min(10)])),
            None => match state.pristine(&relative) {
                Some(stub) => (stub, "the pristine copy in .grader/pristine/".to_string()),
                None => {
                    bail!("cannot find the stub of {relative}: no git history holds it, and no pristine copy was kept")
                }
            },
        },
    };
    let path = workbook.path(&relative);
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current == stub {
        println!("{relative} is already the stub; nothing to do.");
        return Ok(ExitCode::SUCCESS);
    }
    let backup = state.backup(&relative, &current)?;
    std::fs::write(&path, &stub)?;
    println!("Saved your version of {relative} to {}", backup.display());
    println!("Restored the stub of `{name}` from {source}.");
    Ok(ExitCode::SUCCESS)
}

/// `git show REV:PATH`.
fn git_show(workbook: &Workbook, rev: &str, relative: &str) -> Result<String> {
    let output =
        Command::new("git").arg("-C").arg(workbook.root()).args(["show", &format!("{rev}:{relative}")]).output()?;
    if !output.status.success() {
        bail!("git show {rev}:{relative} failed: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// The newest committed version of the file that still has a `todo!()`, with its revision.
fn newest_stub_in_git(workbook: &Workbook, relative: &str) -> Option<(String, String)> {
    let log = Command::new("git")
        .arg("-C")
        .arg(workbook.root())
        .args(["log", "--format=%H", "--", relative])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    String::from_utf8(log.stdout).ok()?.lines().find_map(|rev| {
        git_show(workbook, rev, relative).ok().filter(|t| t.contains("todo!(")).map(|t| (rev.to_string(), t))
    })
}
