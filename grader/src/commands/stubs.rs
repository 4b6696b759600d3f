//! `grader dev stubs`: writes every exercise file from its solution ([`grader::stubs`]) and the
//! table of their hashes that `reset` and the audit read; `--check` (run by CI) writes nothing,
//! shows how each file differs from what would be written, and fails if any does.
//!
//! Writing never loses work: a file it replaces or removes that is not a stub as shipped (someone
//! edited it) is saved under `.grader/backups/` first, as `reset` does.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use grader::phases::PHASES;
use grader::state::State;
use grader::stubs::{self, Stub};
use grader::workbook::{Workbook, command_name};
use similar::TextDiff;

/// A file that is not what the solutions make of it.
struct Drift {
    /// The file, relative to the workbook root.
    path: String,
    /// What it should be made from, for the message.
    source: String,
    /// What it should hold; `None` when it should not exist.
    wanted: Option<String>,
    /// What it holds; `None` when it does not exist.
    found: Option<Vec<u8>>,
}

/// `grader dev stubs [--check]`.
pub fn run(root: Option<&Path>, check: bool) -> Result<ExitCode> {
    let workbook = Workbook::find(root)?;
    let generated = stubs::generate(workbook.root())?;
    let drifts = drifts(&workbook, &generated)?;
    if check {
        for drift in &drifts {
            println!("{}", describe(drift));
        }
        if drifts.is_empty() {
            println!("dev stubs: the {} stubs and {} are those the solutions give", generated.len(), stubs::TABLE);
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "dev stubs: {} file(s) differ from what the solutions give; `{} dev stubs` writes them",
            drifts.len(),
            command_name()
        );
        return Ok(ExitCode::FAILURE);
    }
    let state = State::of(&workbook);
    for drift in &drifts {
        let path = workbook.path(&drift.path);
        if let Some(found) = &drift.found
            && drift.path != stubs::TABLE
            && !stubs::is_shipped(&drift.path, found)
        {
            let backup = state.backup(&drift.path, found)?;
            println!("Saved the edited {} to {}", drift.path, backup.display());
        }
        match &drift.wanted {
            Some(text) => {
                std::fs::write(&path, text).with_context(|| format!("cannot write {}", drift.path))?;
                println!("wrote {} ({})", drift.path, drift.source);
            }
            None => {
                std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", drift.path))?;
                println!("removed {} ({})", drift.path, drift.source);
            }
        }
    }
    println!("dev stubs: {} stubs, {} file(s) written or removed", generated.len(), drifts.len());
    Ok(ExitCode::SUCCESS)
}

/// Every exercise file that is not its generated stub, every exercise file no solution file
/// makes, and the table if it is not the stubs' own.
fn drifts(workbook: &Workbook, generated: &[Stub]) -> Result<Vec<Drift>> {
    let mut drifts = Vec::new();
    for stub in generated {
        let found = read(workbook, &stub.exercise)?;
        if found.as_deref() != Some(stub.text.as_bytes()) {
            drifts.push(Drift {
                path: stub.exercise.clone(),
                source: format!("the stub of {}", stub.solution),
                wanted: Some(stub.text.clone()),
                found,
            });
        }
    }
    for phase in PHASES {
        for file in stubs::rust_files(&workbook.path(phase.exercises_dir).join("src"))? {
            let path = file.strip_prefix(workbook.root()).expect("inside the workbook").display().to_string();
            if !generated.iter().any(|s| s.exercise == path) {
                let solution = path.replacen(phase.exercises_dir, phase.solutions_dir, 1);
                let found = read(workbook, &path)?;
                drifts.push(Drift { source: format!("{solution} does not exist"), path, wanted: None, found });
            }
        }
    }
    let table = stubs::table(generated);
    let found = read(workbook, stubs::TABLE)?;
    if found.as_deref() != Some(table.as_bytes()) {
        drifts.push(Drift {
            path: stubs::TABLE.to_string(),
            source: "the hashes of the stubs".to_string(),
            wanted: Some(table),
            found,
        });
    }
    Ok(drifts)
}

/// The bytes of `relative`, or `None` if there is no such file.
fn read(workbook: &Workbook, relative: &str) -> Result<Option<Vec<u8>>> {
    match std::fs::read(workbook.path(relative)) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {relative}")),
    }
}

/// What is wrong with one file, with a unified diff from what it holds to what it should.
fn describe(drift: &Drift) -> String {
    let found = drift.found.as_deref().map(String::from_utf8_lossy);
    match (&drift.wanted, found) {
        (Some(_), None) => format!("{} is missing: it is {}", drift.path, drift.source),
        (None, _) => format!("{} is made by no solution file: {}", drift.path, drift.source),
        (Some(wanted), Some(found)) => {
            let diff = TextDiff::from_lines(found.as_ref(), wanted.as_str());
            let shown = diff
                .unified_diff()
                .context_radius(2)
                .header(&format!("{} (as it is)", drift.path), &format!("{} (as generated)", drift.path))
                .to_string();
            format!("{} is not {}:\n{shown}", drift.path, drift.source)
        }
    }
}
