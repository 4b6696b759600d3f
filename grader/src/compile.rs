//! Compiling a learner's crate in the sandbox, so that nothing it asks of the compiler can read
//! what it must not: `include!`, `include_str!`, `include_bytes!`, `#[path]` (however a macro
//! assembles them), a symbolic link among its sources, or assembler that includes a file's bytes
//! (`.incbin`) all reach the files through the compiler, and the compiler runs confined.
//!
//! Cargo builds everything in one invocation, trusted crates (the engine, the checks, the
//! solutions) and the learner's alike. The grader sets itself as cargo's `RUSTC_WRAPPER`, so cargo
//! runs `grader RUSTC ARGS...` for every crate, with [`CONFIG_VARIABLE`] describing the learner's
//! crates. For any other crate the wrapper executes rustc as it is. For a learner's crate
//! ([`wrapper`]) it runs rustc in the [sandbox](crate::sandbox), where it may read:
//! - the workbook, except `solutions/`, `grader/`, `.git/`, `.grader/` and `target/`;
//! - of the target directory, only the libraries of crates that are no workspace member other than
//!   those it builds against (the engine and the given models), so neither the compiled solutions
//!   nor the runners;
//! - the toolchain and the system;
//!
//! and write only a directory of its own, from which the wrapper moves what rustc made to where
//! cargo expects it (rustc never writes beside the engine's libraries, so it cannot replace them).
//! It also passes `-F unsafe_code`: no `unsafe` block, `extern` block, `#[no_mangle]`,
//! `#[link_section]` or `global_asm!` in learner code, so it cannot run code before `main` or
//! name a native library for the final link to read. The final link then reads only compiled
//! code. That lint alone does not keep learner code from the runner's state in its process: safe
//! code can read and write a process's memory through `/proc/self/mem`, so the sandbox does not
//! open a runner's `/proc/<pid>` to it, and a runner that holds a GPU, whose driver needs it while
//! CUDA starts, closes it itself before any check runs ([`crate::sandbox`],
//! [`grader_harness::confine`]).
//!
//! Cargo may find a learner's crate fresh, built earlier outside the grader (by `cargo test`,
//! say). So the wrapper stamps what it built (the SHA-256 of each library, in
//! `.grader/sandboxed-builds/`), and after a build [`require_sandboxed`] rebuilds a learner's
//! crate whose library carries no stamp.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::sandbox::{Places, Sandbox};

/// The environment variable that carries the wrapper's [`Config`], as JSON.
pub const CONFIG_VARIABLE: &str = "GRADER_COMPILE";

/// Top-level entries of the workbook a learner's compiler may not read.
const HIDDEN_ENTRIES: [&str; 5] = ["solutions", "grader", ".git", ".grader", "target"];

/// What the wrapper needs to know, set by the grader for one cargo build.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// The learner's crates' directories (canonical): their compiles are confined.
    pub crates: Vec<PathBuf>,
    /// What a confined compile may read of the workbook.
    pub read: Vec<PathBuf>,
    /// Library names whose compiled files a confined compile may not read: every workspace
    /// member's but the engine's and the models'.
    pub hidden_libraries: Vec<String>,
    /// Where the stamps of confined builds go.
    pub stamps: PathBuf,
}

impl Config {
    /// The configuration for building in `root`, whose learner crates are `crates` and whose
    /// workspace members' libraries are `members`; stamps go to `stamps`.
    pub fn new(root: &Path, crates: Vec<PathBuf>, members: Vec<String>, stamps: PathBuf) -> Result<Config> {
        let mut read = Vec::new();
        for entry in std::fs::read_dir(root).with_context(|| format!("cannot list {}", root.display()))? {
            let entry = entry?;
            if !HIDDEN_ENTRIES.iter().any(|hidden| entry.file_name() == OsStr::new(hidden)) {
                read.push(entry.path());
            }
        }
        read.sort();
        let crates = crates.iter().map(|c| c.canonicalize().unwrap_or_else(|_| c.clone())).collect();
        let allowed = ["engine", "workbook_models"];
        let hidden_libraries = members.into_iter().filter(|m| !allowed.contains(&m.as_str())).collect();
        Ok(Config { crates, read, hidden_libraries, stamps })
    }

    /// Sets `command` (a cargo build) to compile through this grader with this configuration.
    pub fn apply(&self, command: &mut Command, launcher: &Path) -> Result<()> {
        command
            .env("RUSTC_WRAPPER", launcher)
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env(CONFIG_VARIABLE, serde_json::to_string(self)?);
        Ok(())
    }
}

/// `grader RUSTC ARGS...` as cargo's `RUSTC_WRAPPER` runs it: rustc unchanged for a crate that
/// is not the learner's, confined for one that is.
pub fn wrapper(args: &[OsString]) -> Result<ExitCode> {
    let config: Config =
        serde_json::from_str(&std::env::var(CONFIG_VARIABLE)?).context("the compile wrapper's configuration")?;
    let (rustc, rest) = args.split_first().context("the compile wrapper needs rustc's path")?;
    let crate_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").map(|d| PathBuf::from(&d).canonicalize().unwrap_or(d.into()));
    if !crate_dir.is_some_and(|dir| config.crates.contains(&dir)) {
        return Err(Command::new(rustc).args(rest).exec()).with_context(|| format!("cannot run {}", rustc.display()));
    }
    confined(&config, Path::new(rustc), rest)
}

/// The arguments of one rustc invocation that the wrapper changes or reads.
#[derive(Debug, Default)]
struct Invocation {
    args: Vec<OsString>,
    out_dir: Option<PathBuf>,
    incremental: Option<PathBuf>,
    dependency_dirs: Vec<PathBuf>,
}

impl Invocation {
    fn parse(args: &[OsString]) -> Invocation {
        let mut parsed = Invocation::default();
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let text = arg.to_string_lossy();
            let value = |prefix: &str| text.strip_prefix(prefix).map(PathBuf::from);
            if text == "--out-dir" {
                parsed.out_dir = rest.next().map(PathBuf::from);
            } else if text == "-C" || text == "-L" {
                let Some(next) = rest.next() else { break };
                let next_text = next.to_string_lossy();
                match (text.as_ref(), next_text.strip_prefix("incremental="), next_text.strip_prefix("dependency=")) {
                    ("-C", Some(dir), _) => parsed.incremental = Some(PathBuf::from(dir)),
                    ("-L", _, Some(dir)) => parsed.dependency_dirs.push(PathBuf::from(dir)),
                    _ => parsed.args.extend([arg.clone(), next.clone()]),
                }
            } else if let Some(dir) = value("-Cincremental=") {
                parsed.incremental = Some(dir);
            } else if let Some(dir) = value("-Ldependency=") {
                parsed.dependency_dirs.push(dir);
            } else {
                parsed.args.push(arg.clone());
            }
        }
        parsed
    }
}

/// Runs rustc confined, then moves its outputs where cargo expects them and stamps them.
fn confined(config: &Config, rustc: &Path, args: &[OsString]) -> Result<ExitCode> {
    let invocation = Invocation::parse(args);
    let out_dir = invocation.out_dir.clone().context("cargo gave rustc no --out-dir")?;
    let sysroot = sysroot(rustc)?;
    // A directory of its own beside cargo's, on the same file system.
    let private = tempfile::Builder::new()
        .prefix("grader-rustc-")
        .tempdir_in(out_dir.parent().unwrap_or(&out_dir))
        .context("cannot create the compiler's private directory")?;
    let (own_out, tmp) = (private.path().join("out"), private.path().join("tmp"));
    std::fs::create_dir_all(&own_out)?;
    std::fs::create_dir_all(&tmp)?;
    let mut args = invocation.args.clone();
    args.extend(["--out-dir".into(), own_out.clone().into_os_string()]);
    for dir in &invocation.dependency_dirs {
        args.extend(["-L".into(), format!("dependency={}", dir.display()).into()]);
    }
    let mut writable = vec![private.path().to_path_buf()];
    if let Some(incremental) = &invocation.incremental {
        // The learner's incremental state, apart from everything else's.
        let own = incremental.with_file_name("incremental-sandboxed");
        std::fs::create_dir_all(&own)?;
        args.extend(["-C".into(), format!("incremental={}", own.display()).into()]);
        writable.push(own);
    }
    args.extend(["-F".into(), "unsafe_code".into()]);
    let mut read = config.read.clone();
    for dir in &invocation.dependency_dirs {
        read.extend(libraries(dir, &config.hidden_libraries));
    }
    let sandbox = Sandbox {
        launcher: std::env::current_exe().context("cannot find the grader's own executable")?,
        places: Places { read, read_exec: vec![sysroot.clone()], writable, ..Places::default() },
    };
    let mut child = sandbox
        .command(&sysroot.join("bin").join("rustc"), false)
        .args(&args)
        .env("TMPDIR", &tmp)
        .env_remove(CONFIG_VARIABLE)
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the confined compiler")?;
    let stderr = child.stderr.take().expect("piped");
    let mut forward = std::io::stderr().lock();
    for line in BufReader::new(stderr).lines() {
        let line = line?;
        // An artifact notification tells cargo a file is ready (the metadata, so that dependent
        // crates may start): it must be where cargo looks before cargo reads the line. Copied, not
        // moved: rustc reads the metadata back to put it into the library.
        let line = match artifact(&line) {
            Some(path) if path.starts_with(&own_out) => {
                let copied = out_dir.join(path.file_name().context("an output without a name")?);
                std::fs::copy(&path, &copied)
                    .with_context(|| format!("cannot copy {} to {}", path.display(), out_dir.display()))?;
                line.replace(&path.display().to_string(), &copied.display().to_string())
            }
            _ => line,
        };
        writeln!(forward, "{line}")?;
    }
    let status = child.wait()?;
    if status.success() {
        for entry in std::fs::read_dir(&own_out)? {
            let moved = move_output(&entry?.path(), &own_out, &out_dir)?;
            if moved.extension().is_some_and(|e| e == "rlib" || e == "rmeta") {
                stamp(&config.stamps, &moved)?;
            }
        }
    }
    Ok(ExitCode::from(status.code().map_or(101, |c| c as u8)))
}

/// The path in a rustc artifact notification (`{"$message_type":"artifact","artifact":...}`).
fn artifact(line: &str) -> Option<PathBuf> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    let path = message["artifact"].as_str().filter(|_| message["$message_type"] == "artifact")?;
    Some(PathBuf::from(path))
}

/// Moves `path` (in `from`) into `to`, rewriting a dep-info file's paths from `from` to `to`.
fn move_output(path: &Path, from: &Path, to: &Path) -> Result<PathBuf> {
    let target = to.join(path.file_name().context("an output without a name")?);
    if path.extension().is_some_and(|e| e == "d") {
        let text = std::fs::read_to_string(path)?;
        std::fs::write(&target, text.replace(&from.display().to_string(), &to.display().to_string()))?;
        std::fs::remove_file(path)?;
    } else if std::fs::rename(path, &target).is_err() {
        std::fs::copy(path, &target).with_context(|| format!("cannot move {} to {}", path.display(), to.display()))?;
    }
    Ok(target)
}

/// The toolchain's root, as rustc names it.
fn sysroot(rustc: &Path) -> Result<PathBuf> {
    let output = Command::new(rustc).args(["--print", "sysroot"]).output().context("cannot ask rustc its sysroot")?;
    if !output.status.success() {
        bail!("rustc --print sysroot failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// The compiled libraries in `dir` (`lib<name>-<hash>.rlib`, `.rmeta`, `.so`) whose crate is not
/// one of `hidden`.
fn libraries(dir: &Path, hidden: &[String]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let library = path.extension().is_some_and(|e| e == "rlib" || e == "rmeta" || e == "so");
            let crate_name = name.strip_prefix("lib").and_then(|n| n.rsplit_once('-')).map(|(c, _)| c);
            library && crate_name.is_some_and(|c| !hidden.iter().any(|h| h == c))
        })
        .collect()
}

/// Records that `library` was built confined.
fn stamp(stamps: &Path, library: &Path) -> Result<()> {
    std::fs::create_dir_all(stamps)?;
    std::fs::write(stamps.join(digest(library)?), library.display().to_string())?;
    Ok(())
}

/// The SHA-256 of a file, in hex.
fn digest(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `library` is one the wrapper built confined.
pub fn is_stamped(stamps: &Path, library: &Path) -> bool {
    digest(library).is_ok_and(|d| stamps.join(d).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_reads_the_arguments_it_changes() {
        let args: Vec<OsString> = [
            "--crate-name",
            "p",
            "src/lib.rs",
            "--out-dir",
            "/t/deps",
            "-C",
            "incremental=/t/inc",
            "-C",
            "opt-level=0",
            "-L",
            "dependency=/t/deps",
            "-L",
            "native=/x",
            "--extern",
            "engine=/t/deps/libengine-1.rmeta",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let parsed = Invocation::parse(&args);
        assert_eq!(parsed.out_dir, Some(PathBuf::from("/t/deps")));
        assert_eq!(parsed.incremental, Some(PathBuf::from("/t/inc")));
        assert_eq!(parsed.dependency_dirs, vec![PathBuf::from("/t/deps")]);
        let kept: Vec<String> = parsed.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            kept,
            [
                "--crate-name",
                "p",
                "src/lib.rs",
                "-C",
                "opt-level=0",
                "-L",
                "native=/x",
                "--extern",
                "engine=/t/deps/libengine-1.rmeta"
            ]
        );
    }

    #[test]
    fn only_libraries_of_crates_not_hidden_are_read() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "libengine-1.rlib",
            "libengine-1.rmeta",
            "libphase1_backends-2.rlib",
            "phase1-solutions-3",
            "engine-1.d",
            "libserde_derive-4.so",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let mut found: Vec<String> = libraries(dir.path(), &["phase1_backends".into()])
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        found.sort();
        assert_eq!(found, ["libengine-1.rlib", "libengine-1.rmeta", "libserde_derive-4.so"]);
    }
}
