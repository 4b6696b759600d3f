//! Proves the machine-wide GPU lock between real processes: a second grader waits while the first
//! holds the GPU, says for whom, and runs once it is released; a holder killed with SIGKILL
//! leaves the GPU free; an unusable lock directory is a clear error. And that a timed check holds
//! the lock only while it times: eight graders checking at once, each running a check that
//! "compiles" (sleeps) without the lock and then times (sleeps) with it, each finish within 1.5x
//! of a grader alone, their timed parts never overlapping; holding the lock for the whole check,
//! as the grader did before, the same eight take several times longer.
//!
//!
//! It is a readers-writer lock: runners use the GPU under shared holds, which stop nobody but a
//! grader that wants to time; a grader that wants to time waits for the runners already started
//! and stops new ones from starting meanwhile.
//!
//! This test binary is four programs. Run by `cargo test`, it is the test driver. Run with
//! `__hold DIR MILLIS` (or `__share DIR MILLIS`) as its arguments, it is a grader that takes the
//! exclusive (or a shared) hold, reports when it got it, holds it for MILLIS and reports when it
//! let go. Run with `__runner run ...`, it is a check runner of the fixture phase below, whose
//! checks ask for the lock through `grader_harness::timed`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use grader::gpu_lock::{GpuLock, GpuShare, Holder, Timing};
use grader::isolation::{Run, Runner};
use grader_harness::transcript::Recorded;
use grader_harness::{CheckResult, CheckSpec, Context, Exercise, Phase, record, timed};

/// The GPU name every process in these tests locks.
const GPU: &str = "GPU-test-0000";

fn now_micros() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970").as_micros()
}

/// The holder program: takes the exclusive hold (or, `shared`, a shared one), printing `waiting
/// <pid>` for each holder seen, `acquired <µs>`, then `released <µs>` just before letting go.
fn hold(dir: &str, millis: &str, shared: bool) -> ExitCode {
    let millis: u64 = millis.parse().expect("MILLIS");
    let mut out = std::io::stdout();
    let on_wait = |holder: Option<&Holder>| {
        let pid = holder.map_or_else(|| "unknown".to_string(), |h| h.pid.to_string());
        let _ = writeln!(out, "waiting {pid}");
        let _ = out.flush();
    };
    let (dir, never) = (Path::new(dir), std::sync::atomic::AtomicBool::new(false));
    let held: Box<dyn std::any::Any> = if shared {
        Box::new(GpuShare::take_unless(dir, GPU, on_wait, &never).expect("a shared hold").expect("never given up"))
    } else {
        Box::new(GpuLock::acquire(dir, GPU, &Holder::me("test hold"), on_wait).expect("the lock"))
    };
    println!("acquired {}", now_micros());
    std::thread::sleep(Duration::from_millis(millis));
    println!("released {}", now_micros());
    drop(held);
    ExitCode::SUCCESS
}

/// A holder process and its stdout, one line at a time.
struct Process {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

impl Process {
    /// A grader that takes the exclusive hold for `millis`.
    fn start(dir: &Path, millis: u64) -> Process {
        Process::start_as("__hold", dir, millis)
    }

    /// A grader that takes a shared hold for `millis`, as one does for a runner.
    fn share(dir: &Path, millis: u64) -> Process {
        Process::start_as("__share", dir, millis)
    }

    fn start_as(role: &str, dir: &Path, millis: u64) -> Process {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args([role, dir.to_str().expect("a UTF-8 path"), &millis.to_string()])
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

    /// The value of the first line saying `word`, after any `waiting` lines.
    fn expect_after_waiting(&mut self, word: &str) -> String {
        loop {
            let (seen, value) = self.next();
            if seen != "waiting" {
                assert_eq!(seen, word, "expected `{word} ...`, got `{seen} {value}`");
                return value;
            }
        }
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

/// Shared holds coexist; a grader that wants to time waits for them, and a shared hold asked for
/// while it waits comes only after it has timed (writers first, so that a stream of correctness
/// checks cannot keep a timed check waiting for ever).
fn writers_wait_for_sharers_and_come_first(dir: &Path) {
    let mut first = Process::share(dir, 900);
    first.expect("acquired");
    let mut second = Process::share(dir, 900);
    second.expect("acquired");
    let mut writer = Process::start(dir, 300);
    writer.expect("waiting");
    // The writer holds the gate by now: a shared hold asked for now waits for it.
    std::thread::sleep(Duration::from_millis(200));
    let mut late = Process::share(dir, 0);
    late.expect("waiting");
    let released = [&mut first, &mut second].map(|p| p.expect("released").parse::<u128>().expect("µs"));
    let acquired: u128 = writer.expect_after_waiting("acquired").parse().expect("µs");
    assert!(acquired >= released[0].max(released[1]), "the writer timed ({acquired}) beside runners {released:?}");
    let writer_released: u128 = writer.expect("released").parse().expect("µs");
    // Once the writer holds the GPU, the late runner names it.
    let late_acquired: u128 = late.expect_after_waiting("acquired").parse().expect("µs");
    assert!(late_acquired >= writer_released, "a runner started ({late_acquired}) while the writer timed");
    late.expect("released");
    for mut p in [first, second, writer, late] {
        assert!(p.child.wait().expect("exit").success());
    }
}

/// A runner holds the GPU shared for its whole life: a grader that wants to time while an
/// untimed check runs waits for it to end.
fn an_untimed_runner_keeps_others_from_timing_until_it_ends(dir: &Path) {
    let runner = std::thread::spawn({
        let dir = dir.to_path_buf();
        move || {
            let runner =
                Runner::new(std::env::current_exe().expect("this test binary")).with_leading_args(["__runner"]);
            let timing = Timing::of_gpu("fixture works_without_timing", &dir, GPU).untimed();
            runner.run("works_without_timing", 1, Duration::from_secs(60), None, Some(&timing))
        }
    });
    std::thread::sleep(Duration::from_millis(UNTIMED_MS / 4));
    let mut writer = Process::start(dir, 0);
    let acquired: u128 = writer.expect_after_waiting("acquired").parse().expect("µs");
    let Run::Recorded(record) = runner.join().expect("the runner thread") else { panic!("the check ended early") };
    let ended = stamped(&record, "ended");
    assert!(acquired >= ended, "a grader timed ({acquired}) while an untimed check still ran (until {ended})");
    writer.expect("released");
    writer.child.wait().expect("exit");
}

/// How long a fixture check works without the lock (compiling, checking correctness) and then
/// with it (timing), in milliseconds.
const UNTIMED_MS: u64 = 1000;
const TIMED_MS: u64 = 40;

/// Graders checking at once, as in `docker/lab-load-test.sh 8 PACK phase5`.
const GRADERS: usize = 8;

/// Microseconds since 1970, recorded by the fixture's checks (the same clock in every process).
fn stamp(label: &str) {
    record(label, now_micros());
}

/// The check as it is now: untimed work, then the timed part alone under the lock.
fn times_under_the_lock(_: &Context) -> CheckResult {
    std::thread::sleep(Duration::from_millis(UNTIMED_MS));
    timed(|| {
        stamp("locked");
        std::thread::sleep(Duration::from_millis(TIMED_MS));
        stamp("unlocked");
    });
    Ok("timed".into())
}

/// A check that uses the GPU without timing: it holds only the runner's shared hold.
fn works_without_timing(_: &Context) -> CheckResult {
    stamp("started");
    std::thread::sleep(Duration::from_millis(UNTIMED_MS));
    stamp("ended");
    Ok("worked".into())
}

/// The check as the grader ran it before: the lock held for all of it.
fn holds_the_lock_throughout(ctx: &Context) -> CheckResult {
    timed(|| times_under_the_lock(ctx))
}

/// The fixture phase whose runner is this binary.
const FIXTURE: Phase = Phase {
    name: "fixture",
    title: "A timed check",
    exercises_dir: "exercises/fixture",
    solutions_dir: "solutions/fixture",
    runner_package: "none",
    book_page: "book/src/grader.md",
    exercises: &[Exercise {
        name: "timing",
        file: "tests/gpu_lock.rs",
        section: "timing",
        stretch: false,
        hints: &["one", "two"],
        checks: &[
            CheckSpec::new("times_under_the_lock").runs(times_under_the_lock).timed(),
            CheckSpec::new("holds_the_lock_throughout").runs(holds_the_lock_throughout).timed(),
            CheckSpec::new("works_without_timing").runs(works_without_timing),
        ],
        forbidden: &[],
    }],
    mutants: &[],
};

/// One grader's run of check `id` with the fake GPU's lock in `dir`: its wall time, and when its
/// timed part held the lock (µs since 1970).
fn grade_once(dir: &Path, id: &str) -> (Duration, (u128, u128)) {
    let runner = Runner::new(std::env::current_exe().expect("this test binary")).with_leading_args(["__runner"]);
    let timing = Timing::of_gpu(format!("fixture {id}"), dir, "GPU-fake-contended");
    let started = Instant::now();
    let run = runner.run(id, 1, Duration::from_secs(60), None, Some(&timing));
    let elapsed = started.elapsed();
    let Run::Recorded(record) = run else { panic!("the fixture check ended early: {run:?}") };
    (elapsed, (stamped(&record, "locked"), stamped(&record, "unlocked")))
}

/// The time a fixture check stamped as `label` (µs since 1970).
fn stamped(record: &grader_harness::runner::Record, label: &str) -> u128 {
    let entry = record.transcript.iter().find(|e| e.label == label).expect("stamped");
    let Recorded::Text(text) = &entry.value else { panic!("a stamp is text") };
    text.parse().expect("µs")
}

/// `GRADERS` graders running check `id` at once: each one's wall time and locked interval.
fn grade_together(dir: &Path, id: &'static str) -> Vec<(Duration, (u128, u128))> {
    let graders: Vec<_> = (0..GRADERS)
        .map(|_| {
            std::thread::spawn({
                let dir = dir.to_path_buf();
                move || grade_once(&dir, id)
            })
        })
        .collect();
    graders.into_iter().map(|g| g.join().expect("a grader")).collect()
}

fn eight_graders_wait_only_for_each_others_timing(dir: &Path) {
    let (solo, _) = grade_once(dir, "times_under_the_lock");
    let together = grade_together(dir, "times_under_the_lock");
    let mut held: Vec<(u128, u128)> = together.iter().map(|(_, interval)| *interval).collect();
    held.sort();
    for pair in held.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two graders timed at once: {held:?}");
    }
    let worst = together.iter().map(|(t, _)| t.as_secs_f64()).fold(0.0, f64::max) / solo.as_secs_f64();
    println!(
        "{GRADERS} graders at once, the lock held while timing: the slowest took {worst:.2}x a solo run ({solo:.2?})"
    );
    assert!(worst <= 1.5, "the slowest of {GRADERS} graders took {worst:.2}x a solo run");
    // The same graders, holding the lock for the whole check as before: the test tells them apart.
    let before = grade_together(dir, "holds_the_lock_throughout");
    let worst_before = before.iter().map(|(t, _)| t.as_secs_f64()).fold(0.0, f64::max) / solo.as_secs_f64();
    println!("the lock held for the whole check: the slowest took {worst_before:.2}x");
    assert!(worst_before >= 3.0, "holding the lock throughout only slowed the last grader {worst_before:.2}x");
}

/// With `GRADER_LOCK_LOG` set, the grader says how long each timed part held the lock: the timed
/// part alone, not the check's untimed work; without it, it says nothing.
fn each_timed_part_says_how_long_it_held_the_lock(dir: &Path) {
    let run = |log: bool| {
        let mut child = std::process::Command::new(std::env::current_exe().expect("this test binary"));
        child.arg("__grade_once").arg(dir).env_remove(grader::gpu_lock::LOG_HOLDS);
        if log {
            child.env(grader::gpu_lock::LOG_HOLDS, "1");
        }
        let output = child.output().expect("the test binary runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let said = run(true);
    let held: Vec<f64> = said
        .lines()
        .filter_map(|l| l.strip_prefix("held GPU for ")?.strip_suffix("; timing fixture times_under_the_lock"))
        .map(|secs| secs.strip_suffix('s').expect("seconds").parse().expect("a number"))
        .collect();
    assert_eq!(held.len(), 1, "one timed part, one line: {said}");
    let timed = TIMED_MS as f64 / 1e3;
    assert!(held[0] >= timed - 0.05 && held[0] < timed + (UNTIMED_MS as f64 / 1e3) / 2.0, "held {held:?}s: {said}");
    assert!(!run(false).contains("held GPU"), "said without GRADER_LOCK_LOG");
}

/// A test's name and body, which gets a fresh lock directory.
type Test = (&'static str, fn(&Path));

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, dir, millis] = args.as_slice()
        && (role == "__hold" || role == "__share")
    {
        return hold(dir, millis, role == "__share");
    }
    if let [_, role, dir] = args.as_slice()
        && role == "__grade_once"
    {
        grade_once(Path::new(dir), "times_under_the_lock");
        return ExitCode::SUCCESS;
    }
    if args.get(1).is_some_and(|a| a == "__runner") {
        let checks: Vec<grader_harness::Check> = FIXTURE
            .checks()
            .filter_map(|(_, spec)| spec.run.map(|run| grader_harness::Check { id: spec.id, run }))
            .collect();
        return grader_harness::runner::main_with_args(&FIXTURE, &checks, &args[2..]);
    }
    let tests: &[Test] = &[
        ("the_second_waits_for_the_first_then_runs", the_second_waits_for_the_first_then_runs),
        ("a_killed_holder_leaves_the_gpu_free", a_killed_holder_leaves_the_gpu_free),
        ("an_unusable_directory_is_a_clear_error", an_unusable_directory_is_a_clear_error),
        ("writers_wait_for_sharers_and_come_first", writers_wait_for_sharers_and_come_first),
        (
            "an_untimed_runner_keeps_others_from_timing_until_it_ends",
            an_untimed_runner_keeps_others_from_timing_until_it_ends,
        ),
        ("eight_graders_wait_only_for_each_others_timing", eight_graders_wait_only_for_each_others_timing),
        ("each_timed_part_says_how_long_it_held_the_lock", each_timed_part_says_how_long_it_held_the_lock),
    ];
    for (name, test) in tests {
        let dir = tempfile::tempdir().expect("a temporary directory");
        test(dir.path());
        println!("test {name} ... ok");
    }
    println!("\ntest result: ok. {} passed", tests.len());
    ExitCode::SUCCESS
}
