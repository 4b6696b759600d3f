//! `grader rollup PATH...`: a class's results in one table. Each PATH is a results file written
//! by `grader check --json` (see [`crate::results`]), a directory holding such files, or a
//! learner's workbook checkout, whose last results the grader keeps in `.grader/results.json`.
//!
//! One row per learner: per phase, the core exercises done (the same count as `check`'s score)
//! and the stretch ones, the speed checks' ratios, and the time of the last check; then which
//! checks fail for the most learners. A learner's newest result for a phase wins.
//!
//! Results written on a learner's machine are only as honest as that machine: for marks,
//! re-grade the learners' `exercises/` in a clean checkout or the Docker image and roll those up.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use grader_harness::{Phase, Status};
use tabled::builder::Builder;
use tabled::settings::Style;

use crate::phases::PHASES;
use crate::report::PhaseReport;
use crate::results::{self, Stamp, StampedReport};
use crate::state::State;
use crate::workbook::Workbook;

/// One phase's report of one learner, and where it was read.
#[derive(Clone, Debug)]
pub struct Collected {
    /// The learner: the stamp's name, else the file's or checkout's name.
    pub learner: String,
    /// The file or checkout it came from.
    pub source: PathBuf,
    /// Format, time, learner.
    pub stamp: Stamp,
    /// The phase's results.
    pub report: PhaseReport,
}

/// Reads every results file and checkout under `paths`. Files that are not results (or cannot be
/// read) are left out and named in the second list, so one stray file never hides a class.
pub fn collect(paths: &[PathBuf]) -> Result<(Vec<Collected>, Vec<String>)> {
    let (mut collected, mut skipped) = (Vec::new(), Vec::new());
    for path in paths {
        if !path.exists() {
            bail!("{} does not exist", path.display());
        }
        collect_path(path, &mut collected, &mut skipped);
    }
    Ok((collected, skipped))
}

fn collect_path(path: &Path, collected: &mut Vec<Collected>, skipped: &mut Vec<String>) {
    if path.is_file() {
        match results::read(path) {
            Ok(reports) => {
                let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                collected.extend(reports.into_iter().map(|r| stamped(r, &name, path)));
            }
            Err(e) => skipped.push(format!("{e:#}")),
        }
        return;
    }
    if let Ok(workbook) = Workbook::find(Some(path)) {
        collect_checkout(path, &workbook, collected, skipped);
        return;
    }
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(path) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => return skipped.push(format!("cannot read {}: {e}", path.display())),
    };
    entries.sort();
    for entry in entries {
        if entry.is_dir() || entry.extension().is_some_and(|x| x == "json") {
            collect_path(&entry, collected, skipped);
        }
    }
}

fn stamped(report: StampedReport, fallback_name: &str, source: &Path) -> Collected {
    let learner = report.stamp.learner.clone().unwrap_or_else(|| fallback_name.to_string());
    Collected { learner, source: source.to_path_buf(), stamp: report.stamp, report: report.report }
}

/// A checkout's last results, named by the git user set in the checkout, else by its path as
/// given (learners' checkouts often share a directory name).
fn collect_checkout(path: &Path, workbook: &Workbook, collected: &mut Vec<Collected>, skipped: &mut Vec<String>) {
    let root = workbook.root();
    let last = State::of(workbook).last_results();
    if last.phases.is_empty() {
        skipped.push(format!("{}: a workbook with no check results yet (.grader/results.json)", root.display()));
    }
    let name = results::git_user(root, true).unwrap_or_else(|| path.display().to_string());
    for (time, report) in last.phases.into_values() {
        let stamp = Stamp::at(Some(name.clone()), time);
        collected.push(Collected { learner: name.clone(), source: root.to_path_buf(), stamp, report });
    }
}

/// How one phase went for one learner.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseScore {
    /// Core exercises done (every check passed or skipped, one passed), of all core ones.
    pub core: (usize, usize),
    /// Stretch exercises done, of all stretch ones.
    pub stretch: (usize, usize),
}

/// One learner's row.
#[derive(Clone, Debug)]
pub struct LearnerRow {
    /// The learner's name.
    pub learner: String,
    /// Per phase name, the score; phases without results are absent.
    pub phases: BTreeMap<String, PhaseScore>,
    /// Per speed check (`phase4/pointwise_cuda_bandwidth`), its ratio (`93%`) or status.
    pub speed: BTreeMap<String, String>,
    /// The newest `checked_at` of the learner's results.
    pub last_check: Option<String>,
}

/// How many learners a check fails for.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckTally {
    /// `phase/check_id`.
    pub check: String,
    /// Learners whose result is `fail` or `error`.
    pub failing: usize,
    /// Learners who have not started it.
    pub not_started: usize,
    /// Learners with a result for it.
    pub of: usize,
}

/// The class: one row per learner, the phases and speed checks seen, and the checks that fail
/// most.
#[derive(Clone, Debug)]
pub struct Rollup {
    /// Phase names in course order (unknown ones after, by name).
    pub phases: Vec<String>,
    /// Speed check names seen, `phase/check_id`.
    pub speed_checks: Vec<String>,
    /// One row per learner, by name.
    pub rows: Vec<LearnerRow>,
    /// Checks failing for at least one learner, most failing first.
    pub failing: Vec<CheckTally>,
}

impl Rollup {
    /// Rolls `collected` up, keeping each learner's newest result per phase.
    pub fn new(collected: Vec<Collected>) -> Rollup {
        let mut newest: BTreeMap<(String, String), Collected> = BTreeMap::new();
        for c in collected {
            let key = (c.learner.clone(), c.report.phase.clone());
            if newest.get(&key).is_none_or(|kept| kept.stamp.checked_at <= c.stamp.checked_at) {
                newest.insert(key, c);
            }
        }
        let mut phases: Vec<String> = newest.keys().map(|(_, phase)| phase.clone()).collect();
        phases.sort_by_key(|name| (PHASES.iter().position(|p| p.name == name).unwrap_or(PHASES.len()), name.clone()));
        phases.dedup();
        let mut rows: BTreeMap<String, LearnerRow> = BTreeMap::new();
        let mut tallies: BTreeMap<String, CheckTally> = BTreeMap::new();
        for ((learner, phase), c) in &newest {
            let row = rows.entry(learner.clone()).or_insert_with(|| LearnerRow {
                learner: learner.clone(),
                phases: BTreeMap::new(),
                speed: BTreeMap::new(),
                last_check: None,
            });
            row.last_check = row.last_check.clone().max(c.stamp.checked_at.clone());
            let known = PHASES.iter().find(|p| p.name == phase);
            row.phases.insert(phase.clone(), score(&c.report, known.copied()));
            for check in &c.report.checks {
                let name = format!("{phase}/{}", check.id);
                if known.is_some_and(|p| is_speed_check(p, &check.id)) {
                    row.speed.insert(name.clone(), speed_cell(check.status, &check.message));
                }
                let tally = tallies.entry(name.clone()).or_insert(CheckTally {
                    check: name,
                    failing: 0,
                    not_started: 0,
                    of: 0,
                });
                tally.of += 1;
                match check.status {
                    Status::Fail | Status::Error => tally.failing += 1,
                    Status::NotStarted => tally.not_started += 1,
                    Status::Pass | Status::Skipped => {}
                }
            }
        }
        let mut speed_checks: Vec<String> = rows.values().flat_map(|r| r.speed.keys().cloned()).collect();
        speed_checks.sort();
        speed_checks.dedup();
        let mut failing: Vec<CheckTally> = tallies.into_values().filter(|t| t.failing > 0).collect();
        failing.sort_by(|a, b| b.failing.cmp(&a.failing).then_with(|| a.check.cmp(&b.check)));
        Rollup { phases, speed_checks, rows: rows.into_values().collect(), failing }
    }

    /// The header and the cells of every row, as both the table and the CSV show them.
    fn grid(
        &self,
        phase_cells: impl Fn(Option<&PhaseScore>) -> Vec<String>,
        phase_headers: &[&str],
    ) -> Vec<Vec<String>> {
        let mut header = vec!["learner".to_string()];
        for phase in &self.phases {
            header.extend(phase_headers.iter().map(|h| format!("{phase}{h}")));
        }
        header.extend(self.speed_checks.iter().cloned());
        header.push("last check".into());
        let mut grid = vec![header];
        for row in &self.rows {
            let mut cells = vec![row.learner.clone()];
            for phase in &self.phases {
                cells.extend(phase_cells(row.phases.get(phase)));
            }
            cells.extend(self.speed_checks.iter().map(|s| row.speed.get(s).cloned().unwrap_or_else(|| "–".into())));
            cells.push(row.last_check.clone().unwrap_or_else(|| "–".into()));
            grid.push(cells);
        }
        grid
    }

    /// The table an instructor reads: `3/4 +1` is three of four core exercises done and one
    /// stretch exercise.
    pub fn table(&self) -> String {
        let grid = self.grid(
            |score| {
                vec![match score {
                    None => "–".to_string(),
                    Some(PhaseScore { core: (done, of), stretch: (0, _) }) => format!("{done}/{of}"),
                    Some(PhaseScore { core: (done, of), stretch: (extra, _) }) => format!("{done}/{of} +{extra}"),
                }]
            },
            &[""],
        );
        let mut builder = Builder::default();
        for row in grid {
            builder.push_record(row);
        }
        builder.build().with(Style::rounded()).to_string()
    }

    /// The same as CSV, with numbers in their own columns for a spreadsheet.
    pub fn csv(&self) -> String {
        let grid = self.grid(
            |score| match score {
                None => vec![String::new(); 4],
                Some(s) => [s.core.0, s.core.1, s.stretch.0, s.stretch.1].iter().map(usize::to_string).collect(),
            },
            &[" core done", " core total", " stretch done", " stretch total"],
        );
        let mut out = String::new();
        for row in grid {
            let cells: Vec<String> = row.iter().map(|cell| csv_field(cell)).collect();
            let _ = writeln!(out, "{}", cells.join(","));
        }
        out
    }

    /// The checks failing for the most learners, at most `limit` of them.
    pub fn summary(&self, limit: usize) -> String {
        let learners = self.rows.len();
        let mut out = format!("{learners} learner{}", if learners == 1 { "" } else { "s" });
        if self.failing.is_empty() {
            out.push_str("; no check fails for anyone.\n");
            return out;
        }
        out.push_str("; the checks failing for the most learners (fail or error):\n");
        for t in self.failing.iter().take(limit) {
            let _ =
                writeln!(out, "  {:<48} {} of {} learners, {} not started", t.check, t.failing, t.of, t.not_started);
        }
        out
    }
}

/// Exercises done per phase, as `check` scores them; a phase this grader does not know counts
/// its checks (passed of all) as core ones.
fn score(report: &PhaseReport, phase: Option<&Phase>) -> PhaseScore {
    let Some(phase) = phase else {
        let passed = report.checks.iter().filter(|c| c.status == Status::Pass).count();
        return PhaseScore { core: (passed, report.checks.len()), stretch: (0, 0) };
    };
    let count = |stretch: bool| {
        let exercises: Vec<_> = phase.exercises.iter().filter(|e| e.stretch == stretch).collect();
        (exercises.iter().filter(|e| report.exercise_done(e.name)).count(), exercises.len())
    };
    PhaseScore { core: count(false), stretch: count(true) }
}

fn is_speed_check(phase: &Phase, id: &str) -> bool {
    phase.checks().any(|(_, spec)| spec.id == id && spec.gpu_timing)
}

/// A speed check's ratio to its reference: the first percentage its message states (every speed
/// check's message leads with it, pass or fail), else its status.
fn speed_cell(status: Status, message: &str) -> String {
    let ratio = message.split_whitespace().find_map(|word| {
        let number = word.trim_start_matches('(').strip_suffix('%')?;
        number.parse::<f64>().ok().map(|_| format!("{number}%"))
    });
    match (status, ratio) {
        (Status::Pass | Status::Fail, Some(ratio)) => format!("{ratio} {status}"),
        _ => status.to_string(),
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::CheckReport;
    use grader_harness::Subject;

    /// A phase 4 report where every check has `status`, the bandwidth check saying `ratio`.
    fn phase4(status: Status, ratio: &str) -> PhaseReport {
        let phase = &checks_phase4::PHASE;
        let checks = phase
            .checks()
            .map(|(exercise, spec)| CheckReport {
                id: spec.id.into(),
                exercise: exercise.name.into(),
                stretch: exercise.stretch,
                status,
                message: if spec.gpu_timing {
                    format!("812 GB/s, {ratio} of the engine's kernel")
                } else {
                    "ok".into()
                },
                location: None,
                answers: None,
            })
            .collect();
        PhaseReport { phase: "phase4".into(), subject: Subject::Exercises, seed: 7, checks }
    }

    fn collected(learner: &str, at: &str, report: PhaseReport) -> Collected {
        let stamp = Stamp { checked_at: Some(at.into()), ..Stamp::now(Some(learner.into())) };
        Collected { learner: learner.into(), source: PathBuf::from("x.json"), stamp, report }
    }

    #[test]
    fn newest_result_per_learner_and_phase_wins_and_failures_are_tallied() {
        let rollup = Rollup::new(vec![
            collected("bo", "2026-11-23T10:00:00Z", phase4(Status::NotStarted, "0%")),
            collected("ada", "2026-11-23T09:00:00Z", phase4(Status::Fail, "12%")),
            collected("ada", "2026-11-23T11:00:00Z", phase4(Status::Pass, "93%")),
            collected("ada", "2026-11-23T10:00:00Z", phase4(Status::Fail, "40%")),
        ]);
        assert_eq!(rollup.phases, ["phase4"]);
        assert_eq!(rollup.speed_checks, ["phase4/pointwise_cuda_bandwidth"]);
        let ada = &rollup.rows[0];
        assert_eq!(ada.learner, "ada");
        assert_eq!(ada.last_check.as_deref(), Some("2026-11-23T11:00:00Z"));
        assert_eq!(ada.phases["phase4"], PhaseScore { core: (6, 6), stretch: (1, 1) });
        assert_eq!(ada.speed["phase4/pointwise_cuda_bandwidth"], "93% pass");
        let bo = &rollup.rows[1];
        assert_eq!(bo.phases["phase4"], PhaseScore { core: (0, 6), stretch: (0, 1) });
        assert_eq!(bo.speed["phase4/pointwise_cuda_bandwidth"], "not_started");
        assert!(rollup.failing.is_empty(), "not started is not failing: {:?}", rollup.failing);
        let table = rollup.table();
        assert!(table.contains("6/6 +1") && table.contains("0/6"), "{table}");
        let csv = rollup.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "learner,phase4 core done,phase4 core total,phase4 stretch done,phase4 stretch total,phase4/pointwise_cuda_bandwidth,last check"
        );
        assert_eq!(lines[1], "ada,6,6,1,1,93% pass,2026-11-23T11:00:00Z");
        assert!(rollup.summary(5).contains("no check fails"), "{}", rollup.summary(5));
    }

    #[test]
    fn the_most_failing_checks_come_first() {
        let mut one = phase4(Status::Pass, "90%");
        one.checks[0].status = Status::Fail;
        one.checks[1].status = Status::Error;
        let mut two = phase4(Status::Pass, "90%");
        two.checks[1].status = Status::Fail;
        let rollup = Rollup::new(vec![collected("a", "t1", one), collected("b", "t1", two)]);
        let first = &rollup.failing[0];
        assert_eq!((first.check.as_str(), first.failing, first.of), ("phase4/kernels_are_summarised", 2, 2));
        assert_eq!(rollup.failing.len(), 2);
        assert!(
            rollup.summary(1).contains("phase4/kernels_are_summarised")
                && !rollup.summary(1).contains("names_are_read")
        );
    }

    /// A directory that passes for a workbook checkout, holding `report` as its last results.
    fn checkout(dir: &Path, report: PhaseReport) -> PathBuf {
        std::fs::create_dir_all(dir.join("exercises")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[workspace]\n").unwrap();
        State::of(&Workbook::find(Some(dir)).unwrap()).save_results(&[report]).unwrap();
        dir.to_path_buf()
    }

    #[test]
    fn checkouts_and_directories_of_results_are_collected() {
        let dir = tempfile::tempdir().unwrap();
        let solved = checkout(&dir.path().join("ada/workbook"), phase4(Status::Pass, "95%"));
        let fresh = checkout(&dir.path().join("bo/workbook"), phase4(Status::NotStarted, "0%"));
        let files = dir.path().join("files");
        std::fs::create_dir_all(&files).unwrap();
        let stamp = Stamp::now(None);
        std::fs::write(files.join("cy.json"), results::to_json(&[phase4(Status::Fail, "50%")], &stamp, true).unwrap())
            .unwrap();
        std::fs::write(files.join("package.json"), "{\"name\": \"not results\"}").unwrap();
        let (collected, left_out) = collect(&[solved.clone(), fresh.clone(), files]).unwrap();
        assert_eq!(left_out.len(), 1, "{left_out:?}");
        assert!(left_out[0].contains("package.json is not a results file"), "{left_out:?}");
        let rollup = Rollup::new(collected);
        let names: Vec<&str> = rollup.rows.iter().map(|r| r.learner.as_str()).collect();
        let (ada, bo) = (solved.display().to_string(), fresh.display().to_string());
        let mut expected = vec![ada.as_str(), bo.as_str(), "cy"];
        expected.sort();
        assert_eq!(names, expected);
        let score = |name: &str| rollup.rows.iter().find(|r| r.learner == name).unwrap().phases["phase4"].clone();
        assert_eq!(score(&ada), PhaseScore { core: (6, 6), stretch: (1, 1) });
        assert_eq!(score(&bo), PhaseScore { core: (0, 6), stretch: (0, 1) });
        assert_eq!(score("cy"), PhaseScore { core: (0, 6), stretch: (0, 1) });
        assert!(collect(&[dir.path().join("missing")]).unwrap_err().to_string().ends_with("does not exist"));
    }

    #[test]
    fn csv_fields_with_commas_or_quotes_are_quoted() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("Lovelace, Ada"), "\"Lovelace, Ada\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn speed_cells_show_the_ratio_or_the_status() {
        assert_eq!(speed_cell(Status::Fail, "your kernel moves 10 GB/s, 4% of the engine's"), "4% fail");
        assert_eq!(speed_cell(Status::Skipped, "needs a GPU"), "skipped");
    }
}
