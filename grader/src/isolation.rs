//! Running one check in a process of its own, with a time limit that bounds the grader too.
//!
//! How the process ended is decided first: killed at the time limit (an endless loop?), killed
//! by a signal (abort, segfault), or an exit code other than 0 all speak for themselves, whatever
//! the process wrote before. Only a process that exited with 0 has its [`Record`] read. The
//! process leads a group of its own, and the whole group is killed on every exit path, so children
//! it started (compilers, or a program that keeps its output open) cannot outlive the check or
//! hold the grader; the output readers have deadlines as well.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use grader_harness::timing::LOCK_FDS_ENV;
use grader_harness::{Outcome, Record, Status};

use crate::gpu_lock::{LockServer, Timing};
use crate::sandbox::Sandbox;
use crate::sanitize::printable;

/// How much of a check's output is kept to quote in a failure.
const OUTPUT_TAIL_BYTES: usize = 4096;

/// How long the output readers may take after the process group is gone.
const READER_GRACE: Duration = Duration::from_secs(2);

/// A check runner to start: a program, the arguments that come before the runner's own, and the
/// sandbox it runs in (none for a runner that links no learner code).
#[derive(Clone, Debug)]
pub struct Runner {
    program: PathBuf,
    leading_args: Vec<OsString>,
    sandbox: Option<Sandbox>,
    environment: Vec<(OsString, OsString)>,
}

/// How one run of a check ended, before anyone judged it.
#[derive(Debug)]
pub enum Run {
    /// The process exited with 0 and left this record.
    Recorded(Record),
    /// It did not get that far; the outcome says how it ended.
    Ended(Outcome),
}

impl Runner {
    /// The runner binary at `program`.
    pub fn new(program: impl Into<PathBuf>) -> Runner {
        Runner { program: program.into(), leading_args: Vec::new(), sandbox: None, environment: Vec::new() }
    }

    /// The same runner with `args` placed before `run <id> ...` (for a test binary that doubles
    /// as a runner).
    pub fn with_leading_args(mut self, args: impl IntoIterator<Item = impl Into<OsString>>) -> Runner {
        self.leading_args = args.into_iter().map(Into::into).collect();
        self
    }

    /// The same runner, confined by `sandbox` (whose first writable directory takes the result),
    /// with `environment` set.
    pub fn sandboxed(mut self, sandbox: Sandbox, environment: Vec<(OsString, OsString)>) -> Runner {
        self.sandbox = Some(sandbox);
        self.environment = environment;
        self
    }

    /// The runner's executable.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Where a sandboxed runner may write its results (and read files handed to it).
    pub fn scratch(&self) -> Option<&Path> {
        self.sandbox.as_ref().and_then(Sandbox::scratch)
    }

    /// Runs check `id` with `seed` in a new process, killing its group after `limit`. With
    /// `judged`, the runner judges the record in that file instead of reporting on itself. With
    /// `timing`, the runner starts under a shared hold on that GPU's lock and, for a check that
    /// times, may ask for the exclusive hold around what it times (the time it waits for it is
    /// not counted against `limit`); without, it runs without a GPU.
    pub fn run(&self, id: &str, seed: u64, limit: Duration, judged: Option<&Path>, timing: Option<&Timing>) -> Run {
        // A sandboxed runner can write only inside its own writable directories.
        let made = match self.scratch() {
            Some(scratch) => tempfile::tempdir_in(scratch),
            None => tempfile::tempdir(),
        };
        let dir = match made {
            Ok(dir) => dir,
            Err(e) => return Run::Ended(error(format!("cannot create a temporary directory for the result: {e}"))),
        };
        let result_path = dir.path().join("record.json");
        // A runner uses the GPU only under a hold on its lock: given none, it gets no GPU, neither
        // the device files (in the sandbox) nor a device CUDA would list.
        let mut command = match &self.sandbox {
            Some(sandbox) => sandbox.command(&self.program, timing.is_some()),
            None => Command::new(&self.program),
        };
        if timing.is_none() {
            command.env("CUDA_VISIBLE_DEVICES", "");
            if engine::device::cuda::probe().usable().is_ok() {
                beneath_timed_parts(&mut command);
            }
        }
        // The seed goes on stdin, never on the command line: learner code must not know it (it keys
        // the seal on the result, and every secret of the check).
        command
            .args(&self.leading_args)
            .args(["run", id, "--result"])
            .arg(&result_path)
            .envs(self.environment.iter().map(|(k, v)| (k, v)))
            .env(grader_harness::runner::SEED_ON_STDIN, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(judged) = judged {
            command.arg("--judge").arg(judged);
        }
        let pipes = match timing.filter(|t| t.times()).map(|_| LockPipes::new()).transpose() {
            Ok(pipes) => pipes,
            Err(e) => return Run::Ended(error(format!("cannot make the GPU lock's pipes: {e}"))),
        };
        if let Some(pipes) = &pipes {
            pipes.hand_to(&mut command);
        }
        // The runner uses the GPU only once no other grader times on it, and keeps any from
        // timing there until it ends or times itself.
        let share = match timing.map(Timing::share).transpose() {
            Ok(share) => share.flatten(),
            Err(e) => {
                eprintln!("warning: cannot take a shared hold on the GPU ({e:#}); running without it");
                None
            }
        };
        let spawned = command.spawn();
        // The runner's ends now live in the runner alone: its exit closes them, which the lock
        // server reads as the end.
        let server =
            timing.map(|timing| LockServer::start(timing.clone(), share, pipes.map(LockPipes::into_grader_ends)));
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                return Run::Ended(error(format!("cannot start the check runner {}: {e}", self.program.display())));
            }
        };
        if let Some(mut stdin) = child.stdin.take() {
            // The runner reads one line before anything else; a runner that never reads it fails
            // on its own.
            let _ = writeln!(stdin, "{seed}");
        }
        let readers = [tail_reader(child.stdout.take()), tail_reader(child.stderr.take())];
        let waited = || server.as_ref().map_or(Duration::ZERO, LockServer::waited);
        let ended = wait_then_kill_group(&mut child, limit, &waited);
        if let Some(server) = server {
            server.finish();
        }
        let deadline = Instant::now() + READER_GRACE;
        let [stdout, stderr] = readers
            .map(|reader| reader.recv_timeout(deadline.saturating_duration_since(Instant::now())).unwrap_or_default());
        let output = Output { stdout, stderr };
        match ended {
            Ended::Exited(status) if status.success() => match std::fs::read(&result_path) {
                Ok(bytes) => match serde_json::from_slice::<Record>(&bytes) {
                    Ok(record) => Run::Recorded(record),
                    Err(e) => Run::Ended(fail(format!(
                        "the check's process wrote an unreadable result ({e}){}",
                        output.quote()
                    ))),
                },
                Err(_) => Run::Ended(fail(format!("the check's process ended without a result{}", output.quote()))),
            },
            Ended::Exited(status) => Run::Ended(from_exit_status(status, &output)),
            Ended::TimedOut => Run::Ended(fail(format!(
                "did not finish within {}s: an endless loop, or far too slow?{}",
                limit.as_secs(),
                output.quote()
            ))),
            Ended::WaitFailed(e) => Run::Ended(error(format!("lost track of the check's process: {e}"))),
        }
    }
}

/// The two pipes of a runner that may ask for the GPU lock: it reads grants and writes requests
/// on its ends, whose numbers it finds in [`LOCK_FDS_ENV`]; the grader's ends are served by a
/// [`LockServer`].
struct LockPipes {
    /// The runner's ends: grants (read), requests (written).
    runner: (OwnedFd, OwnedFd),
    /// The grader's ends: grants (written), requests (read).
    grader: (OwnedFd, OwnedFd),
}

impl LockPipes {
    fn new() -> std::io::Result<LockPipes> {
        let (grants_read, grants_write) = pipe()?;
        let (requests_read, requests_write) = pipe()?;
        Ok(LockPipes { runner: (grants_read, requests_write), grader: (grants_write, requests_read) })
    }

    /// Lets the runner `command` starts inherit its ends (every descriptor here is made
    /// close-on-exec, so no other process does), and names them in its environment.
    fn hand_to(&self, command: &mut Command) {
        let (grants, requests) = (self.runner.0.as_raw_fd(), self.runner.1.as_raw_fd());
        command.env(LOCK_FDS_ENV, format!("{grants},{requests}"));
        // SAFETY: fcntl(2) on two descriptors this process owns, in the child between fork and
        // exec, allocating nothing.
        unsafe {
            command.pre_exec(move || {
                for fd in [grants, requests] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    /// Closes the runner's ends here (the runner has its own) and returns the grader's:
    /// (requests, grants).
    fn into_grader_ends(self) -> (File, File) {
        drop(self.runner);
        let (grants, requests) = self.grader;
        (File::from(requests), File::from(grants))
    }
}

/// Starts `command` at the lowest CPU priority (`nice` 19). On a machine with a GPU, a runner
/// without the GPU runs beside other graders' timed parts, which it must not slow: a timed part
/// whose launches wait for a core measures the wait (`bench/NOTES-lab.md` has the profile it
/// spoiled). At `nice` 19 such runners take a core only when no timed process wants it.
fn beneath_timed_parts(command: &mut Command) {
    // SAFETY: setpriority(2) on the child itself, between fork and exec, allocating nothing.
    unsafe {
        command.pre_exec(|| {
            if libc::setpriority(libc::PRIO_PROCESS, 0, 19) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// How the child process ended.
enum Ended {
    Exited(ExitStatus),
    TimedOut,
    WaitFailed(std::io::Error),
}

/// Waits for the child until `limit` (plus the time `waited` says it spent waiting for the GPU
/// lock), then kills its whole group, whether it ended or not: what it started must not outlive it.
fn wait_then_kill_group(child: &mut Child, limit: Duration, waited: &dyn Fn() -> Duration) -> Ended {
    let started = Instant::now();
    let ended = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ended::Exited(status),
            Ok(None) if started.elapsed() >= limit + waited() => break Ended::TimedOut,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Ended::WaitFailed(e),
        }
    };
    kill_group(child);
    let _ = child.wait();
    ended
}

/// Kills the child's whole process group (it leads one: see `process_group(0)` above).
fn kill_group(child: &Child) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else { return };
    // SAFETY: kill(2) takes plain integers; a negative pid names the process group we created.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

/// The ends of a check's stdout and stderr.
struct Output {
    stdout: String,
    stderr: String,
}

impl Output {
    /// The output as a quotation for a failure message, or nothing when there was none.
    fn quote(&self) -> String {
        let mut quoted = String::new();
        for (name, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let text = text.trim_end();
            if !text.is_empty() {
                let lines: Vec<&str> = text.lines().collect();
                let last = &lines[lines.len().saturating_sub(12)..];
                quoted.push_str(&format!("\nlast lines on {name}:\n  {}", last.join("\n  ")));
            }
        }
        quoted
    }
}

/// Reads a pipe to its end on a thread, keeping the last [`OUTPUT_TAIL_BYTES`] bytes, shown
/// printable. The caller waits for it with a deadline: a pipe some escaped process keeps open
/// cannot hold the grader.
fn tail_reader(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else { return sender.send(String::new()) };
        let mut kept = Vec::new();
        let mut buffer = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buffer) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buffer[..n]);
            if kept.len() > 2 * OUTPUT_TAIL_BYTES {
                kept.drain(..kept.len() - OUTPUT_TAIL_BYTES);
            }
        }
        let start = kept.len().saturating_sub(OUTPUT_TAIL_BYTES);
        sender.send(printable(&String::from_utf8_lossy(&kept[start..])))
    });
    receiver
}

fn from_exit_status(status: ExitStatus, output: &Output) -> Outcome {
    if let Some(signal) = status.signal() {
        return fail(format!("the check crashed its process: {}{}", signal_name(signal), output.quote()));
    }
    let wire = output.stderr.lines().rev().find_map(|l| l.strip_prefix(grader_harness::wires::MARKER));
    match (status.code(), wire) {
        (Some(grader_harness::wires::EXIT_CODE), Some(reason)) => fail(reason.to_string()),
        (Some(code), _) => {
            fail(format!("the check's process exited with code {code} before finishing{}", output.quote()))
        }
        (None, _) => error(format!("the check's process ended without a status{}", output.quote())),
    }
}

fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGABRT => "SIGABRT (abort: `std::process::abort`, a failed assertion in C code, or a double panic)",
        libc::SIGSEGV => "SIGSEGV (segmentation fault: invalid memory access, or a stack overflow)",
        libc::SIGBUS => "SIGBUS (bus error: misaligned or unmapped memory)",
        libc::SIGFPE => "SIGFPE (arithmetic fault)",
        libc::SIGILL => "SIGILL (illegal instruction: code built for another CPU?)",
        libc::SIGKILL => "SIGKILL (killed: out of memory?)",
        libc::SIGTERM => "SIGTERM (terminated)",
        libc::SIGSYS => "SIGSYS (a system call the sandbox forbids)",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

fn fail(message: String) -> Outcome {
    Outcome { status: Status::Fail, message, location: None }
}

fn error(message: String) -> Outcome {
    Outcome { status: Status::Error, message, location: None }
}
