//! Proves the machine-wide GPU lock between real processes: a second grader waits while the first
//! holds the GPU, says for whom, and runs once it is released; a holder killed with SIGKILL
//! leaves the GPU free; an unusable lock directory is a clear error.
//!
//! This test binary is two programs. Run by `cargo test`, it is the test driver. Run with
//! `__hold DIR MILLIS` as its arguments, it is a grader that takes the lock, reports when it got
//! it, holds it for MILLIS and reports when it let go.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use grader::gpu_lock::{GpuLock, Holder};

/// The GPU name every process in these tests locks.
const GPU: &str = "GPU-test-0000";

fn now_micros() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970").as_micros()
}

/// The holder program: prints `waiting <pid>` for each holder seen, `acquired <µs>`, then
/// `released <µs>` just before dropping the lock.
fn hold(dir: &str, millis: &str) -> ExitCode {
    let millis: u64 = millis.parse().expect("MILLIS");
    let mut out = std::io::stdout();
    let lock = GpuLock::acquire(Path::new(dir), GPU, &Holder::me("test hold"), |holder| {
        let pid = holder.map_or_else(|| "unknown".to_string(), |h| h.pid.to_string());
        let _ = writeln!(out, "waiting {pid}");
        let _ = out.flush();
    })
    .expect("the lock");
    println!("acquired {}", now_micros());
    std::thread::sleep(Duration::from_millis(millis));
    println!("released {}", now_micros());
    drop(lock);
    ExitCode::SUCCESS
}

/// A holder process and its stdout, one line at a time.
struct Process {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

impl Process {
    fn start(dir: &Path, millis: u64) -> Process {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args(["__hold", dir.to_str().expect("a UTF-8 path"), &millis.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a holder");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Process { child, lines }
    }

    /// The next line, split into its word and its value.
    fn next(&mut self) -> (String, String) {
        let line = self.lines.next().expect("another line").expect("readable");
        let (word, value) = line.split_once(' ').expect("`word value`");
        (word.to_string(), value.to_string())
    }

    fn expect(&mut self, word: &str) -> String {
        let (seen, value) = self.next();
        assert_eq!(seen, word, "expected `{word} ...`, got `{seen} {value}`");
        value
    }
}

fn the_second_waits_for_the_first_then_runs(dir: &Path) {
    let mut first = Process::start(dir, 1500);
    first.expect("acquired");
    let mut second = Process::start(dir, 0);
    let waited_for = second.expect("waiting");
    assert_eq!(waited_for, first.child.id().to_string(), "the waiting grader names the holder's pid");
    let released: u128 = first.expect("released").parse().expect("µs");
    let acquired: u128 = second.expect("acquired").parse().expect("µs");
    assert!(acquired >= released, "the second took the GPU ({acquired}) before the first let go ({released})");
    second.expect("released");
    assert!(first.child.wait().expect("exit").success() && second.child.wait().expect("exit").success());
}

fn a_killed_holder_leaves_the_gpu_free(dir: &Path) {
    let mut holder = Process::start(dir, 60_000);
    holder.expect("acquired");
    holder.child.kill().expect("SIGKILL");
    holder.child.wait().expect("reaped");
    let started = Instant::now();
    let mut next = Process::start(dir, 0);
    next.expect("acquired");
    assert!(started.elapsed() < Duration::from_secs(5), "the GPU stayed locked after its holder was killed");
    next.expect("released");
    next.child.wait().expect("exit");
}

fn an_unusable_directory_is_a_clear_error(dir: &Path) {
    let file = dir.join("a-file");
    std::fs::write(&file, "").expect("a file");
    let error = GpuLock::acquire(&file.join("locks"), GPU, &Holder::me("test"), |_| {}).expect_err("no directory");
    let message = format!("{error:#}");
    assert!(message.contains("GRADER_LOCK_DIR") && message.contains("a-file/locks"), "{message}");
}

/// A test's name and body, which gets a fresh lock directory.
type Test = (&'static str, fn(&Path));

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, dir, millis] = args.as_slice()
        && role == "__hold"
    {
        return hold(dir, millis);
    }
    let tests: &[Test] = &[
        ("the_second_waits_for_the_first_then_runs", the_second_waits_for_the_first_then_runs),
        ("a_killed_holder_leaves_the_gpu_free", a_killed_holder_leaves_the_gpu_free),
        ("an_unusable_directory_is_a_clear_error", an_unusable_directory_is_a_clear_error),
    ];
    for (name, test) in tests {
        let dir = tempfile::tempdir().expect("a temporary directory");
        test(dir.path());
        println!("test {name} ... ok");
    }
    println!("\ntest result: ok. {} passed", tests.len());
    ExitCode::SUCCESS
}
