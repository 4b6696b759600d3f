//! What a check is: a function that exercises the learner's code and says pass (with what it
//! verified), fail (with what was expected) or skip (with why it cannot run here).

use std::fmt;

/// What a check returns: `Ok(what was verified)` or a [`Failure`].
pub type CheckResult = Result<String, Failure>;

/// One check, as a runner binary lists it.
#[derive(Clone, Copy)]
pub struct Check {
    /// The id in the phase data ([`crate::CheckSpec::id`]).
    pub id: &'static str,
    /// Runs the check in the runner's process.
    pub run: fn(&Context) -> CheckResult,
}

/// What every check receives.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    /// The seed for random inputs (`grader check --seed N`); the same seed draws the same cases.
    pub seed: u64,
}

/// Why a check did not pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// The learner's code gave a wrong answer; the message shows expected against actual.
    Fail(String),
    /// The check cannot run on this machine; the message says why (for example, no GPU).
    Skip(String),
    /// The machine is not set up for the check (no C compiler, an unwritable cache): not the
    /// learner's code's fault; the message says how to fix the machine.
    Setup(String),
}

impl Failure {
    /// A failure with this message.
    pub fn fail(message: impl Into<String>) -> Failure {
        Failure::Fail(message.into())
    }

    /// A skip with this reason.
    pub fn skip(reason: impl Into<String>) -> Failure {
        Failure::Skip(reason.into())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Fail(m) => f.write_str(m),
            Failure::Skip(m) => write!(f, "skipped: {m}"),
            Failure::Setup(m) => f.write_str(m),
        }
    }
}

/// An error the learner's code returned is a failure that quotes it, unless it is the machine's
/// set-up that failed.
impl From<engine::Error> for Failure {
    fn from(error: engine::Error) -> Failure {
        match error {
            // A GPU that is there but cannot be used (no NVRTC, a driver that fails) is the
            // machine's problem too, not the learner's code's.
            engine::Error::Setup { .. } => Failure::Setup(error.to_string()),
            engine::Error::DeviceUnavailable { .. } => {
                Failure::Setup(format!("set-up problem: {error}; `grader doctor` checks the GPU"))
            }
            _ => Failure::Fail(format!("your code returned an error: {error}")),
        }
    }
}

/// The GPU that GPU checks run on, or a skip carrying the engine's one-line reason why there is
/// none (no driver, no device, no NVRTC...): start every GPU check with `let device = gpu()?;`.
pub fn gpu() -> Result<engine::Device, Failure> {
    match engine::device::cuda::unavailable_reason() {
        None => Ok(engine::Device::Cuda(0)),
        Some(reason) => Err(Failure::skip(reason)),
    }
}

/// Runs `case`, and turns a panic in it into a failure that gives the panic's `file:line` and then
/// `shown()`: what the case was (a graph, a program), which a bare panic message leaves the learner
/// to guess. The property tests of [`crate::for_all`] show their input already; this is for cases
/// a check builds by hand.
pub fn showing_on_panic<T>(
    shown: impl FnOnce() -> String,
    case: impl FnOnce() -> Result<T, Failure>,
) -> Result<T, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(case))
        .unwrap_or_else(|_| Err(Failure::Fail(format!("{}\n{}", crate::runner::described_panic().0, shown()))))
}

/// Fails with `message()` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), Failure> {
    if condition { Ok(()) } else { Err(Failure::Fail(message())) }
}
