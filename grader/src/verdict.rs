//! Deciding a check's verdict outside the learner's process.
//!
//! The subject's runner (linked with the learner's crate, in the [sandbox](crate::sandbox)) runs
//! the check first. Its word is taken only where it can only cost the learner: a failure, a
//! crash, a time-out, a `todo!()` or a set-up problem. Anything else, a "pass" above all, goes to the *judge*: the
//! runner built against the reference solution, which links no learner code. It runs the same
//! check with the same seed and compares the answers the subject recorded with its own
//! ([`grader_harness::runner::judge`]). The seed is drawn by the grader for each run, so answers
//! cannot be known in advance.

use std::path::Path;
use std::time::Duration;

use grader_harness::transcript::Entry;
use grader_harness::{Outcome, Record, Status};

use crate::isolation::{Run, Runner};
use crate::sanitize::printable;

/// The runners that grade one phase: the subject's, and the judge's.
#[derive(Debug)]
pub struct Grading {
    /// Runs the checks against the crate under test (sandboxed).
    pub subject: Runner,
    /// Runs them against the reference solution and judges the subject's records.
    pub judge: Runner,
    /// The directories the sandboxed runners live and write in, removed when grading ends.
    pub scratch: Vec<tempfile::TempDir>,
}

impl Grading {
    /// The verdict on check `id` with `seed`, each run bounded by `limit`.
    pub fn verdict(&self, id: &str, seed: u64, limit: Duration) -> Outcome {
        self.verdict_and_answers(id, seed, limit).0
    }

    /// [`Grading::verdict`], and the answers the subject recorded when it passed.
    pub fn verdict_and_answers(&self, id: &str, seed: u64, limit: Duration) -> (Outcome, Option<Vec<Entry>>) {
        let record = match self.subject.run(id, seed, limit, None) {
            Run::Ended(outcome) => return (outcome, None),
            Run::Recorded(record) => record,
        };
        if let Some(claim) = &record.outcome
            && matches!(claim.status, Status::Fail | Status::NotStarted | Status::Error)
        {
            return (shown(claim.clone()), None);
        }
        match self.judge_record(id, seed, limit, &record) {
            // A pass in the judge's words: the subject's claim, or, where the judge evaluated the
            // subject's artifact itself, its own measurement.
            Ok(verdict) if verdict.status == Status::Pass => (shown(verdict), Some(record.transcript)),
            Ok(verdict) => (shown(verdict), None),
            Err(outcome) => (
                Outcome {
                    status: Status::Error,
                    message: format!("the judge (the reference solution's runner) did not finish: {}", outcome.message),
                    location: None,
                },
                None,
            ),
        }
    }

    /// Hands `record` to the judge: a fresh file holding the record as the grader read it, in a
    /// directory the judge may read (the subject's process is gone by now).
    pub fn judge_record(&self, id: &str, seed: u64, limit: Duration, record: &Record) -> Result<Outcome, Outcome> {
        let setup_error = |message: String| Outcome { status: Status::Error, message, location: None };
        let made = match self.judge.scratch() {
            Some(scratch) => tempfile::tempdir_in(scratch),
            None => tempfile::tempdir(),
        };
        let dir = made.map_err(|e| setup_error(format!("cannot create a temporary directory: {e}")))?;
        let path = dir.path().join("judged.json");
        write_record(&path, record).map_err(|e| setup_error(format!("cannot write {}: {e}", path.display())))?;
        match self.judge.run(id, seed, limit, Some(&path)) {
            Run::Recorded(Record { outcome: Some(verdict), .. }) => Ok(verdict),
            Run::Recorded(Record { outcome: None, .. }) => Err(setup_error("it wrote no verdict".into())),
            Run::Ended(outcome) => Err(outcome),
        }
    }
}

fn write_record(path: &Path, record: &Record) -> std::io::Result<()> {
    std::fs::write(path, serde_json::to_vec(record)?)
}

/// An outcome whose text came from the subject's process, made safe to print.
fn shown(outcome: Outcome) -> Outcome {
    Outcome {
        status: outcome.status,
        message: printable(&outcome.message),
        location: outcome.location.map(|l| printable(&l)),
    }
}

/// A seed for one run, drawn from the kernel's random source (or the clock, where that fails),
/// below 2^47: too many to guess or to search for from the inputs a check derives from it, and
/// room for checks to add small offsets to it.
pub fn fresh_seed() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom(2) writes at most `bytes.len()` bytes into the buffer it is given.
    let filled = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    let drawn = if filled == 8 {
        u64::from_le_bytes(bytes)
    } else {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    };
    drawn % (1 << 47)
}
