//! The `main` of every check runner: list the checks, run one and write what happened, or judge
//! another run of it.
//!
//! A runner runs exactly one check per process (the grader starts one process per check), so
//! anything the learner's code does to the process (a panic, an abort, a segfault, a hang) stays
//! inside that check. Within the process, a panic hook tells a `todo!()` (not started) from any
//! other panic (a failure), and records the `file:line` where it happened.
//!
//! A run writes a [`Record`]: how the check ended in this process, and the
//! [transcript](crate::transcript) of the answers it judged. Nothing in that record is trusted to
//! mean "pass" when learner code ran in the process. The grader hands it to the *judge*
//! (`run <id> --judge FILE`): the same check in the runner built against the reference solution,
//! which links no learner code. The judge runs the check itself with the same seed and decides
//! the verdict (see [`judge`]).

use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::check::{Check, Context, Failure};
use crate::outcome::{Outcome, Status};
use crate::phase::Phase;
use crate::transcript::{self, Entry};

/// What one run of a check writes: how it ended in its process, and the answers it recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// How the check ended in the process that ran it, as that process tells it.
    pub outcome: Option<Outcome>,
    /// The answers the check recorded, in order.
    pub transcript: Vec<Entry>,
    /// The runner's [seal](crate::seal) on the two, keyed with the run's seed.
    #[serde(default)]
    pub seal: Option<String>,
}

impl Record {
    /// A record of `outcome` and `transcript`, sealed for check `id` in a run with `seed`.
    pub fn sealed(seed: u64, id: &str, outcome: Option<Outcome>, transcript: Vec<Entry>) -> Record {
        let seal = crate::seal::seal(seed, id, outcome.as_ref(), &transcript);
        Record { outcome, transcript, seal: Some(seal) }
    }

    /// Whether this record carries the seal of check `id` in a run with `seed`.
    pub fn is_sealed(&self, seed: u64, id: &str) -> bool {
        self.seal
            .as_deref()
            .is_some_and(|seal| crate::seal::verify(seal, seed, id, self.outcome.as_ref(), &self.transcript))
    }
}

/// The environment variable by which the grader tells a runner to read its seed from stdin
/// (one line) rather than from the command line, where any process could read it.
pub const SEED_ON_STDIN: &str = "GRADER_SEED_ON_STDIN";

/// Where the outcome goes: a file named by `--result`, or stdout when there is none.
static RESULT_PATH: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The running check's id and seed, which seal its record.
static RUNNING: OnceLock<(String, u64)> = OnceLock::new();

/// The message and `file:line` of the last panic that was not a `todo!()`.
static LAST_PANIC: Mutex<Option<(String, Option<String>)>> = Mutex::new(None);

/// The `main` of a phase's runner binary ([`crate::runner!`]): the checks are the phase's own,
/// each run by the function its declaration links.
pub fn main_of(phase: &'static Phase) -> ExitCode {
    let checks: Vec<Check> =
        phase.checks().filter_map(|(_, spec)| spec.run.map(|run| Check { id: spec.id, run })).collect();
    main(phase, &checks)
}

/// Runs a runner binary: `list`, or `run <check-id> [--seed N] [--result FILE] [--judge FILE]`.
/// Exit code 0 when the command ran (whatever the check's status), 2 for a usage error or a
/// runner that does not match its phase data.
pub fn main(phase: &'static Phase, checks: &[Check]) -> ExitCode {
    main_with_args(phase, checks, &std::env::args().skip(1).collect::<Vec<_>>())
}

/// [`main`] with the arguments given rather than read from the command line.
pub fn main_with_args(phase: &'static Phase, checks: &[Check], args: &[String]) -> ExitCode {
    // Before anything runs that could reach learner code (see `wires`). A hook already in place
    // means something ran before this runner's `main`: no check can be trusted in this process.
    if !crate::wires::install() {
        eprintln!("error: the {} runner's trip wires were hooked before its main ran", phase.name);
        return ExitCode::from(2);
    }
    if let Err(message) = validate(phase, checks) {
        eprintln!("error: the {} runner does not match its phase data: {message}", phase.name);
        return ExitCode::from(2);
    }
    let result = match args.first().map(String::as_str) {
        Some("list") => {
            checks.iter().for_each(|c| println!("{}", c.id));
            Ok(())
        }
        Some("run") => run_command(phase, checks, &args[1..]),
        _ => {
            Err("usage: <runner> list | <runner> run <check-id> [--seed N] [--result FILE] [--judge FILE]".to_string())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Every check id of the phase data has exactly one check function, and no function is extra.
pub fn validate(phase: &Phase, checks: &[Check]) -> Result<(), String> {
    for (_, spec) in phase.checks() {
        let count = checks.iter().filter(|c| c.id == spec.id).count();
        if count != 1 {
            return Err(format!("check `{}` has {count} functions, expected exactly one", spec.id));
        }
    }
    match checks.iter().find(|c| !phase.checks().any(|(_, s)| s.id == c.id)) {
        Some(extra) => Err(format!("check `{}` is not listed in the phase data", extra.id)),
        None => Ok(()),
    }
}

fn run_command(phase: &'static Phase, checks: &[Check], args: &[String]) -> Result<(), String> {
    let (id, mut seed, mut result, mut judged) = (args.first().ok_or("run: which check?")?, 0u64, None, None);
    if std::env::var_os(SEED_ON_STDIN).is_some() {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map_err(|e| format!("cannot read the seed from stdin: {e}"))?;
        seed = line.trim().parse().map_err(|_| format!("the seed on stdin is not a number: `{}`", line.trim()))?;
    }
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seed" => seed = value.parse().map_err(|_| format!("--seed takes a number, got `{value}`"))?,
            "--result" => result = Some(PathBuf::from(value)),
            "--judge" => judged = Some(PathBuf::from(value)),
            _ => return Err(format!("unknown flag `{flag}`")),
        }
    }
    let check = checks.iter().find(|c| c.id == id).ok_or_else(|| {
        let ids: Vec<&str> = checks.iter().map(|c| c.id).collect();
        format!("no check `{id}` in this runner (it has: {})", ids.join(", "))
    })?;
    // Read what is judged before the check runs, so that a damaged file is a usage error.
    let judged = judged.map(|path| read_record(&path)).transpose()?;
    if let Some(subject) = &judged {
        transcript::judge_of(subject.transcript.clone());
    }
    crate::confine::close_own_process_after_cuda()?;
    RESULT_PATH.set(result).expect("run once per process");
    RUNNING.set((check.id.to_string(), seed)).expect("run once per process");
    crate::wires::arm(armed(phase, check.id));
    let outcome = run_check(check, &Context { seed });
    let recorded = transcript::take();
    match judged {
        None => deliver(Some(outcome), recorded),
        Some(subject) => {
            let verdict = judge(id, seed, outcome, &recorded, subject, transcript::artifact_used());
            deliver(Some(verdict), vec![]);
        }
    }
    Ok(())
}

/// The forbidden items to arm for check `id`: its exercise's. A runner that does not lead its
/// process group was not started by the grader (nor by a shell) but by code running in a check,
/// which can make no group of its own: there, every exercise's items are armed, so that a runner
/// started for another exercise's check is no way around a wire.
fn armed(phase: &'static Phase, id: &str) -> Vec<&'static crate::phase::Forbidden> {
    // SAFETY: getpgrp(2) and getpid(2) take no arguments and cannot fail.
    let leads_its_group = unsafe { libc::getpgrp() == libc::getpid() };
    phase
        .exercises
        .iter()
        .filter(|e| !leads_its_group || e.checks.iter().any(|c| c.id == id))
        .flat_map(|e| e.forbidden.iter())
        .collect()
}

fn read_record(path: &Path) -> Result<Record, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the run to judge, {}: {e}", path.display()))?;
    // A subject's record that does not parse was damaged by the subject's process: judge it as
    // a run that recorded nothing and said nothing.
    Ok(serde_json::from_slice(&bytes).unwrap_or_default())
}

/// The verdict on a subject's run of check `id`, decided by the reference's own run of it with
/// the same `seed` (`reference`, `recorded`). The subject's word is taken only where it can only
/// cost the subject: a failure, a `todo!()` or a set-up problem. A pass must be earned by answers
/// that agree with the reference's, and a skip must be one the reference makes too. When the
/// reference's run evaluated the subject's own artifact (`artifact_used`: its kernel, timed by the
/// judge), how that run went is the subject's verdict, pass or fail, in the judge's words.
pub fn judge(
    id: &str,
    seed: u64,
    reference: Outcome,
    recorded: &[Entry],
    subject: Record,
    artifact_used: bool,
) -> Outcome {
    let verdict = |status, message: String| Outcome { status, message, location: None };
    if !subject.is_sealed(seed, id) {
        return verdict(
            Status::Fail,
            "the check's result does not carry the check runner's seal: something other than the check wrote it \
             (did your code write the result file, or end the process early?)"
                .into(),
        );
    }
    let Some(claim) = subject.outcome else {
        return verdict(Status::Fail, "the check's process wrote no result it could have finished with".into());
    };
    match (claim.status, reference.status) {
        (Status::Fail | Status::NotStarted | Status::Error, _) => claim,
        (_, Status::Skipped) => reference,
        (Status::Skipped, _) => verdict(
            Status::Fail,
            format!("the check skipped in your process ({}), but it runs on this machine", claim.message),
        ),
        (_, Status::Pass) if recorded.is_empty() => verdict(
            Status::Error,
            format!(
                "check `{id}` recorded none of the reference's answers, so it cannot judge yours: a bug in the workbook"
            ),
        ),
        (_, Status::Pass) => match transcript::compare(recorded, &subject.transcript) {
            // The judge evaluated the subject's own artifact (timed its kernel, say): its word, not
            // the subject's, says how that went.
            Ok(()) if claim.status == Status::Pass && artifact_used => reference,
            Ok(()) if claim.status == Status::Pass => claim,
            Ok(()) => verdict(Status::Fail, format!("the check's process ended as `{}`", claim.status)),
            Err(difference) => verdict(
                Status::Fail,
                format!(
                    "{difference}
(seed {seed})"
                ),
            ),
        },
        (_, Status::Fail) if artifact_used => reference,
        (_, status) => verdict(
            Status::Error,
            format!(
                "the reference solution does not pass check `{id}` with seed {seed} ({status}: {}): a bug in the \
                 workbook, please report it",
                reference.message
            ),
        ),
    }
}

/// Runs one check in this process and turns how it ended into an [`Outcome`]. A `todo!()` ends
/// the process at once, after delivering a `not_started` outcome.
pub fn run_check(check: &Check, ctx: &Context) -> Outcome {
    std::panic::set_hook(Box::new(on_panic));
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| (check.run)(ctx)));
    let _ = std::panic::take_hook();
    match result {
        Ok(Ok(verified)) => Outcome { status: Status::Pass, message: verified, location: None },
        Ok(Err(Failure::Fail(message))) => Outcome { status: Status::Fail, message, location: None },
        Ok(Err(Failure::Skip(reason))) => Outcome { status: Status::Skipped, message: reason, location: None },
        Ok(Err(Failure::Setup(message))) => Outcome { status: Status::Error, message, location: None },
        Err(_) => {
            let (message, location) = described_panic();
            Outcome { status: Status::Fail, message, location }
        }
    }
}

/// The last panic, described for the learner: with its `file:line` when it is in their code;
/// a panic inside the grader's own check code is said to be one, and points nowhere, since the
/// learner has nothing to open there.
pub(crate) fn described_panic() -> (String, Option<String>) {
    let (message, location) = take_last_panic();
    match location {
        Some(place) if place.starts_with("grader/checks/") || place.starts_with("grader/harness/") => (
            format!(
                "the check itself panicked ({message}), usually because your code returned something it did not \
                 expect; the message says what"
            ),
            None,
        ),
        Some(place) => (format!("panicked at {place}: {message}"), Some(place)),
        None => (format!("panicked: {message}"), None),
    }
}

/// The message and `file:line` of the last panic that was not a `todo!()`, forgetting it.
fn take_last_panic() -> (String, Option<String>) {
    LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or(("a panic".into(), None))
}

/// The panic hook: a `todo!()`/`unimplemented!()` delivers "not started" and exits; any other
/// panic is remembered for [`run_check`] (or for a property test that catches and shrinks it).
fn on_panic(info: &PanicHookInfo<'_>) {
    let payload = info.payload();
    let message = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => text.to_string(),
        (_, Some(text)) => text.clone(),
        _ => "a panic with a non-text payload".to_string(),
    };
    let location = info.location().map(|l| format!("{}:{}", l.file(), l.line()));
    if message.starts_with("not yet implemented") || message.starts_with("not implemented") {
        let place = location.as_deref().unwrap_or("an unknown place");
        let outcome = Outcome {
            status: Status::NotStarted,
            message: format!("not started: reached the `todo!()` at {place}"),
            location,
        };
        deliver(Some(outcome), transcript::take());
        std::process::exit(0);
    }
    *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some((message, location));
}

/// Writes the record, sealed, as JSON where the grader asked for it.
fn deliver(outcome: Option<Outcome>, transcript: Vec<Entry>) {
    let (id, seed) = RUNNING.get().cloned().unwrap_or_default();
    let record = Record::sealed(seed, &id, outcome, transcript);
    let json = serde_json::to_string(&record).expect("a record serialises");
    match RESULT_PATH.get().and_then(Option::as_deref) {
        Some(path) => write_result(path, &json),
        None => println!("{json}"),
    }
}

fn write_result(path: &Path, json: &str) {
    if let Err(e) = std::fs::write(path, json) {
        eprintln!("error: cannot write the check result to {}: {e}", path.display());
        std::process::exit(3);
    }
}
