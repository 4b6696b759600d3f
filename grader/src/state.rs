//! The grader's memory between runs, in `.grader/` at the workbook root (git-ignored): hints
//! seen, the last check results, pristine copies of the stubs, and backups made by `reset`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context as _, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::phases::PHASES;
use crate::report::PhaseReport;
use crate::stubs;
use crate::workbook::Workbook;

/// The `.grader/` directory of one workbook.
#[derive(Clone, Debug)]
pub struct State {
    dir: PathBuf,
}

/// The latest results of `check` on the learner's exercises, per phase.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct LastResults {
    /// Each phase's last report and when it was made.
    pub phases: BTreeMap<String, (SystemTime, PhaseReport)>,
}

impl State {
    /// The state of `workbook`.
    pub fn of(workbook: &Workbook) -> State {
        State { dir: workbook.state_dir() }
    }

    fn read<T: DeserializeOwned + Default>(&self, name: &str) -> T {
        // A missing or damaged state file only loses progress display, never the learner's work.
        std::fs::read_to_string(self.dir.join(name))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default()
    }

    fn write<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let path = self.dir.join(name);
        write_file(&path, &serde_json::to_string_pretty(value)?)
    }

    /// How many hints of `exercise` the learner has seen.
    pub fn hints_seen(&self, exercise: &str) -> usize {
        self.read::<BTreeMap<String, usize>>("hints.json").get(exercise).copied().unwrap_or(0)
    }

    /// Records that `count` hints of `exercise` have been seen.
    pub fn set_hints_seen(&self, exercise: &str, count: usize) -> Result<()> {
        let mut seen: BTreeMap<String, usize> = self.read("hints.json");
        seen.insert(exercise.to_string(), count);
        self.write("hints.json", &seen)
    }

    /// The last results of `check` on the exercises.
    pub fn last_results(&self) -> LastResults {
        self.read("results.json")
    }

    /// Keeps `reports` (of the learner's exercises) as the latest results of their phases.
    pub fn save_results(&self, reports: &[PhaseReport]) -> Result<()> {
        let mut last = self.last_results();
        for report in reports {
            last.phases.insert(report.phase.clone(), (SystemTime::now(), report.clone()));
        }
        self.write("results.json", &last)
    }

    /// Copies each exercise file that is still the stub as shipped into `.grader/pristine/`, so
    /// that `reset` can restore a stub where there is no git history. A file the learner has
    /// edited is never taken for the stub.
    pub fn remember_pristine(&self, workbook: &Workbook) -> Result<()> {
        for phase in PHASES {
            for exercise in phase.exercises {
                let relative = format!("{}/{}", phase.exercises_dir, exercise.file);
                let copy = self.pristine_path(&relative);
                if copy.exists() {
                    continue;
                }
                if let Ok(bytes) = std::fs::read(workbook.path(&relative))
                    && stubs::is_shipped(&relative, &bytes)
                {
                    write_file(&copy, &bytes)?;
                }
            }
        }
        Ok(())
    }

    /// The pristine copy of the exercise file at `relative`, if one was kept and is still the
    /// stub as shipped.
    pub fn pristine(&self, relative: &str) -> Option<Vec<u8>> {
        std::fs::read(self.pristine_path(relative)).ok().filter(|bytes| stubs::is_shipped(relative, bytes))
    }

    fn pristine_path(&self, relative: &str) -> PathBuf {
        self.dir.join("pristine").join(relative)
    }

    /// Saves `bytes`, the learner's version of `relative`, byte for byte, under
    /// `.grader/backups/<time>/` (a new directory for every backup, even two in one second) and
    /// returns where.
    pub fn backup(&self, relative: &str, bytes: &[u8]) -> Result<PathBuf> {
        let stamp = humantime::format_rfc3339_nanos(SystemTime::now()).to_string().replace(':', "-");
        let backups = self.dir.join("backups");
        let mut attempt = 0;
        loop {
            let dir = backups.join(if attempt == 0 { stamp.clone() } else { format!("{stamp}-{attempt}") });
            std::fs::create_dir_all(&backups).with_context(|| format!("cannot create {}", backups.display()))?;
            // create_dir (not _all) fails if the directory exists: no backup is ever overwritten.
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    let path = dir.join(relative);
                    write_file(&path, bytes)?;
                    return Ok(path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => attempt += 1,
                Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
            }
        }
    }
}

/// Writes `bytes` to `path`, creating its directory.
fn write_file(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
