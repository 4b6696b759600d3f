//! Proves that every check is confined to its own process: a panic, a `todo!()`, an abort, a
//! segfault, an early exit or an endless loop in one check is reported for that check alone,
//! and the checks after it still pass.
//!
//! This test binary is two programs. Run by `cargo test`, it is the test driver. Run with
//! `__runner` as its first argument, it is a check runner whose checks misbehave on purpose, and
//! the driver grades it through the grader's own process isolation.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use grader::isolation::Runner;
use grader::report::PhaseReport;
use grader::runners::BuildFailure;
use grader_harness::{Check, CheckResult, CheckSpec, Context, Exercise, Failure, Phase, Status, Subject};

const LOOP_LIMIT_SECS: u64 = 2;

const FIXTURE: Phase = Phase {
    name: "fixture",
    title: "Checks that misbehave",
    exercises_dir: "exercises/fixture",
    solutions_dir: "solutions/fixture",
    runner_package: "none",
    book_page: "book/src/grader.md",
    exercises: &[
        Exercise {
            name: "misbehaving",
            file: "tests/isolation.rs",
            section: "isolation",
            stretch: false,
            hints: &["one", "two"],
            checks: &[
                CheckSpec::new("passes"),
                CheckSpec::new("fails"),
                CheckSpec::new("not_started"),
                CheckSpec::new("panics"),
                CheckSpec::new("aborts"),
                CheckSpec::new("segfaults"),
                CheckSpec::new("exits_early"),
                CheckSpec::new("loops_forever").with_timeout(LOOP_LIMIT_SECS),
                CheckSpec::new("skips"),
                CheckSpec::new("todo_inside_a_property_test"),
                CheckSpec::new("passes_again"),
            ],
        },
        Exercise {
            name: "optional",
            file: "tests/isolation.rs",
            section: "isolation",
            stretch: true,
            hints: &["one", "two"],
            checks: &[CheckSpec::new("stretch_fails")],
        },
    ],
};

const TODO_LINE: u32 = line!() + 2;
fn stub() -> CheckResult {
    todo!()
}

const CHECKS: &[Check] = &[
    Check { id: "passes", run: |_| Ok("fine".into()) },
    Check { id: "fails", run: |_| Err(Failure::fail("expected 2, got 3")) },
    Check { id: "not_started", run: |_| stub() },
    Check { id: "panics", run: |_| panic!("index out of bounds, on purpose") },
    Check { id: "aborts", run: |_| std::process::abort() },
    Check {
        id: "segfaults",
        run: |_| {
            // SAFETY: signal(2) and raise(2) take plain integers. The default action (std
            // installs its own handler, for stack overflows) kills the process as a bad pointer
            // dereference would.
            unsafe {
                libc::signal(libc::SIGSEGV, libc::SIG_DFL);
                libc::raise(libc::SIGSEGV);
            }
            Ok("unreachable".into())
        },
    },
    Check {
        id: "exits_early",
        run: |_| {
            println!("some output before leaving");
            std::process::exit(5)
        },
    },
    Check {
        id: "loops_forever",
        run: |_| {
            #[allow(clippy::empty_loop)]
            loop {}
        },
    },
    Check { id: "skips", run: |_| Err(Failure::skip("no GPU on this machine")) },
    Check {
        id: "todo_inside_a_property_test",
        run: |ctx: &Context| {
            grader_harness::for_all(ctx, 10, 0u32..10, |_| stub().map(|_| ()))?;
            Ok("unreachable".into())
        },
    },
    Check { id: "passes_again", run: |_| Ok("still fine".into()) },
    Check { id: "stretch_fails", run: |_| Err(Failure::fail("optional")) },
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("__runner") {
        return grader_harness::runner::main_with_args(&FIXTURE, CHECKS, &args[1..]);
    }
    let tests: &[(&str, fn())] = &[
        ("each misbehaving check is confined to itself", misbehaving_checks_are_confined),
        ("a phase that does not build reports error on every check", unbuilt_phase_is_all_errors),
        ("a failed phase does not stop the next one", phases_are_independent),
    ];
    for (name, test) in tests {
        print!("test {name} ... ");
        test();
        println!("ok");
    }
    ExitCode::SUCCESS
}

fn fixture_runner() -> Runner {
    Runner::new(std::env::current_exe().expect("own path")).with_leading_args(["__runner"])
}

fn misbehaving_checks_are_confined() {
    let start = Instant::now();
    let report = PhaseReport::run(Ok(fixture_runner()), &FIXTURE, Subject::Exercises, 7);
    let elapsed = start.elapsed();
    let result = |id: &str| report.checks.iter().find(|c| c.id == id).expect("every check reported");
    let expect = |id: &str, status: Status, needle: &str| {
        let check = result(id);
        assert_eq!(check.status, status, "{id}: {check:?}");
        assert!(check.message.contains(needle), "{id}: `{needle}` not in {:?}", check.message);
    };
    expect("passes", Status::Pass, "fine");
    expect("fails", Status::Fail, "expected 2, got 3");
    expect("not_started", Status::NotStarted, &format!("tests/isolation.rs:{TODO_LINE}"));
    assert_eq!(result("not_started").location, Some(format!("grader/tests/isolation.rs:{TODO_LINE}")));
    expect("panics", Status::Fail, "index out of bounds, on purpose");
    assert!(result("panics").message.contains("grader/tests/isolation.rs:"), "{:?}", result("panics"));
    expect("aborts", Status::Fail, "SIGABRT");
    expect("segfaults", Status::Fail, "SIGSEGV");
    expect("exits_early", Status::Fail, "exited with code 5");
    expect("exits_early", Status::Fail, "some output before leaving");
    expect("loops_forever", Status::Fail, &format!("did not finish within {LOOP_LIMIT_SECS}s"));
    expect("skips", Status::Skipped, "no GPU on this machine");
    expect("todo_inside_a_property_test", Status::NotStarted, "todo!()");
    expect("passes_again", Status::Pass, "still fine");
    expect("stretch_fails", Status::Fail, "optional");
    assert!(result("stretch_fails").stretch && !result("stretch_fails").blocks());
    assert!(elapsed < Duration::from_secs(LOOP_LIMIT_SECS + 20), "took {elapsed:?}");
    assert!(!report.passed());
    let table = report.render(&FIXTURE);
    assert!(table.contains("– skipped") && table.contains("no GPU on this machine"), "{table}");
}

fn unbuilt_phase_is_all_errors() {
    let failure = BuildFailure { message: "does not compile: E0308".into(), location: Some("src/a.rs:3".into()) };
    let report = PhaseReport::run(Err(failure), &FIXTURE, Subject::Exercises, 7);
    assert!(report.checks.iter().all(|c| c.status == Status::Error && c.location.as_deref() == Some("src/a.rs:3")));
    let rendered = report.render(&FIXTURE);
    assert_eq!(rendered.matches("does not compile: E0308").count(), 1, "the error is shown once:\n{rendered}");
}

fn phases_are_independent() {
    let broken = BuildFailure { message: "does not compile".into(), location: None };
    let reports: Vec<PhaseReport> = [Err(broken), Ok(fixture_runner())]
        .into_iter()
        .map(|runner| PhaseReport::run(runner, &FIXTURE, Subject::Exercises, 7))
        .collect();
    assert!(reports[0].checks.iter().all(|c| c.status == Status::Error));
    assert_eq!(reports[1].checks[0].status, Status::Pass);
}
