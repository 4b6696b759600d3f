//! The `main` of every check runner: list the checks, or run one and write its [`Outcome`].
//!
//! A runner runs exactly one check per process (the grader starts one process per check), so
//! anything the learner's code does to the process (a panic, an abort, a segfault, a hang) stays
//! inside that check. Within the process, a panic hook tells a `todo!()` (not started) from any
//! other panic (a failure), and records the `file:line` where it happened.

use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Mutex, OnceLock};

use crate::check::{Check, Context, Failure};
use crate::outcome::{Outcome, Status};
use crate::phase::Phase;

/// Where the outcome goes: a file named by `--result`, or stdout when there is none.
static RESULT_PATH: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The message and `file:line` of the last panic that was not a `todo!()`.
static LAST_PANIC: Mutex<Option<(String, Option<String>)>> = Mutex::new(None);

/// Runs a runner binary: `list`, or `run <check-id> [--seed N] [--result FILE]`. Exit code 0 when
/// the command ran (whatever the check's status), 2 for a usage error or a runner that does not
/// match its phase data.
pub fn main(phase: &Phase, checks: &[Check]) -> ExitCode {
    main_with_args(phase, checks, &std::env::args().skip(1).collect::<Vec<_>>())
}

/// [`main`] with the arguments given rather than read from the command line.
pub fn main_with_args(phase: &Phase, checks: &[Check], args: &[String]) -> ExitCode {
    if let Err(message) = validate(phase, checks) {
        eprintln!("error: the {} runner does not match its phase data: {message}", phase.name);
        return ExitCode::from(2);
    }
    let result = match args.first().map(String::as_str) {
        Some("list") => {
            checks.iter().for_each(|c| println!("{}", c.id));
            Ok(())
        }
        Some("run") => run_command(checks, &args[1..]),
        _ => Err("usage: <runner> list | <runner> run <check-id> [--seed N] [--result FILE]".to_string()),
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

fn run_command(checks: &[Check], args: &[String]) -> Result<(), String> {
    let (id, mut seed, mut result) = (args.first().ok_or("run: which check?")?, 0u64, None);
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seed" => seed = value.parse().map_err(|_| format!("--seed takes a number, got `{value}`"))?,
            "--result" => result = Some(PathBuf::from(value)),
            _ => return Err(format!("unknown flag `{flag}`")),
        }
    }
    let check = checks.iter().find(|c| c.id == id).ok_or_else(|| {
        let ids: Vec<&str> = checks.iter().map(|c| c.id).collect();
        format!("no check `{id}` in this runner (it has: {})", ids.join(", "))
    })?;
    RESULT_PATH.set(result).expect("run once per process");
    let outcome = run_check(check, &Context { seed });
    deliver(&outcome);
    Ok(())
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
        Err(_) => {
            let (message, location) =
                LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or(("a panic".into(), None));
            let place = location.as_deref().map(|l| format!(" at {l}")).unwrap_or_default();
            Outcome { status: Status::Fail, message: format!("panicked{place}: {message}"), location }
        }
    }
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
        deliver(&Outcome {
            status: Status::NotStarted,
            message: format!("not started: reached the `todo!()` at {place}"),
            location,
        });
        std::process::exit(0);
    }
    *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some((message, location));
}

/// Writes the outcome as JSON where the grader asked for it.
fn deliver(outcome: &Outcome) {
    let json = serde_json::to_string(outcome).expect("an outcome serialises");
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
