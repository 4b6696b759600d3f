//! Proves that every check is confined to its own process and that no verdict can be forged from
//! inside it: a panic, a `todo!()`, an abort, a segfault, an early exit, an endless loop or a
//! lingering child in one check is reported for that check alone, and every route a learner's
//! code could take to write its own "pass" ends in a failure.
//!
//! This test binary is three programs. Run by `cargo test`, it is the test driver. Run with
//! `__runner subject`, it is a check runner whose checks misbehave or try to forge their result,
//! as a learner's code could; run with `__runner reference`, it is the judge, whose checks record
//! the right answers. The driver grades the subject through the grader's own sandbox and judge.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use grader::isolation::Runner;
use grader::report::PhaseReport;
use grader::runners::BuildFailure;
use grader::sandbox::{Places, Sandbox, Support};
use grader::verdict::Grading;
use grader_harness::{
    Check, CheckResult, CheckSpec, Context, Exercise, Failure, Phase, Record, Status, Subject, record,
};

const LOOP_LIMIT_SECS: u64 = 2;

const fn check(id: &'static str) -> CheckSpec {
    CheckSpec::new(id)
}

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
                check("passes"),
                check("fails"),
                check("not_started"),
                check("panics"),
                check("aborts"),
                check("segfaults"),
                check("exits_early"),
                check("exits_with_2"),
                check("loops_forever").with_timeout(LOOP_LIMIT_SECS),
                check("skips"),
                check("todo_inside_a_property_test"),
                check("panics_inside_a_property_test"),
                check("prints_escape_sequences"),
                check("leaves_a_child_holding_its_output").with_timeout(LOOP_LIMIT_SECS),
                check("escapes_its_process_group"),
                check("passes_again"),
                check("needs_a_gpu").on_gpu(),
                check("reads_its_own_memory_holding_the_gpu").on_gpu(),
            ],
            forbidden: &[],
        },
        Exercise {
            name: "forging",
            file: "tests/isolation.rs",
            section: "isolation",
            stretch: false,
            hints: &["one", "two"],
            checks: &[
                check("writes_a_pass_and_exits"),
                check("writes_the_right_answers_and_exits"),
                check("exit_handler_writes_a_pass"),
                check("constructor_writes_a_pass"),
                check("writes_a_pass_then_loops").with_timeout(LOOP_LIMIT_SECS),
                check("claims_a_pass_with_a_wrong_answer"),
                check("memorised_the_default_seed"),
                check("claims_a_skip"),
                check("reads_a_file_outside_its_sandbox"),
                check("the_judge_times_a_slow_kernel"),
                check("the_judge_finds_a_drawn_answer_wrong"),
                check("runs_a_program_outside_the_toolchain"),
            ],
            forbidden: &[],
        },
        Exercise {
            name: "sandboxed",
            file: "tests/isolation.rs",
            section: "isolation",
            stretch: false,
            hints: &["one", "two"],
            checks: &[
                check("calls_setsid_through_the_32_bit_entry"),
                check("starts_a_child_that_leaves_through_the_32_bit_entry"),
                check("makes_an_x32_system_call"),
                check("sends_a_udp_datagram"),
                check("sends_a_unix_datagram"),
                check("writes_to_dev_shm"),
                check("opens_a_device_outside_the_list"),
                check("opens_the_gpu_without_a_hold").without_gpu(),
            ],
            forbidden: &[],
        },
        Exercise {
            name: "optional",
            file: "tests/isolation.rs",
            section: "isolation",
            stretch: true,
            hints: &["one", "two"],
            checks: &[check("stretch_fails")],
            forbidden: &[],
        },
    ],
    mutants: &[],
};

/// Which program this process is.
static ROLE: OnceLock<&'static str> = OnceLock::new();

fn subject() -> bool {
    ROLE.get() == Some(&"subject")
}

/// The right answer to every fixture check, as the reference records it.
fn answer(ctx: &Context) -> CheckResult {
    record("answer", ctx.seed * 3);
    Ok("fine".into())
}

/// In the subject, `misbehave`; in the reference, the right answer.
fn or_answer(ctx: &Context, misbehave: impl FnOnce(&Context) -> CheckResult) -> CheckResult {
    if subject() { misbehave(ctx) } else { answer(ctx) }
}

const TODO_LINE: u32 = line!() + 2;
fn stub() -> CheckResult {
    todo!()
}

const PANIC_LINE: u32 = line!() + 2;
fn buggy(n: u32) -> Result<(), Failure> {
    if n > 3 { panic!("{n} is out of range, on purpose") } else { Ok(()) }
}

/// The `--result` path this runner was given, as a forger would find it.
fn result_path() -> PathBuf {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--result").expect("--result");
    PathBuf::from(&args[at + 1])
}

/// Writes a record that claims a pass, with `answers`, where the grader will look.
fn forge_a_pass_with(answers: Vec<grader_harness::transcript::Entry>) {
    let pass = grader_harness::Outcome { status: Status::Pass, message: "forged".into(), location: None };
    let record = Record { outcome: Some(pass), transcript: answers, seal: None };
    std::fs::write(result_path(), serde_json::to_string(&record).unwrap()).unwrap();
}

/// Writes a record that claims a pass, with no answers.
fn forge_a_pass() {
    forge_a_pass_with(vec![]);
}

extern "C" fn forge_at_exit() {
    forge_a_pass();
}

/// A static constructor, as a learner's crate can define one: it runs before `main`, and forges a
/// pass for one check.
#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = constructor;

extern "C" fn constructor() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "subject") && args.iter().any(|a| a == "constructor_writes_a_pass") {
        forge_a_pass();
        std::process::exit(0);
    }
}

/// Marks a `sleep` a check starts, so the driver can find any left behind.
const LINGER_MARK: &str = "31.4159";
const ESCAPE_MARK: &str = "31.4160";
const ESCAPE_32_MARK: &str = "31.4161";

/// `setsid` through the 32-bit system call entry (`int 0x80`, i386 call number 66), which a
/// filter that checks only x86-64 call numbers lets through. Returns what the kernel returned.
fn setsid_through_the_32_bit_entry() -> i64 {
    let returned: i64;
    // SAFETY: `int 0x80` with eax = 66 (i386 `setsid`, which takes no arguments); the kernel
    // returns in eax and clobbers r8-r11 on the way back to 64-bit code.
    unsafe {
        std::arch::asm!(
            "int 0x80",
            inlateout("rax") 66i64 => returned,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
        );
    }
    returned
}

/// What sending `payload` to the driver's socket (given in `variable`) gave.
fn sent(result: std::io::Result<usize>) -> String {
    match result {
        Ok(_) => "sent".into(),
        Err(e) => format!("refused: {}", e.kind()),
    }
}

const CHECKS: &[Check] = &[
    Check { id: "passes", run: answer },
    Check { id: "fails", run: |ctx| or_answer(ctx, |_| Err(Failure::fail("expected 2, got 3"))) },
    Check { id: "not_started", run: |ctx| or_answer(ctx, |_| stub()) },
    Check { id: "panics", run: |ctx| or_answer(ctx, |_| panic!("index out of bounds, on purpose")) },
    Check { id: "aborts", run: |ctx| or_answer(ctx, |_| std::process::abort()) },
    Check {
        id: "segfaults",
        run: |ctx| {
            or_answer(ctx, |_| {
                // SAFETY: signal(2) and raise(2) take plain integers. The default action (std
                // installs its own handler, for stack overflows) kills the process as a bad
                // pointer dereference would.
                unsafe {
                    libc::signal(libc::SIGSEGV, libc::SIG_DFL);
                    libc::raise(libc::SIGSEGV);
                }
                Ok("unreachable".into())
            })
        },
    },
    Check {
        id: "exits_early",
        run: |ctx| {
            or_answer(ctx, |_| {
                println!("some output before leaving");
                std::process::exit(5)
            })
        },
    },
    Check { id: "exits_with_2", run: |ctx| or_answer(ctx, |_| std::process::exit(2)) },
    Check {
        id: "loops_forever",
        run: |ctx| {
            or_answer(ctx, |_| {
                #[allow(clippy::empty_loop)]
                loop {}
            })
        },
    },
    Check { id: "skips", run: |_| Err(Failure::skip("no GPU on this machine")) },
    Check {
        id: "todo_inside_a_property_test",
        run: |ctx| {
            or_answer(ctx, |ctx| {
                grader_harness::for_all(ctx, 10, 0u32..10, |_| stub().map(|_| ()))?;
                Ok("unreachable".into())
            })
        },
    },
    Check {
        id: "panics_inside_a_property_test",
        run: |ctx| {
            or_answer(ctx, |ctx| {
                grader_harness::for_all(ctx, 50, 0u32..10, buggy)?;
                Ok("unreachable".into())
            })
        },
    },
    Check {
        id: "prints_escape_sequences",
        run: |ctx| {
            or_answer(ctx, |_| {
                print!("\x1b[2J\x1b[31mcleared your screen");
                Err(Failure::fail("red \x1b[31mtext\x1b[0m"))
            })
        },
    },
    Check {
        id: "leaves_a_child_holding_its_output",
        run: |ctx| {
            if subject() {
                // The child inherits stdout and stderr, and outlives the check unless killed: it is
                // left unwaited on purpose. (This test binary, which the sandbox lets the check run.)
                #[allow(clippy::zombie_processes)]
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["__linger", LINGER_MARK])
                    .spawn()
                    .expect("a child starts");
            }
            answer(ctx)
        },
    },
    Check {
        id: "escapes_its_process_group",
        run: |ctx| {
            if subject() {
                // A child that tries to start a session of its own, and one started in a new group.
                #[allow(clippy::zombie_processes)]
                let _ = std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["__escape", ESCAPE_MARK])
                    .spawn();
                #[allow(clippy::zombie_processes)]
                let _ = std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["__linger", ESCAPE_MARK])
                    .process_group(0)
                    .spawn();
                std::thread::sleep(Duration::from_millis(200));
            }
            answer(ctx)
        },
    },
    Check { id: "passes_again", run: answer },
    Check {
        id: "needs_a_gpu",
        run: |ctx| {
            // Under its hold on the GPU's lock the sandboxed subject may open the driver's files
            // and start CUDA, which also reads and writes the process's own `/proc/<pid>`.
            let opened = std::fs::File::open("/dev/nvidiactl");
            record("the GPU", opened.map_or_else(|e| format!("refused: {}", e.kind()), |_| "opened".into()));
            record("CUDA", engine::device::cuda::unavailable_reason().unwrap_or("usable").to_string());
            // After the runner has closed its own `/proc/<pid>` (grader_harness::confine), CUDA
            // still works: an eager kernel, a cuBLAS product and a kernel compiled by NVRTC.
            if engine::device::cuda::unavailable_reason().is_none() {
                let gpu = engine::Device::Cuda(0);
                let work = || -> engine::Result<Vec<f32>> {
                    let a = engine::Tensor::from_vec((0..12).map(|i| i as f32).collect(), &[3, 4])?.to(gpu)?;
                    let b = engine::Tensor::from_vec((0..8).map(|i| i as f32).collect(), &[4, 2])?.to(gpu)?;
                    let compiled =
                        engine::dynamo::compile(|xs: Vec<engine::Tensor>| Ok(vec![xs[0].add(&xs[0])?.relu()?]))
                            .backend(engine::backends::Inductor::default());
                    let doubled = compiled.call(std::slice::from_ref(&a))?.remove(0);
                    let mut values = a.add(&a)?.to_vec()?;
                    values.extend(a.matmul(&b)?.to_vec()?);
                    values.extend(doubled.to_vec()?);
                    Ok(values)
                };
                record("work on the GPU", format!("{:?}", work()));
            }
            answer(ctx)
        },
    },
    Check {
        id: "reads_its_own_memory_holding_the_gpu",
        run: |ctx| {
            // A runner holding the GPU had its own `/proc/<pid>` open while CUDA started; it is
            // closed before the check runs (the reference, not sandboxed here, opens it).
            let opened = std::fs::File::open("/proc/self/mem");
            record("its memory", opened.map_or_else(|e| format!("refused: {}", e.kind()), |_| "opened".into()));
            answer(ctx)
        },
    },
    Check {
        id: "writes_a_pass_and_exits",
        run: |ctx| {
            or_answer(ctx, |_| {
                forge_a_pass();
                std::process::exit(0)
            })
        },
    },
    Check {
        id: "writes_the_right_answers_and_exits",
        run: |ctx| {
            or_answer(ctx, |ctx| {
                // A forger that knows the answers (as learner code knows a check that records the
                // same answers for every seed) writes them itself.
                let right = grader_harness::transcript::Recorded::Text((ctx.seed * 3).to_string());
                forge_a_pass_with(vec![grader_harness::transcript::Entry { label: "answer".into(), value: right }]);
                std::process::exit(0)
            })
        },
    },
    Check {
        id: "exit_handler_writes_a_pass",
        run: |ctx| {
            or_answer(ctx, |_| {
                // SAFETY: atexit(3) with a function of the right signature that lives forever.
                unsafe { libc::atexit(forge_at_exit) };
                Err(Failure::fail("a wrong answer"))
            })
        },
    },
    Check { id: "constructor_writes_a_pass", run: answer },
    Check {
        id: "writes_a_pass_then_loops",
        run: |ctx| {
            or_answer(ctx, |_| {
                forge_a_pass();
                #[allow(clippy::empty_loop)]
                loop {}
            })
        },
    },
    Check {
        id: "claims_a_pass_with_a_wrong_answer",
        run: |ctx| {
            or_answer(ctx, |ctx| {
                record("answer", ctx.seed * 3 + 1);
                Ok("forged".into())
            })
        },
    },
    Check {
        id: "memorised_the_default_seed",
        run: |ctx| {
            or_answer(ctx, |_| {
                record("answer", 21);
                Ok("memorised".into())
            })
        },
    },
    Check { id: "claims_a_skip", run: |ctx| or_answer(ctx, |_| Err(Failure::skip("no GPU, honestly"))) },
    Check {
        id: "reads_a_file_outside_its_sandbox",
        run: |_| {
            // The reference reads the "solution" and answers with it; the subject tries to copy it.
            let secret = std::env::var("FIXTURE_SECRET").expect("FIXTURE_SECRET");
            let text = std::fs::read_to_string(&secret).unwrap_or_else(|e| format!("denied: {}", e.kind()));
            record("answer", text);
            Ok("copied".into())
        },
    },
    Check {
        id: "the_judge_times_a_slow_kernel",
        run: |ctx| {
            // The subject hands over its "kernel" and claims a pass; the judge measures it itself.
            match grader_harness::judged_artifact("kernel") {
                Some(kernel) if kernel == "slow" => Err(Failure::fail("the judge timed your kernel: too slow")),
                judged => {
                    grader_harness::record_artifact(
                        "kernel",
                        judged.unwrap_or_else(|| if subject() { "slow" } else { "fast" }.into()),
                    );
                    answer(ctx)
                }
            }
        },
    },
    Check {
        id: "the_judge_finds_a_drawn_answer_wrong",
        run: |ctx| {
            // The subject hands over an answer (a double) for each input its run drew, wrong from
            // 50 up, and leaves the judging to the judge, as a check's subject run does; the
            // judge holds no answer for any other input. Were it to shrink, it would
            // end on an input the subject never drew ("no answer for 0"), not on a wrong answer.
            grader_harness::for_all(ctx, 20, 0u32..1000, |n| {
                let label = format!("double of {n}");
                let answer = match grader_harness::judged_artifact(&label) {
                    Some(text) => text.parse::<u32>().map_err(|_| Failure::fail("unreadable answer"))?,
                    None if subject() => 2 * n + u32::from(n >= 50),
                    None if grader_harness::transcript::is_judging() => {
                        return Err(Failure::fail(format!("no answer for {n}")));
                    }
                    None => 2 * n,
                };
                grader_harness::record_artifact(label, answer.to_string());
                if subject() {
                    Ok(())
                } else {
                    grader_harness::ensure(answer == 2 * n, || format!("the double of {n} is not {answer}"))
                }
            })?;
            answer(ctx)
        },
    },
    Check {
        id: "runs_a_program_outside_the_toolchain",
        run: |_| {
            // The reference may run any program; the subject only the C compiler's (the driver
            // names one outside them: `outside_the_toolchain`).
            let program = std::env::var("OUTSIDE_PROGRAM").expect("OUTSIDE_PROGRAM");
            let ran = std::process::Command::new(program)
                .arg("--version")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
            record("answer", ran.map_or_else(|e| format!("denied: {}", e.kind()), |s| format!("ran: {s}")));
            Ok("ran".into())
        },
    },
    Check { id: "stretch_fails", run: |ctx| or_answer(ctx, |_| Err(Failure::fail("optional"))) },
    Check {
        id: "calls_setsid_through_the_32_bit_entry",
        run: |ctx| {
            if subject() {
                setsid_through_the_32_bit_entry();
            }
            answer(ctx)
        },
    },
    Check {
        id: "starts_a_child_that_leaves_through_the_32_bit_entry",
        run: |ctx| {
            if subject() {
                #[allow(clippy::zombie_processes)]
                let _ = std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["__escape32", ESCAPE_32_MARK])
                    .spawn();
                std::thread::sleep(Duration::from_millis(200));
            }
            answer(ctx)
        },
    },
    Check {
        id: "makes_an_x32_system_call",
        run: |ctx| {
            // SAFETY: getpid(2) spelled with the x32 bit; it takes no arguments.
            let returned = unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) };
            if !subject() {
                assert_ne!(returned, 0, "getpid returns a pid or an error");
            }
            answer(ctx)
        },
    },
    Check {
        id: "sends_a_udp_datagram",
        run: |_| {
            let to = std::env::var("FIXTURE_UDP").expect("FIXTURE_UDP");
            let socket = std::net::UdpSocket::bind("127.0.0.1:0");
            record("answer", sent(socket.and_then(|s| s.send_to(b"an answer", &to))));
            Ok("sent".into())
        },
    },
    Check {
        id: "sends_a_unix_datagram",
        run: |_| {
            let to = std::env::var("FIXTURE_UNIX").expect("FIXTURE_UNIX");
            let socket = std::os::unix::net::UnixDatagram::unbound();
            record("answer", sent(socket.and_then(|s| s.send_to(b"an answer", &to))));
            Ok("sent".into())
        },
    },
    Check {
        id: "writes_to_dev_shm",
        run: |ctx| {
            let path = format!("/dev/shm/grader-fixture-{}-{}", ctx.seed, std::process::id());
            let written = std::fs::write(&path, "an answer").map(|()| 9);
            let _ = std::fs::remove_file(&path);
            record("answer", sent(written));
            Ok("wrote".into())
        },
    },
    Check {
        id: "opens_a_device_outside_the_list",
        run: |_| {
            // The kernel's log: a sandboxed process has no business with it.
            let opened = std::fs::File::open("/dev/kmsg");
            record("answer", opened.map_or_else(|e| format!("refused: {}", e.kind()), |_| "opened".into()));
            Ok("opened".into())
        },
    },
    Check {
        id: "opens_the_gpu_without_a_hold",
        run: |_| {
            // A check run without a GPU gets none: CUDA lists no device, and in the sandbox the
            // driver's control file is closed (the reference, not sandboxed here, opens it).
            let visible = std::env::var("CUDA_VISIBLE_DEVICES");
            if visible.as_deref() != Ok("") {
                return Err(Failure::fail(format!("CUDA_VISIBLE_DEVICES is {visible:?}, expected empty")));
            }
            // On a GPU machine it also runs beneath other graders' timed parts, at nice 19.
            // SAFETY: getpriority(2) of this process; -1 is a priority here, not an error.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            if std::path::Path::new("/dev/nvidiactl").exists() && nice != 19 {
                return Err(Failure::fail(format!("runs at nice {nice} on a GPU machine, expected 19")));
            }
            let opened = std::fs::File::open("/dev/nvidiactl");
            record("answer", opened.map_or_else(|e| format!("refused: {}", e.kind()), |_| "opened".into()));
            Ok("no GPU listed".into())
        },
    },
];

use std::os::unix::process::CommandExt as _;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("__linger") => {
            std::thread::sleep(Duration::from_secs(30));
            return ExitCode::SUCCESS;
        }
        Some("__escape32") => {
            let escaped = setsid_through_the_32_bit_entry() > 0;
            std::thread::sleep(Duration::from_secs(if escaped { 30 } else { 0 }));
            return ExitCode::SUCCESS;
        }
        Some("__escape") => {
            // SAFETY: setsid(2) takes no arguments; the sandbox's seccomp filter makes it fail.
            let escaped = unsafe { libc::setsid() } != -1;
            std::thread::sleep(Duration::from_secs(if escaped { 30 } else { 0 }));
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    if args.first().map(String::as_str) == Some("__runner") {
        ROLE.set(if args[1] == "subject" { "subject" } else { "reference" }).expect("set once");
        return grader_harness::runner::main_with_args(&FIXTURE, CHECKS, &args[2..]);
    }
    let tests: &[(&str, fn())] = &[
        ("each misbehaving check is confined to itself", misbehaving_checks_are_confined),
        ("no route of forging a pass works", forged_passes_fail),
        ("the sandbox keeps a check off the network, /dev and the 32-bit entry", sandbox_routes_are_closed),
        ("a phase that does not build reports error on every check", unbuilt_phase_is_all_errors),
        ("a failed phase does not stop the next one", phases_are_independent),
    ];
    for (name, test) in tests {
        print!("test {name} ... ");
        let _ = std::io::stdout().flush();
        test();
        println!("ok");
    }
    println!("{} passed, 0 failed", tests.len());
    ExitCode::SUCCESS
}

/// The grader binary that launches sandboxed runners: the one cargo built beside this test, or
/// `GRADER_LAUNCHER` where this test binary was copied to another machine (a GPU host without
/// Rust runs it beside a packed grader).
fn launcher() -> PathBuf {
    std::env::var_os("GRADER_LAUNCHER").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_grader")), PathBuf::from)
}

/// A program of the system's that the sandbox's toolchain does not hold, to try to run from a
/// check. A host whose C compiler is a script brings its interpreter (often `/bin/sh`) into the
/// toolchain, so the first of a few common programs that stays outside it.
fn outside_the_toolchain() -> PathBuf {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let toolchain: Vec<PathBuf> = grader::sandbox::c_toolchain().iter().filter_map(|p| canonical(p)).collect();
    let candidates = ["/bin/sh", "/bin/ls", "/usr/bin/env", "/bin/cat", "/usr/bin/id"];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| canonical(p).is_some_and(|c| !toolchain.contains(&c)))
        .unwrap_or_else(|| panic!("every one of {candidates:?} is in the sandbox's toolchain: {toolchain:?}"))
}

/// The fixture graded as the grader grades a phase: the subject sandboxed, the reference judging.
fn grading(secret: &Path) -> Grading {
    let exe = std::env::current_exe().expect("own path");
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let tmp = scratch.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let sandbox = Sandbox {
        launcher: launcher(),
        places: Places {
            read_exec: vec![exe.parent().expect("a directory").to_path_buf()],
            executables: grader::sandbox::c_toolchain(),
            writable: vec![tmp.clone()],
            ..Places::default()
        },
    };
    let outside = outside_the_toolchain();
    let environment = vec![
        ("TMPDIR".into(), tmp.into_os_string()),
        ("FIXTURE_SECRET".into(), secret.into()),
        ("OUTSIDE_PROGRAM".into(), outside.clone().into_os_string()),
    ];
    // SAFETY: the driver sets these before it starts any thread or runner.
    unsafe {
        std::env::set_var("FIXTURE_SECRET", secret);
        std::env::set_var("OUTSIDE_PROGRAM", outside);
    }
    Grading {
        subject: Runner::new(&exe).with_leading_args(["__runner", "subject"]).sandboxed(sandbox, environment),
        judge: Runner::new(&exe).with_leading_args(["__runner", "reference"]),
        scratch: vec![scratch],
    }
}

/// The fixture's report with a fresh seed (never the default 7 a forger might memorise).
fn graded() -> (PhaseReport, Duration) {
    let secrets = tempfile::tempdir().unwrap();
    let secret = secrets.path().join("solution.txt");
    std::fs::write(&secret, "the reference's answer").unwrap();
    // Where a datagram would go: the driver listens, and nothing sandboxed may reach it.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let unix_path = secrets.path().join("listener.sock");
    let unix = std::os::unix::net::UnixDatagram::bind(&unix_path).unwrap();
    // SAFETY: the driver sets these before it starts any thread or runner.
    unsafe {
        std::env::set_var("FIXTURE_UDP", udp.local_addr().unwrap().to_string());
        std::env::set_var("FIXTURE_UNIX", &unix_path);
    }
    let start = Instant::now();
    let report = PhaseReport::run(Ok(grading(&secret)), &FIXTURE, Subject::Exercises, 1234, &[]);
    let elapsed = start.elapsed();
    let count = |recv: &dyn Fn(&mut [u8]) -> std::io::Result<usize>| {
        let mut buffer = [0u8; 64];
        std::iter::from_fn(|| recv(&mut buffer).ok()).count()
    };
    udp.set_nonblocking(true).unwrap();
    unix.set_nonblocking(true).unwrap();
    DATAGRAMS.set((count(&|b| udp.recv(b)), count(&|b| unix.recv(b)))).unwrap();
    (report, elapsed)
}

/// How many datagrams reached the driver's UDP and unix sockets while the fixture was graded.
static DATAGRAMS: OnceLock<(usize, usize)> = OnceLock::new();

fn report() -> &'static (PhaseReport, Duration) {
    static REPORT: OnceLock<(PhaseReport, Duration)> = OnceLock::new();
    REPORT.get_or_init(graded)
}

fn expect(id: &str, status: Status, needle: &str) {
    let check = report().0.checks.iter().find(|c| c.id == id).expect("every check reported");
    assert_eq!(check.status, status, "{id}: {check:?}");
    assert!(check.message.contains(needle), "{id}: `{needle}` not in {:?}", check.message);
}

/// Processes whose command line contains `mark`.
fn processes_marked(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(mark) {
                found.push(format!("{}: {cmdline}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

fn misbehaving_checks_are_confined() {
    let (report, elapsed) = report();
    expect("passes", Status::Pass, "fine");
    expect("fails", Status::Fail, "expected 2, got 3");
    expect("not_started", Status::NotStarted, &format!("tests/isolation.rs:{TODO_LINE}"));
    let not_started = report.checks.iter().find(|c| c.id == "not_started").unwrap();
    assert_eq!(not_started.location, Some(format!("grader/tests/isolation.rs:{TODO_LINE}")));
    expect("panics", Status::Fail, "index out of bounds, on purpose");
    expect("panics", Status::Fail, "grader/tests/isolation.rs:");
    expect("aborts", Status::Fail, "SIGABRT");
    expect("segfaults", Status::Fail, "SIGSEGV");
    expect("exits_early", Status::Fail, "exited with code 5");
    expect("exits_early", Status::Fail, "some output before leaving");
    expect("exits_with_2", Status::Fail, "exited with code 2");
    expect("loops_forever", Status::Fail, &format!("did not finish within {LOOP_LIMIT_SECS}s"));
    expect("skips", Status::Skipped, "no GPU on this machine");
    expect("todo_inside_a_property_test", Status::NotStarted, "todo!()");
    expect("panics_inside_a_property_test", Status::Fail, &format!("tests/isolation.rs:{PANIC_LINE}"));
    expect("panics_inside_a_property_test", Status::Fail, "4 is out of range");
    expect("prints_escape_sequences", Status::Fail, "red \\u{1b}[31mtext");
    let printed = report.checks.iter().find(|c| c.id == "prints_escape_sequences").unwrap();
    assert!(!printed.message.contains('\x1b'), "{printed:?}");
    expect("leaves_a_child_holding_its_output", Status::Pass, "fine");
    assert_eq!(processes_marked(LINGER_MARK), Vec::<String>::new(), "a check's child outlived it");
    expect("escapes_its_process_group", Status::Pass, "fine");
    assert_eq!(processes_marked(ESCAPE_MARK), Vec::<String>::new(), "a process escaped the check's group");
    expect("passes_again", Status::Pass, "fine");
    // Where this process can start CUDA, a sandboxed check that holds the GPU starts it too (the
    // driver opens the device files and writes its threads' names under `/proc/<pid>`).
    if engine::device::cuda::unavailable_reason().is_none() {
        expect("needs_a_gpu", Status::Pass, "fine");
        expect("reads_its_own_memory_holding_the_gpu", Status::Fail, "refused: permission denied");
    }
    expect("stretch_fails", Status::Fail, "optional");
    let stretch = report.checks.iter().find(|c| c.id == "stretch_fails").unwrap();
    assert!(stretch.stretch && !stretch.blocks());
    // Two checks time out at the limit and one leaves a child: each ends within its limit plus
    // the readers' grace, so the whole phase takes far less than a blocked reader once did.
    assert!(*elapsed < Duration::from_secs(3 * (LOOP_LIMIT_SECS + 2) + 30), "took {elapsed:?}");
    assert!(!report.passed());
    let table = report.render(&FIXTURE, false);
    assert!(table.contains("– skipped") && table.contains("no GPU on this machine"), "{table}");
}

fn forged_passes_fail() {
    expect("writes_a_pass_and_exits", Status::Fail, "does not carry the check runner's seal");
    expect("writes_the_right_answers_and_exits", Status::Fail, "does not carry the check runner's seal");
    expect("exit_handler_writes_a_pass", Status::Fail, "");
    expect("constructor_writes_a_pass", Status::Fail, "does not carry the check runner's seal");
    expect("writes_a_pass_then_loops", Status::Fail, &format!("did not finish within {LOOP_LIMIT_SECS}s"));
    expect("claims_a_pass_with_a_wrong_answer", Status::Fail, "`answer` differs from the reference solution's");
    expect("memorised_the_default_seed", Status::Fail, "`answer` differs");
    expect("claims_a_skip", Status::Fail, "skipped in your process");
    expect("the_judge_times_a_slow_kernel", Status::Fail, "the judge timed your kernel: too slow");
    expect("the_judge_finds_a_drawn_answer_wrong", Status::Fail, "judged as drawn, not shrunk");
    expect("the_judge_finds_a_drawn_answer_wrong", Status::Fail, " is not ");
    match Support::probe() {
        Support::Landlock(_) => {
            expect("reads_a_file_outside_its_sandbox", Status::Fail, "denied: permission denied");
            expect("runs_a_program_outside_the_toolchain", Status::Fail, "denied: permission denied");
        }
        // Without Landlock the sandbox cannot hide files; the grader says so when it starts.
        Support::SeccompOnly => {
            expect("reads_a_file_outside_its_sandbox", Status::Pass, "");
            expect("runs_a_program_outside_the_toolchain", Status::Pass, "");
        }
    }
    assert!(!report().0.passed());
    assert_ne!(grader::verdict::fresh_seed(), grader::verdict::fresh_seed(), "two runs drew the same seed");
}

fn sandbox_routes_are_closed() {
    expect("calls_setsid_through_the_32_bit_entry", Status::Fail, "SIGSYS");
    expect("starts_a_child_that_leaves_through_the_32_bit_entry", Status::Pass, "fine");
    assert_eq!(processes_marked(ESCAPE_32_MARK), Vec::<String>::new(), "a process left through the 32-bit entry");
    expect("makes_an_x32_system_call", Status::Fail, "SIGSYS");
    expect("sends_a_udp_datagram", Status::Fail, "refused: permission denied");
    expect("sends_a_unix_datagram", Status::Fail, "refused: permission denied");
    // Only the reference's datagrams arrived.
    assert_eq!(DATAGRAMS.get(), Some(&(1, 1)), "datagrams reached the driver (UDP, unix)");
    expect("writes_to_dev_shm", Status::Fail, "refused: permission denied");
    // The reference (not sandboxed here) opens the kernel's log where the driver may.
    if std::fs::File::open("/dev/kmsg").is_ok() {
        expect("opens_a_device_outside_the_list", Status::Fail, "refused: permission denied");
    }
    // On a GPU machine the sandbox closes the GPU to a check run without one; elsewhere both
    // runners find no device file, and each saw CUDA list no device.
    if std::path::Path::new("/dev/nvidiactl").exists() {
        expect("opens_the_gpu_without_a_hold", Status::Fail, "refused: permission denied");
    } else {
        expect("opens_the_gpu_without_a_hold", Status::Pass, "no GPU listed");
    }
}

fn unbuilt_phase_is_all_errors() {
    let failure = BuildFailure { message: "does not compile: E0308".into(), location: Some("src/a.rs:3".into()) };
    let unbuilt = PhaseReport::run(Err(failure), &FIXTURE, Subject::Exercises, 7, &[]);
    // A GPU check is skipped where there is no GPU, built or not: the score's denominator holds.
    let no_gpu = engine::device::cuda::unavailable_reason().is_some();
    let gpu_status = |r: &PhaseReport| r.checks.iter().find(|c| c.id == "needs_a_gpu").unwrap().status;
    assert_eq!(gpu_status(&unbuilt) == Status::Skipped, no_gpu);
    assert_eq!(gpu_status(&report().0) == Status::Skipped, no_gpu);
    assert!(
        unbuilt
            .checks
            .iter()
            .filter(|c| !["needs_a_gpu", "reads_its_own_memory_holding_the_gpu"].contains(&c.id.as_str()) || !no_gpu)
            .all(|c| c.status == Status::Error && c.location.as_deref() == Some("src/a.rs:3"))
    );
    let rendered = unbuilt.render(&FIXTURE, false);
    assert_eq!(rendered.matches("does not compile: E0308").count(), 1, "the error is shown once:\n{rendered}");
}

fn phases_are_independent() {
    let broken = BuildFailure { message: "does not compile".into(), location: None };
    let reports = [PhaseReport::run(Err(broken), &FIXTURE, Subject::Exercises, 7, &[]), report().0.clone()];
    assert!(reports[0].checks.iter().all(|c| matches!(c.status, Status::Error | Status::Skipped)));
    assert_eq!(reports[1].checks[0].status, Status::Pass);
}
