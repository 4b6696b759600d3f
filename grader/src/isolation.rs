//! Running one check in a process of its own, with a time limit.
//!
//! The runner writes its [`Outcome`] to a result file. When there is none, the process ended
//! before the check did, and its exit status says how: killed at the time limit (an endless
//! loop?), killed by a signal (abort, segfault), or an exit code. A process group is killed as a
//! whole, so a check that started compilers or other children cannot leave them behind.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use grader_harness::{Outcome, Status};

/// How much of a check's output is kept to quote in a failure.
const OUTPUT_TAIL_BYTES: usize = 4096;

/// A check runner to start: a program and the arguments that come before the runner's own.
#[derive(Clone, Debug)]
pub struct Runner {
    program: PathBuf,
    leading_args: Vec<OsString>,
}

impl Runner {
    /// The runner binary at `program`.
    pub fn new(program: impl Into<PathBuf>) -> Runner {
        Runner { program: program.into(), leading_args: Vec::new() }
    }

    /// The same runner with `args` placed before `run <id> ...` (for a test binary that doubles
    /// as a runner).
    pub fn with_leading_args(mut self, args: impl IntoIterator<Item = impl Into<OsString>>) -> Runner {
        self.leading_args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Runs check `id` with `seed` in a new process, killing it after `limit`.
    pub fn run(&self, id: &str, seed: u64, limit: Duration) -> Outcome {
        let dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(e) => return error(format!("cannot create a temporary directory for the result: {e}")),
        };
        let result_path = dir.path().join("outcome.json");
        let mut command = Command::new(&self.program);
        command
            .args(&self.leading_args)
            .args(["run", id, "--seed", &seed.to_string(), "--result"])
            .arg(&result_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => return error(format!("cannot start the check runner {}: {e}", self.program.display())),
        };
        let (stdout, stderr) = (tail_reader(child.stdout.take()), tail_reader(child.stderr.take()));
        let ended = wait_or_kill(&mut child, limit);
        let output = Output { stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default() };
        if let Ok(json) = std::fs::read_to_string(&result_path) {
            return serde_json::from_str(&json)
                .unwrap_or_else(|e| error(format!("the runner wrote an unreadable result ({e}): {json}")));
        }
        match ended {
            Ended::TimedOut => fail(format!(
                "did not finish within {}s: an endless loop, or far too slow?{}",
                limit.as_secs(),
                output.quote()
            )),
            Ended::Exited(status) => from_exit_status(status, &output),
            Ended::WaitFailed(e) => error(format!("lost track of the check's process: {e}")),
        }
    }
}

/// How the child process ended.
enum Ended {
    Exited(ExitStatus),
    TimedOut,
    WaitFailed(std::io::Error),
}

fn wait_or_kill(child: &mut Child, limit: Duration) -> Ended {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ended::Exited(status),
            Ok(None) if Instant::now() >= deadline => {
                kill_group(child);
                let _ = child.wait();
                return Ended::TimedOut;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Ended::WaitFailed(e),
        }
    }
}

/// Kills the child's whole process group (it leads one: see `process_group(0)` above).
fn kill_group(child: &mut Child) {
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

/// Reads a pipe to its end on a thread, keeping the last [`OUTPUT_TAIL_BYTES`] bytes.
fn tail_reader(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else { return String::new() };
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
        String::from_utf8_lossy(&kept[start..]).into_owned()
    })
}

fn from_exit_status(status: ExitStatus, output: &Output) -> Outcome {
    if let Some(signal) = status.signal() {
        return fail(format!("the check crashed its process: {}{}", signal_name(signal), output.quote()));
    }
    match status.code() {
        // Exit code 2 is the runner refusing its arguments or its phase data: the grader's problem.
        Some(2) => error(format!("the check runner refused to run the check{}", output.quote())),
        Some(code) => fail(format!("the check's process exited with code {code} before finishing{}", output.quote())),
        None => error(format!("the check's process ended without a status{}", output.quote())),
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
