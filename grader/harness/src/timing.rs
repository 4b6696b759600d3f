//! The timed part of a check, and only it, run while the grader holds the GPU's machine-wide lock
//! exclusively (the grader's `gpu_lock`): a check that times code on a GPU compiles, exports and
//! checks correctness under the shared hold every runner has, so that learners sharing a GPU wait
//! for each other only while one of them is measuring, and nobody else's work runs beside a
//! measurement.
//!
//! The grader hands a timed check's runner two pipes (their descriptors in
//! [`LOCK_FDS_ENV`], `GRANTS,REQUESTS`): [`timed`] writes `acquire` on the requests pipe and waits
//! for `granted` on the other before it runs its closure, then writes `release`. The grader takes
//! the exclusive hold between the two, and goes back to a shared one at `release`; it lets go of
//! everything when the runner's process ends, however it ends. A runner started without the pipes (on the CPU, or by hand) runs the closure at once.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::sync::Mutex;

/// The environment variable naming the two descriptors: `GRANTS,REQUESTS`.
pub const LOCK_FDS_ENV: &str = "GRADER_GPU_LOCK_FDS";

/// A request, as the grader reads it.
pub const ACQUIRE: &str = "acquire";
/// The grader's answer once it holds the lock.
pub const GRANTED: &str = "granted";
/// The end of the timed part.
pub const RELEASE: &str = "release";

/// The two pipes, once opened, and how deep the [`timed`] calls on this process are nested.
struct Channel {
    grants: BufReader<File>,
    requests: File,
    depth: usize,
}

/// `None` once we know there are no pipes.
static CHANNEL: Mutex<Option<Option<Channel>>> = Mutex::new(None);

/// The pipes named in [`LOCK_FDS_ENV`], opened once per process.
fn open() -> Option<Channel> {
    let value = std::env::var(LOCK_FDS_ENV).ok()?;
    let (grants, requests) = value.split_once(',')?;
    let (grants, requests): (i32, i32) = (grants.parse().ok()?, requests.parse().ok()?);
    // Never another file: descriptors 0 to 2 are stdin, stdout and stderr, and each of these is
    // taken (and owned) once, by this process's first `timed`.
    if grants <= 2 || requests <= 2 || grants == requests {
        return None;
    }
    // SAFETY: the grader opened both pipes for this process and named them in the environment;
    // nothing else in the runner uses these descriptors, and `CHANNEL` owns them from here on.
    let (grants, requests) = unsafe { (File::from_raw_fd(grants), File::from_raw_fd(requests)) };
    Some(Channel { grants: BufReader::new(grants), requests, depth: 0 })
}

/// Runs `f`, the part of a check that times code, while the grader holds the GPU's lock; without
/// the grader's pipes, simply runs it. Nested calls take the lock once.
pub fn timed<T>(f: impl FnOnce() -> T) -> T {
    let _held = Held::take();
    f()
}

/// The lock asked for and granted (or not), given back when dropped, also by a panic in `f`.
struct Held(bool);

impl Held {
    fn take() -> Held {
        let mut channel = CHANNEL.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = channel.get_or_insert_with(open) else { return Held(false) };
        if c.depth == 0 {
            let granted = writeln!(c.requests, "{ACQUIRE}").and_then(|()| c.requests.flush()).is_ok() && {
                let mut line = String::new();
                c.grants.read_line(&mut line).is_ok() && line.trim() == GRANTED
            };
            if !granted {
                eprintln!("warning: the grader did not grant the GPU lock; timing without it");
            }
        }
        c.depth += 1;
        Held(true)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.0 {
            return;
        }
        let mut channel = CHANNEL.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Some(c)) = channel.as_mut() {
            c.depth -= 1;
            if c.depth == 0 {
                let _ = writeln!(c.requests, "{RELEASE}").and_then(|()| c.requests.flush());
            }
        }
    }
}
