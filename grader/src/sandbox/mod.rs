//! The sandbox learner code runs and builds in: Landlock for files, network and signals, a
//! network namespace of its own, and seccomp to keep every process inside the process group the
//! grader kills and off the network.
//!
//! A learner's crate could run code before `main` in a static constructor were it built without
//! the grader's flags, and a build runs the compiler, not the runner, so the sandbox cannot be set
//! up by the confined program itself. The grader starts a *trampoline* instead, itself in a hidden
//! mode (`grader __sandbox ... -- PROGRAM ARGS`): a fresh single-threaded process that restricts
//! itself and then executes the program, which inherits the restrictions before any of its code
//! runs. The same trampoline confines a check runner ([`crate::isolation`]), the judge, and the
//! compiler while it builds a learner's crate ([`crate::build`]).
//!
//! What a confined program may do ([`files`], [`syscalls`], [`network`]):
//! - read the system (`/usr`, `/lib*`, `/bin`, `/etc`, `/opt`, and the directories of
//!   `LD_LIBRARY_PATH` and `CUDA_HOME`/`CUDA_PATH`, where NVRTC and cuBLAS may live), and execute
//!   only the programs it is given (the C compiler the engine calls: the driver, `cc1`, `as`,
//!   `collect2`, `ld`, found by asking the compiler) and the dynamic loader they need;
//! - read `/sys` and the system-wide parts of `/proc`, not `/proc/<pid>` (through `mem`, safe code
//!   could read and write its own process's memory); a check's runner that holds the GPU's lock on
//!   a machine with a GPU may also read and write its own `/proc/<pid>` (the CUDA driver does, at
//!   `cuInit`) until it has started CUDA, before its check runs ([`grader_harness::confine`]);
//!   of `/dev`, only `/dev/null`, `/dev/zero`, `/dev/full`, the random sources (not `/dev/shm`),
//!   and the GPU's `/dev/nvidia*` for a check's runner that holds the GPU's lock (not for the
//!   compiler, nor for a check run without a GPU);
//! - read (and execute) what it is given: its own copy of the runner binary, or for the compiler
//!   the learner's sources and the libraries they build against;
//! - read and write its private temporary directory and its own kernel cache;
//! - nothing else: not the workbook (so not `solutions/`, `grader/`, `.grader/`, `target/` with
//!   the reference runners), no socket but a unix seqpacket one (the CUDA driver opens one at
//!   `cuInit`) and no network namespace but its own, no
//!   signals to processes outside the sandbox, no new session or process group, no ptrace, and no
//!   system call through another ABI (the 32-bit entry, x32), which kills the process.
//!
//! Landlock needs Linux 5.13 or later with Landlock enabled; its network rules need 6.7 and its
//! signal scoping 6.12. Where the kernel has less, the grader says so once and the rest still
//! applies ([`Support`]). A network namespace needs root or unprivileged user namespaces (which
//! Docker's default seccomp profile refuses); without one, sockets are still refused.

mod files;
mod network;
pub mod syscalls;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

pub use files::{Places, WANTED_ABI};
pub use network::Network;

/// The hidden subcommand that runs the trampoline.
pub const TRAMPOLINE: &str = "__sandbox";

/// How much of the sandbox this kernel supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Landlock at this ABI version (1 = files only; 4 adds TCP; 6 adds signal and socket scoping).
    Landlock(u32),
    /// No Landlock: learner code can read and write what the learner can.
    SeccompOnly,
}

impl Support {
    /// Asks the kernel (`landlock_create_ruleset` with the version flag).
    pub fn probe() -> Support {
        // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the syscall only
        // returns the ABI version (or an error); it touches no memory.
        let version = unsafe {
            libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32 /* VERSION */)
        };
        if version > 0 { Support::Landlock(version as u32) } else { Support::SeccompOnly }
    }

    /// One line for the learner and for `--json`.
    pub fn describe(self) -> String {
        match self {
            Support::Landlock(abi) => format!(
                "Landlock ABI {abi}, seccomp (no sockets but unix seqpacket, other system-call ABIs killed), a network namespace where \
                 the kernel allows one"
            ),
            Support::SeccompOnly => "seccomp only: this kernel has no Landlock, so learner code can read and write \
                                     your files while it runs; only a re-grade in a clean copy counts"
                .to_string(),
        }
    }
}

/// The trampoline that confines a program, and the places it may use.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// The grader executable that serves as trampoline.
    pub launcher: PathBuf,
    /// What the program may read, execute and write besides the system's files.
    pub places: Places,
}

impl Sandbox {
    /// `program args...` wrapped in the trampoline; with `gpu`, the program may open the GPU's
    /// device files.
    pub fn command(&self, program: &Path, gpu: bool) -> Command {
        let mut command = Command::new(&self.launcher);
        command.arg(TRAMPOLINE);
        if gpu {
            command.arg("--gpu");
        }
        let Places { read, read_exec, executables, writable } = &self.places;
        for (flag, paths) in
            [("--read", read), ("--read-exec", read_exec), ("--exec", executables), ("--writable", writable)]
        {
            for path in paths {
                command.arg(flag).arg(path);
            }
        }
        command.arg("--").arg(program);
        command
    }

    /// The first writable directory: where the program's results go.
    pub fn scratch(&self) -> Option<&Path> {
        self.places.writable.first().map(PathBuf::as_path)
    }
}

/// The trampoline: `__sandbox [--gpu] [--read PATH]... [--read-exec DIR]... [--exec FILE]...
/// [--writable DIR]... -- PROGRAM ARGS...`. Restricts this process, then replaces it with
/// PROGRAM. Returns only on failure.
pub fn trampoline(args: &[OsString]) -> Result<std::convert::Infallible> {
    let mut places = Places { executables: dynamic_loaders(), ..Places::default() };
    let mut gpu = false;
    let mut rest = args.iter().peekable();
    if rest.next_if(|a| *a == "--gpu").is_some() {
        gpu = true;
    }
    loop {
        let flag = rest.next().and_then(|a| a.to_str());
        let list = match flag {
            Some("--read") => &mut places.read,
            Some("--read-exec") => &mut places.read_exec,
            Some("--exec") => &mut places.executables,
            Some("--writable") => &mut places.writable,
            Some("--") => break,
            other => bail!("sandbox: unexpected argument {other:?}"),
        };
        list.push(PathBuf::from(rest.next().with_context(|| format!("{} needs a value", flag.unwrap_or("")))?));
    }
    let program = rest.next().context("sandbox: no program to run")?;
    network::leave()?;
    let kept = match Support::probe() {
        Support::Landlock(_) => files::confine(&places, gpu)?,
        Support::SeccompOnly => None,
    };
    syscalls::install()?;
    let mut command = Command::new(program);
    command.args(rest);
    if let Some(kept) = kept {
        command.env(grader_harness::confine::KEPT_PLACES, kept);
    }
    Err(command.exec()).with_context(|| format!("sandbox: cannot run {program:?}"))
}

/// The C compiler's programs, as the engine will run them (`$CC`, else `cc`): the driver and
/// the programs it starts, as the driver itself names them (`-print-prog-name`). A driver that is
/// a shell script (a wrapper around the real `gcc`, as some installations have) brings its
/// interpreter and the programs beside it.
pub fn c_toolchain() -> Vec<PathBuf> {
    let driver = std::env::var("CC").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "cc".into());
    let mut programs: Vec<PathBuf> = in_path(&driver).into_iter().collect();
    for name in ["cc1", "as", "collect2", "ld", "lto-wrapper"] {
        let Ok(output) = Command::new(&driver).arg(format!("-print-prog-name={name}")).output() else { continue };
        let printed = String::from_utf8_lossy(&output.stdout).trim().to_string();
        let path = PathBuf::from(&printed);
        programs.extend(if path.is_absolute() { Some(path).filter(|p| p.exists()) } else { in_path(&printed) });
    }
    let scripts: Vec<PathBuf> = programs
        .iter()
        .filter_map(|p| script_interpreter(p).map(|i| (p, i)))
        .flat_map(|(script, interpreter)| {
            // The programs beside a wrapper, unless it lies among every other program of the
            // system, which would let learner code run them all.
            let own_directory =
                script.parent().filter(|dir| !SHARED_BIN_DIRS.iter().any(|shared| *dir == Path::new(shared)));
            let siblings = own_directory
                .and_then(|dir| std::fs::read_dir(dir).ok())
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path());
            std::iter::once(interpreter).chain(siblings.filter(|p| p.is_file()))
        })
        .collect();
    programs.extend(scripts);
    programs
}

/// Directories of the system's programs at large: a wrapper found there does not bring its
/// neighbours.
const SHARED_BIN_DIRS: [&str; 6] = ["/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"];

/// The interpreter a script names on its `#!` line, if `path` is a script.
fn script_interpreter(path: &Path) -> Option<PathBuf> {
    let mut head = [0u8; 128];
    let read = std::io::Read::read(&mut std::fs::File::open(path).ok()?, &mut head).ok()?;
    let line = std::str::from_utf8(&head[..read]).ok()?.strip_prefix("#!")?.lines().next()?;
    line.split_whitespace().next().map(PathBuf::from).filter(|p| p.exists())
}

/// `program` found as the shell would: itself when it names a path, else in `PATH`.
fn in_path(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program)).filter(|p| p.exists());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// The dynamic loaders (`ld-linux*`) every dynamically linked program is started by.
fn dynamic_loaders() -> Vec<PathBuf> {
    let dirs = ["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu"];
    dirs.iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("ld-linux")))
        .collect()
}
