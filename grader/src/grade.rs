//! Grading one phase: refuse the learner's crate or build its runners, then decide every check's
//! verdict. What `check`, `watch` and the workbook's own `dev` checks share.

use std::path::Path;

use grader_harness::{Phase, Subject};

use crate::audit;
use crate::report::PhaseReport;
use crate::runners::Runners;
use crate::workbook::Workbook;

/// Grades `phase` for `subject` with `seed`: the learner's crate is audited first when cargo
/// builds it from `workbook` (a refused crate is not built; a refused exercise's checks are not
/// run, the others are); the sandbox's trampoline is `launcher`, the learner's kernel cache
/// `cache`.
pub fn phase(
    runners: &Runners,
    workbook: Option<&Workbook>,
    phase: &Phase,
    subject: Subject,
    seed: u64,
    launcher: &Path,
    cache: &Path,
) -> PhaseReport {
    let audit = match (workbook, runners, subject) {
        (Some(workbook), Runners::Cargo { .. }, Subject::Exercises) => audit::phase(workbook, phase),
        _ => Ok(Vec::new()),
    };
    match audit {
        Err(refusal) => PhaseReport::run(Err(refusal), phase, subject, seed, &[]),
        Ok(refusals) => {
            let grading = runners.grading(phase, subject, launcher, cache);
            PhaseReport::run(grading, phase, subject, seed, &refusals)
        }
    }
}
