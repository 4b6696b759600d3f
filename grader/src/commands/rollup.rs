//! `grader rollup PATH...`: one table for a class, from the results files of `check --json`
//! and from learners' checkouts (see [`grader::rollup`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use grader::rollup::{self, Rollup};

/// Prints the class table and the checks failing most; writes the CSV to `csv` when given.
pub fn run(paths: &[PathBuf], csv: Option<&Path>, top: usize) -> Result<ExitCode> {
    let (collected, left_out) = rollup::collect(paths)?;
    for reason in &left_out {
        eprintln!("left out: {reason}");
    }
    if collected.is_empty() {
        bail!(
            "no results found: give files written by `grader check all --json --learner NAME > NAME.json`, \
             directories of them, or learners' checkouts"
        );
    }
    let rollup = Rollup::new(collected);
    println!("{}\n\n{}", rollup.table(), rollup.summary(top));
    if let Some(path) = csv {
        std::fs::write(path, rollup.csv()).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("CSV written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
