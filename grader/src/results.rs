//! Results files: what `grader check --json` prints, each phase's [`PhaseReport`] stamped with
//! the format's version, the time and who was checked, so that an instructor can collect many
//! learners' files and roll them up ([`crate::rollup`]) long after the runs.
//!
//! The stamp's fields sit beside the report's own (`phase`, `subject`, `seed`, `checks`), so a
//! tool that reads the report ignores them:
//!
//! ```json
//! {"format": 1, "grader_version": "0.1.0", "learner": "Ada", "checked_at": "2026-11-23T15:02:01Z",
//!  "phase": "phase1", "subject": "exercises", "seed": 7, "checks": [...]}
//! ```
//!
//! A file holds one such object (`check phaseN`) or an array of them (`check all`). A file
//! without `format` is from before the stamp and reads as format 1, whose shape it has.

use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use crate::report::PhaseReport;

/// The results format this grader writes; it reads this version and older ones.
pub const FORMAT: u32 = 1;

/// What a results file adds to each phase's report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stamp {
    /// The results format's version ([`FORMAT`] when written by this grader).
    #[serde(default = "first_format")]
    pub format: u32,
    /// The version of the grader that ran the checks.
    #[serde(default)]
    pub grader_version: Option<String>,
    /// Who was checked: `--learner NAME`, else the workbook's git `user.name`.
    #[serde(default)]
    pub learner: Option<String>,
    /// When the checks ran, RFC 3339 in UTC.
    #[serde(default)]
    pub checked_at: Option<String>,
}

fn first_format() -> u32 {
    1
}

impl Stamp {
    /// A stamp for checks of `learner` finished now.
    pub fn now(learner: Option<String>) -> Stamp {
        Stamp::at(learner, SystemTime::now())
    }

    /// A stamp for checks of `learner` finished at `time`.
    pub fn at(learner: Option<String>, time: SystemTime) -> Stamp {
        Stamp {
            format: FORMAT,
            grader_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            learner,
            checked_at: Some(humantime::format_rfc3339_seconds(time).to_string()),
        }
    }
}

/// One phase's report with its stamp: an element of a results file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StampedReport {
    /// Format, time and learner.
    #[serde(flatten)]
    pub stamp: Stamp,
    /// The phase's results.
    #[serde(flatten)]
    pub report: PhaseReport,
}

/// A results file's JSON: one phase's object, or an array of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum FileShape {
    Many(Vec<StampedReport>),
    One(Box<StampedReport>),
}

/// The stamped reports of `reports` as a results file: one object when `single`, else an array.
pub fn to_json(reports: &[PhaseReport], stamp: &Stamp, single: bool) -> Result<String> {
    let stamped: Vec<StampedReport> =
        reports.iter().map(|report| StampedReport { stamp: stamp.clone(), report: report.clone() }).collect();
    Ok(match stamped.as_slice() {
        [one] if single => serde_json::to_string_pretty(one)?,
        all => serde_json::to_string_pretty(all)?,
    })
}

/// Parses a results file's text; `origin` names it in errors.
pub fn parse(text: &str, origin: &Path) -> Result<Vec<StampedReport>> {
    let shape: FileShape = serde_json::from_str(text)
        .with_context(|| format!("{} is not a results file written by `grader check --json`", origin.display()))?;
    let reports = match shape {
        FileShape::Many(reports) => reports,
        FileShape::One(report) => vec![*report],
    };
    if let Some(newer) = reports.iter().find(|r| r.stamp.format > FORMAT) {
        bail!(
            "{} is in results format {}, newer than this grader reads ({FORMAT}): update the grader",
            origin.display(),
            newer.stamp.format
        );
    }
    Ok(reports)
}

/// Reads the results file at `path`.
pub fn read(path: &Path) -> Result<Vec<StampedReport>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&text, path)
}

/// The git `user.name` for the checkout at `root`, if any: with `local_only`, only a name set in
/// the checkout itself, not the current user's global one (an instructor reading learners'
/// checkouts would otherwise find their own name in each).
pub fn git_user(root: &Path, local_only: bool) -> Option<String> {
    let scope: &[&str] = if local_only { &["--local"] } else { &[] };
    let output = Command::new("git").arg("config").args(scope).arg("user.name").current_dir(root).output().ok()?;
    let name = String::from_utf8_lossy(&output.stdout).trim().to_string();
    (output.status.success() && !name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::CheckReport;
    use grader_harness::{Status, Subject};

    fn report(phase: &str) -> PhaseReport {
        let check = CheckReport {
            id: "a_check".into(),
            exercise: "an_exercise".into(),
            stretch: false,
            status: Status::Pass,
            message: "fine".into(),
            location: None,
            answers: None,
        };
        PhaseReport { phase: phase.into(), subject: Subject::Exercises, seed: 7, checks: vec![check] }
    }

    #[test]
    fn the_stamp_sits_beside_the_report_and_reads_back() {
        let stamp = Stamp::now(Some("Ada".into()));
        let json = to_json(&[report("phase1")], &stamp, true).unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["format"], FORMAT);
        assert_eq!(value["learner"], "Ada");
        assert_eq!(value["phase"], "phase1");
        assert_eq!(value["checks"][0]["status"], "pass");
        let back = parse(&json, Path::new("one.json")).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].stamp, stamp);
        let all = to_json(&[report("phase1"), report("phase2")], &stamp, false).unwrap();
        let back = parse(&all, Path::new("all.json")).unwrap();
        assert_eq!(back.iter().map(|r| r.report.phase.as_str()).collect::<Vec<_>>(), ["phase1", "phase2"]);
    }

    #[test]
    fn unstamped_output_reads_as_format_one_and_newer_formats_are_refused() {
        let plain = serde_json::to_string(&report("phase3")).unwrap();
        let back = parse(&plain, Path::new("old.json")).unwrap();
        assert_eq!((back[0].stamp.format, back[0].stamp.learner.as_deref()), (1, None));
        let newer = plain.replacen('{', "{\"format\": 99, ", 1);
        let error = parse(&newer, Path::new("new.json")).unwrap_err().to_string();
        assert!(error.contains("new.json is in results format 99"), "{error}");
        let error = parse("{\"name\": \"a package\"}", Path::new("package.json")).unwrap_err().to_string();
        assert!(error.contains("package.json is not a results file"), "{error}");
    }
}
