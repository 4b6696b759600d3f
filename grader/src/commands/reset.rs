//! `grader reset <exercise>`: put the stub back as the workbook shipped it, keeping the learner's
//! version, byte for byte, as a backup.
//!
//! The stub is recognised by its hash ([`grader::stubs`]), so neither a learner's commit that
//! still holds a `todo!()` nor a copy taken after the learner started can pass for it. It comes
//! from the given git revision, else from any revision in the repository's history whose file is
//! the shipped stub, else from the pristine copy the grader kept the first time it saw the file.

use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Result, bail};
use grader::state::State;
use grader::workbook::Workbook;
use grader::{phases, stubs};

/// Restores the stub of `name`.
pub fn run(root: Option<&Path>, name: &str, from: Option<&str>) -> Result<ExitCode> {
    let (phase, exercise) = phases::exercise(name)?;
    let workbook = Workbook::find(root)?;
    let state = State::of(&workbook);
    let relative = format!("{}/{}", phase.exercises_dir, exercise.file);
    let (stub, source) = match from {
        Some(rev) => (git_show(&workbook, rev, &relative)?, format!("git revision {rev}")),
        None => match shipped_stub_in_git(&workbook, &relative) {
            Some((rev, stub)) => (stub, format!("git revision {}", &rev[..rev.len().min(10)])),
            None => match state.pristine(&relative) {
                Some(stub) => (stub, "the pristine copy in .grader/pristine/".to_string()),
                None => bail!(
                    "cannot find the stub of {relative} as the workbook shipped it: no revision in git holds it, and \
                     no pristine copy was kept. Take the file from the workbook's repository, or name a revision \
                     with --from REV."
                ),
            },
        },
    };
    let path = workbook.path(&relative);
    let current = match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => bail!("cannot read {relative} to back it up, so it was left as it is: {e}"),
    };
    if current.as_deref() == Some(stub.as_slice()) {
        println!("{relative} is already the stub; nothing to do.");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(current) = current {
        let backup = state.backup(&relative, &current)?;
        println!("Saved your version of {relative} to {}", backup.display());
    }
    std::fs::write(&path, &stub)?;
    println!("Restored the stub of `{name}` from {source}.");
    Ok(ExitCode::SUCCESS)
}

/// `git show REV:PATH`, as bytes.
fn git_show(workbook: &Workbook, rev: &str, relative: &str) -> Result<Vec<u8>> {
    let output =
        Command::new("git").arg("-C").arg(workbook.root()).args(["show", &format!("{rev}:{relative}")]).output()?;
    if !output.status.success() {
        bail!("git show {rev}:{relative} failed: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(output.stdout)
}

/// A revision anywhere in the repository's history whose version of the file is the shipped
/// stub, with that version.
fn shipped_stub_in_git(workbook: &Workbook, relative: &str) -> Option<(String, Vec<u8>)> {
    let log = Command::new("git")
        .arg("-C")
        .arg(workbook.root())
        .args(["log", "--all", "--format=%H", "--", relative])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    String::from_utf8(log.stdout).ok()?.lines().find_map(|rev| {
        git_show(workbook, rev, relative)
            .ok()
            .filter(|bytes| stubs::is_shipped(relative, bytes))
            .map(|bytes| (rev.to_string(), bytes))
    })
}
