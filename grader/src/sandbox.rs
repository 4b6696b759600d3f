//! The sandbox learner code runs in: Landlock for files, network and signals, seccomp to keep
//! every process inside the process group the grader kills.
//!
//! A learner's crate can run code before `main` (a static constructor), so the sandbox cannot be
//! set up by the runner itself. The grader starts a *trampoline* instead, itself in a hidden mode
//! (`grader __sandbox ... -- RUNNER ARGS`): a fresh single-threaded process that restricts itself
//! and then executes the runner, which inherits the restrictions before any of its code runs.
//!
//! What the runner may do inside:
//! - read the system (`/usr`, `/lib*`, `/bin`, `/etc`, `/opt`, and the directories of
//!   `LD_LIBRARY_PATH` and `CUDA_HOME`/`CUDA_PATH`, where NVRTC and cuBLAS may live), and execute
//!   only the C compiler the engine calls for generated code and custom ops (the driver, `cc1`,
//!   `as`, `collect2`, `ld`, found by asking the compiler) and the dynamic loader they need;
//! - read `/proc` and `/sys`, and write its own `/proc/<pid>` (the CUDA driver does, at
//!   `cuInit`); read and write `/dev` (the GPU's device files);
//! - read and execute its own copy of the runner binary, in a directory of its own;
//! - read and write a private temporary directory and its own kernel cache;
//! - nothing else: not the workbook (so not `solutions/`, `grader/`, `.grader/`, `target/` with
//!   the reference runners), no network, no signals to processes outside the sandbox, no new
//!   session or process group (seccomp), no ptrace.
//!
//! Landlock needs Linux 5.13 or later with Landlock enabled; its network rules need 6.7 and its
//! signal scoping 6.12. Where the kernel has less, the grader says so once and the rest still
//! applies ([`Support`]).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, path_beneath_rules,
};

/// The hidden subcommand that runs the trampoline.
pub const TRAMPOLINE: &str = "__sandbox";

/// The newest Landlock ABI the sandbox asks for; older kernels get what they support.
const WANTED_ABI: ABI = ABI::V6;

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
            Support::Landlock(abi) => format!("Landlock ABI {abi} and seccomp"),
            Support::SeccompOnly => "seccomp only: this kernel has no Landlock, so learner code can read and write \
                                     your files while it runs; only a re-grade in a clean copy counts"
                .to_string(),
        }
    }
}

/// Where a sandboxed runner may write, and the trampoline that confines it.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// The grader executable that serves as trampoline.
    pub launcher: PathBuf,
    /// Directories the runner may read and execute besides the system's (its own binary's).
    pub read_exec: Vec<PathBuf>,
    /// Programs it may execute: the C compiler's, from [`c_toolchain`].
    pub executables: Vec<PathBuf>,
    /// Directories it may read and write (its temporary directory, its kernel cache).
    pub writable: Vec<PathBuf>,
}

impl Sandbox {
    /// `program args...` wrapped in the trampoline.
    pub fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(&self.launcher);
        command.arg(TRAMPOLINE);
        for dir in &self.read_exec {
            command.arg("--read-exec").arg(dir);
        }
        for program in &self.executables {
            command.arg("--exec").arg(program);
        }
        for dir in &self.writable {
            command.arg("--writable").arg(dir);
        }
        command.arg("--").arg(program);
        command
    }
}

/// The trampoline: `__sandbox [--read-exec DIR]... [--exec FILE]... [--writable DIR]... --
/// PROGRAM ARGS...`. Restricts this process, then replaces it with PROGRAM. Returns only on
/// failure.
pub fn trampoline(args: &[OsString]) -> Result<std::convert::Infallible> {
    let (mut read_exec, mut executables, mut writable) = (Vec::new(), dynamic_loaders(), Vec::new());
    let mut rest = args.iter();
    loop {
        match rest.next().and_then(|a| a.to_str()) {
            Some("--read-exec") => read_exec.push(PathBuf::from(rest.next().context("--read-exec needs a value")?)),
            Some("--exec") => executables.push(PathBuf::from(rest.next().context("--exec needs a value")?)),
            Some("--writable") => writable.push(PathBuf::from(rest.next().context("--writable needs a value")?)),
            Some("--") => break,
            other => bail!("sandbox: unexpected argument {other:?}"),
        }
    }
    let program = rest.next().context("sandbox: no program to run")?;
    deny_leaving_the_process_group()?;
    if let Support::Landlock(_) = Support::probe() {
        confine_files(&read_exec, &executables, &writable)?;
    }
    Err(Command::new(program).args(rest).exec()).with_context(|| format!("sandbox: cannot run {program:?}"))
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

/// System directories a runner reads from, where they exist.
fn system_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/run"]
            .iter()
            .map(PathBuf::from)
            .collect();
    for variable in ["LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(value) = std::env::var_os(variable) {
            dirs.extend(std::env::split_paths(&value).filter(|p| p.is_absolute()));
        }
    }
    dirs.retain(|d| d.exists());
    dirs
}

fn confine_files(read_exec: &[PathBuf], executables: &[PathBuf], writable: &[PathBuf]) -> Result<()> {
    let all = AccessFs::from_all(WANTED_ABI);
    let read = AccessFs::from_read(WANTED_ABI);
    let read_only = read & !AccessFs::Execute;
    let file = AccessFs::from_file(WANTED_ABI) & (AccessFs::Execute | AccessFs::ReadFile);
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .handle_access(AccessNet::from_all(WANTED_ABI))?
        .scope(Scope::from_all(WANTED_ABI))?
        .create()?
        .add_rules(path_beneath_rules(system_dirs(), read_only))?
        .add_rules(path_beneath_rules(read_exec, read))?
        .add_rules(path_beneath_rules(executables, file))?
        .add_rules(path_beneath_rules(["/proc", "/sys"].iter().filter(|p| Path::new(p).exists()), read_only))?
        .add_rules(path_beneath_rules(
            writable.iter().chain([&PathBuf::from("/dev"), &PathBuf::from("/proc/self")]),
            all & !AccessFs::Execute,
        ))?
        .restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        bail!("sandbox: the kernel refused the Landlock rules");
    }
    Ok(())
}

/// A seccomp filter that makes `setsid`, `setpgid` and `ptrace` fail with EPERM: every process
/// the runner starts stays in the group the grader kills, and none inspects another.
fn deny_leaving_the_process_group() -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7;
    const LOAD_WORD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JUMP_IF_EQUAL: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let statement = |code, k| libc::sock_filter { code, jt: 0, jf: 0, k };
    let skip_next_unless = |k| libc::sock_filter { code: JUMP_IF_EQUAL, jt: 0, jf: 1, k };
    let denied = [libc::SYS_setsid, libc::SYS_setpgid, libc::SYS_ptrace];
    let mut program = vec![
        statement(LOAD_WORD, 4), // seccomp_data.arch
        libc::sock_filter { code: JUMP_IF_EQUAL, jt: 1, jf: 0, k: AUDIT_ARCH },
        statement(RETURN, libc::SECCOMP_RET_ALLOW),
        statement(LOAD_WORD, 0), // seccomp_data.nr
    ];
    for call in denied {
        program.push(skip_next_unless(call as u32));
        program.push(statement(RETURN, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32));
    }
    program.push(statement(RETURN, libc::SECCOMP_RET_ALLOW));
    let filter = libc::sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
    // SAFETY: prctl(2) with integer arguments, then with a pointer to a filter that outlives the
    // call; the kernel copies the program.
    let failed = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &filter as *const libc::sock_fprog) != 0
    };
    if failed {
        bail!("sandbox: cannot install the seccomp filter: {}", std::io::Error::last_os_error());
    }
    Ok(())
}
