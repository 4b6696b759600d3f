//! `grader dev check`: the workbook's own checks, for its authors and CI (as rustlings' `dev
//! check`): every check passes on the solutions, nothing passes on the stubs (every required
//! check reads "not started" and points at its stub), a compile error in one phase is reported
//! with its `file:line` and spreads to no other, and every deliberate mistake a phase declares
//! ([`Phase::mutants`]) is caught by the checks it names (`grader dev mutants`).
//!
//! The learner's files it changes on the way are restored byte for byte, whatever happens.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use grader::grade;
use grader::phases::PHASES;
use grader::report::PhaseReport;
use grader::runners::Runners;
use grader::verdict::fresh_seed;
use grader::workbook::Workbook;
use grader_harness::{Phase, Status, Subject};

/// Grading that the `dev` checks run, in this process, with one seed for the whole run.
struct Grader {
    workbook: Workbook,
    runners: Runners,
    seed: u64,
    launcher: PathBuf,
    cache: PathBuf,
}

impl Grader {
    fn new(root: Option<&Path>) -> Result<Grader> {
        let workbook = Workbook::find(root)?;
        let runners = Runners::Cargo { workbook: workbook.clone(), release: false };
        let launcher = std::env::current_exe().context("cannot find the grader's own executable")?;
        let cache = workbook.state_dir().join("learner-cache");
        Ok(Grader { workbook, runners, seed: fresh_seed(), launcher, cache })
    }

    fn grade(&self, phase: &Phase, subject: Subject) -> PhaseReport {
        grade::phase(&self.runners, Some(&self.workbook), phase, subject, self.seed, &self.launcher, &self.cache)
    }
}

/// Files put back as they were when this is dropped, on every exit path.
struct Restore(Vec<(PathBuf, Vec<u8>)>);

impl Restore {
    fn keep(paths: impl IntoIterator<Item = PathBuf>) -> Result<Restore> {
        let kept = paths
            .into_iter()
            .map(|p| {
                std::fs::read(&p)
                    .map(|bytes| (p.clone(), bytes))
                    .with_context(|| format!("cannot read {}", p.display()))
            })
            .collect::<Result<_>>()?;
        Ok(Restore(kept))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        for (path, bytes) in &self.0 {
            if let Err(e) = std::fs::write(path, bytes) {
                eprintln!("error: could not restore {}: {e}; its content is in git", path.display());
            }
        }
    }
}

/// `grader dev check`, leaving out the mutants of the phases in `skip_mutants`.
pub fn check(root: Option<&Path>, skip_mutants: &[String]) -> Result<ExitCode> {
    for name in skip_mutants {
        grader::phases::select(name)?;
    }
    let grader = Grader::new(root)?;
    eprintln!("Seed {}", grader.seed);
    let mut problems = Vec::new();
    for phase in PHASES {
        let report = grader.grade(phase, Subject::Solutions);
        problems.extend(
            report
                .checks
                .iter()
                .filter(|c| !matches!(c.status, Status::Pass | Status::Skipped))
                .map(|c| format!("solutions {}/{} is {}: {}", phase.name, c.id, c.status, first_line(&c.message))),
        );
        println!("solutions, {}: {}", phase.name, summary(&report));
        let report = grader.grade(phase, Subject::Exercises);
        for c in &report.checks {
            let expected = c.status == Status::NotStarted && c.location.is_some() || c.status == Status::Skipped;
            if !expected {
                problems.push(format!("stub {}/{} is {}: {}", phase.name, c.id, c.status, first_line(&c.message)));
            }
        }
        println!("stubs, {}: {}", phase.name, summary(&report));
    }
    problems.extend(a_compile_error_stays_in_its_phase(&grader)?);
    for phase in PHASES.iter().filter(|p| !skip_mutants.iter().any(|s| s == p.name)) {
        problems.extend(mutants_are_caught(&grader, Some(phase.name))?);
    }
    if !skip_mutants.is_empty() {
        println!("mutants not run here: {} (`grader dev mutants PHASE` runs them)", skip_mutants.join(", "));
    }
    finish(problems)
}

/// `grader dev mutants [PHASE]`.
pub fn mutants(root: Option<&Path>, phase: Option<&str>) -> Result<ExitCode> {
    if let Some(name) = phase {
        grader::phases::select(name)?;
    }
    let grader = Grader::new(root)?;
    finish(mutants_are_caught(&grader, phase)?)
}

fn finish(problems: Vec<String>) -> Result<ExitCode> {
    if problems.is_empty() {
        println!("dev check: every property holds");
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &problems {
        println!("PROBLEM: {problem}");
    }
    println!("{} passed, {} failed", 0, problems.len());
    Ok(ExitCode::FAILURE)
}

fn summary(report: &PhaseReport) -> String {
    let count = |status| report.checks.iter().filter(|c| c.status == status).count();
    format!(
        "{} pass, {} not started, {} skipped, {} fail, {} error",
        count(Status::Pass),
        count(Status::NotStarted),
        count(Status::Skipped),
        count(Status::Fail),
        count(Status::Error)
    )
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// A type error added to phase 1's first stub: every phase 1 check is an error at that file, and
/// no other phase has one.
fn a_compile_error_stays_in_its_phase(grader: &Grader) -> Result<Vec<String>> {
    let phase = PHASES[0];
    let relative = format!("{}/{}", phase.exercises_dir, phase.exercises[0].file);
    let path = grader.workbook.path(&relative);
    let _restore = Restore::keep([path.clone()])?;
    let mut broken = std::fs::read(&path)?;
    broken.extend_from_slice(b"\nfn broken() -> u32 {\n    \"not a number\"\n}\n");
    std::fs::write(&path, broken)?;
    let mut problems = Vec::new();
    for other in PHASES {
        let report = grader.grade(other, Subject::Exercises);
        // A GPU check is skipped where there is no GPU, built or not.
        for c in report.checks.iter().filter(|c| c.status != Status::Skipped) {
            let in_error = c.status == Status::Error;
            if other.name == phase.name {
                let placed = c.location.as_deref().is_some_and(|l| l.starts_with(&format!("{relative}:")));
                if !in_error || !placed || !c.message.contains("mismatched types") {
                    problems.push(format!("the compile error in {relative} shows as {}: {c:?}", c.status));
                }
            } else if in_error {
                problems.push(format!("phase 1's compile error spread to {}/{}", other.name, c.id));
            }
        }
    }
    println!(
        "a compile error in {relative}: {}",
        if problems.is_empty() { "reported there, and only there" } else { "WRONG" }
    );
    Ok(problems)
}

/// For each phase with mutants (or only `only`): the solution's files copied into the exercise
/// crate pass; each mutant fails exactly the checks it names, or is refused.
fn mutants_are_caught(grader: &Grader, only: Option<&str>) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for phase in PHASES.iter().filter(|p| only.is_none_or(|name| p.name == name) && !p.mutants.is_empty()) {
        let mut files: Vec<&str> = phase.mutants.iter().map(|m| m.file).collect();
        files.sort_unstable();
        files.dedup();
        let exercise = |file: &str| grader.workbook.path(phase.exercises_dir).join(file);
        let solution = |file: &str| grader.workbook.path(phase.solutions_dir).join(file);
        let _restore = Restore::keep(files.iter().map(|f| exercise(f)))?;
        let solved = || -> Result<()> {
            for file in &files {
                std::fs::copy(solution(file), exercise(file))?;
            }
            Ok(())
        };
        solved()?;
        problems.extend(judge(
            phase,
            "the solution, inside the exercise crate",
            &grader.grade(phase, Subject::Exercises),
            &[],
            &[],
        ));
        for mutant in phase.mutants {
            solved()?;
            let text = std::fs::read_to_string(solution(mutant.file))?;
            if !text.contains(mutant.find) {
                problems.push(format!("mutant `{}`: its text is not in {} any more", mutant.name, mutant.file));
                continue;
            }
            std::fs::write(exercise(mutant.file), text.replacen(mutant.find, mutant.replace, 1))?;
            let report = grader.grade(phase, Subject::Exercises);
            problems.extend(if mutant.refused {
                judge_refused(phase, mutant.name, &report)
            } else {
                judge(phase, mutant.name, &report, mutant.fails, mutant.may_fail)
            });
        }
    }
    Ok(problems)
}

/// What is wrong with one mutant's run: a named check that did not fail, or another that did
/// not pass. A skip (no GPU here) is neither a catch nor a miss.
fn judge(phase: &Phase, name: &str, report: &PhaseReport, fails: &[&str], may_fail: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for c in &report.checks {
        let named = fails.contains(&c.id.as_str());
        let fine = match c.status {
            Status::Skipped => true,
            Status::Fail if named => true,
            Status::Fail => may_fail.contains(&c.id.as_str()),
            Status::Pass => !named,
            _ => false,
        };
        if !fine {
            let expected = if named { "fail" } else { "pass" };
            problems.push(format!(
                "{}: mutant `{name}`: {} is {}, expected {expected}: {}",
                phase.name,
                c.id,
                c.status,
                first_line(&c.message)
            ));
        }
    }
    println!("{}: {name}: {}", phase.name, if problems.is_empty() { "caught" } else { "WRONG" });
    problems
}

/// What is wrong with a run that the grader should have refused before building.
fn judge_refused(phase: &Phase, name: &str, report: &PhaseReport) -> Vec<String> {
    let problems: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.status != Status::Skipped)
        .filter(|c| c.status != Status::Error || !c.message.contains("refused by the grader"))
        .map(|c| format!("{}: mutant `{name}`: {} is {}, expected the crate to be refused", phase.name, c.id, c.status))
        .collect();
    println!("{}: {name}: {}", phase.name, if problems.is_empty() { "refused" } else { "WRONG" });
    problems
}
