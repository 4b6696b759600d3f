//! Getting a phase's check runners: the subject's (the learner's crate, or the solutions with
//! `--solutions`) and the judge's (always the solutions), built with cargo from the workbook (only
//! that phase's crates, so one phase's compile error never blocks another), or taken prebuilt from
//! a pack made by `grader pack` on a machine with Rust, for a machine without it. The subject's
//! runner is copied into a directory of its own and run in the [sandbox](crate::sandbox).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};
use grader_harness::{Phase, Subject};

use serde::{Deserialize, Serialize};

use crate::compile;
use crate::isolation::Runner;
use crate::sandbox::{Places, Sandbox};
use crate::verdict::Grading;
use crate::workbook::Workbook;

/// The file that marks a directory as a pack of prebuilt runners.
pub const PACK_MANIFEST: &str = "grader-pack.json";

/// Why a runner is not available: the compiler's first error (with its `file:line`), or what
/// else went wrong.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildFailure {
    /// What to show the learner: the compiler's first error as it rendered it, or cargo's output.
    pub message: String,
    /// `file:line` of the first compiler error, when there is one.
    pub location: Option<String>,
}

/// Where runners come from.
#[derive(Debug)]
pub enum Runners {
    /// Built on demand with cargo (debug, or release with `--release`).
    Cargo {
        /// The workbook to build in.
        workbook: Workbook,
        /// Build with `--release`.
        release: bool,
    },
    /// Taken from a pack directory made by `grader pack`.
    Prebuilt(Pack),
}

impl Runners {
    /// The runner of `phase` for `subject`, building it if needed (the learner's crate compiled
    /// through `launcher`, this grader: see [`crate::compile`]).
    pub fn get(&self, phase: &Phase, subject: Subject, launcher: &Path) -> Result<PathBuf, BuildFailure> {
        match self {
            Runners::Cargo { workbook, release } => build_runner(workbook, phase, subject, *release, launcher),
            Runners::Prebuilt(pack) => pack.runner(phase, subject),
        }
    }

    /// The runners that grade `phase` for `subject`: the subject's and the judge's, each confined
    /// by the sandbox that `launcher` (this grader) sets up, each with a kernel cache of its own:
    /// `cache` for the subject, a `judge-cache` beside it for the judge, which the subject cannot
    /// write. The judge is confined too because it compiles and runs code the learner's process
    /// wrote (a kernel's source, an exported program): an `#include` of a file outside the
    /// sandbox fails there as it would in the learner's process.
    pub fn grading(
        &self,
        phase: &Phase,
        subject: Subject,
        launcher: &Path,
        cache: &Path,
    ) -> Result<Grading, BuildFailure> {
        let subject_exe = self.get(phase, subject, launcher)?;
        let judge_exe = self.get(phase, Subject::Solutions, launcher).map_err(|failure| BuildFailure {
            message: format!(
                "cannot build the reference runner that judges {}: {}\nThe workbook itself is damaged: restore solutions/ and grader/ from the repository.",
                phase.name, failure.message
            ),
            location: failure.location,
        })?;
        let (subject, subject_scratch) = confine(&subject_exe, launcher, cache)?;
        let (judge, judge_scratch) = confine(&judge_exe, launcher, &cache.with_file_name("judge-cache"))?;
        Ok(Grading { subject, judge, scratch: vec![subject_scratch, judge_scratch] })
    }
}

/// A sandboxed copy of the runner at `exe`: in a fresh directory holding only that copy, with a
/// private temporary directory and `cache` as the only places it may write.
fn confine(exe: &Path, launcher: &Path, cache: &Path) -> Result<(Runner, tempfile::TempDir), BuildFailure> {
    let setup = |what: &str, e: std::io::Error| BuildFailure {
        message: format!("set-up problem: cannot {what}: {e}. Is the disk full, or TMPDIR unwritable?"),
        location: None,
    };
    let scratch =
        tempfile::Builder::new().prefix("grader-").tempdir().map_err(|e| setup("create a temporary directory", e))?;
    let (bin, tmp) = (scratch.path().join("bin"), scratch.path().join("tmp"));
    for dir in [&bin, &tmp, &cache.to_path_buf()] {
        std::fs::create_dir_all(dir).map_err(|e| setup(&format!("create {}", dir.display()), e))?;
    }
    // A hard link where the file system allows one (a runner is a few hundred megabytes, and a
    // phase is graded with two): the sandbox reaches the runner through this directory only, to
    // read and execute it, never to write it.
    let copy = bin.join(exe.file_name().unwrap_or_default());
    std::fs::hard_link(exe, &copy)
        .or_else(|_| std::fs::copy(exe, &copy).map(drop))
        .map_err(|e| setup(&format!("copy the runner {}", exe.display()), e))?;
    let sandbox = Sandbox {
        launcher: launcher.to_path_buf(),
        places: Places {
            read_exec: vec![bin],
            executables: crate::sandbox::c_toolchain(),
            writable: vec![tmp.clone(), cache.to_path_buf()],
            ..Places::default()
        },
    };
    let environment =
        vec![("TMPDIR".into(), tmp.into_os_string()), ("ENGINE_CACHE_DIR".into(), cache.as_os_str().to_os_string())];
    Ok((Runner::new(copy).sandboxed(sandbox, environment), scratch))
}

/// The binary name of a phase's runner for a subject: `phase1-exercises`.
pub fn runner_bin(phase: &Phase, subject: Subject) -> String {
    format!("{}-{subject}", phase.name)
}

/// Builds the runner of `phase` for `subject` and returns its executable.
pub fn build_runner(
    workbook: &Workbook,
    phase: &Phase,
    subject: Subject,
    release: bool,
    launcher: &Path,
) -> Result<PathBuf, BuildFailure> {
    let bin = runner_bin(phase, subject);
    let mut args =
        vec!["-p", phase.runner_package, "--bin", &bin, "--no-default-features", "--features", subject.as_str()];
    if release {
        args.push("--release");
    }
    cargo_build(workbook, &args, &bin, launcher)
}

/// Runs `cargo build --message-format=json ARGS` in the workbook, compiling the learner's crates
/// in the sandbox through `launcher` ([`crate::compile`]), and returns the executable of bin
/// target `bin`, or the compiler's first error. A learner's crate that cargo found fresh but that
/// was not built in the sandbox (by `cargo test`, say) is cleaned and built again, confined.
pub fn cargo_build(workbook: &Workbook, args: &[&str], bin: &str, launcher: &Path) -> Result<PathBuf, BuildFailure> {
    let setup = |message: String| BuildFailure { message, location: None };
    let config = compile_config(workbook).map_err(|e| setup(format!("set-up problem: {e:#}")))?;
    let mut cleaned = false;
    loop {
        let (output, messages) = cargo(workbook, "build", args, Some((&config, launcher)))?;
        let unconfined = messages.learner_libraries(&config.crates).find(|l| !compile::is_stamped(&config.stamps, l));
        match (output.status.success(), unconfined, cleaned) {
            (true, Some(library), false) => {
                // Built outside the grader: clean that crate, so that cargo compiles it again.
                let package = package_of(&library, &config.crates).map_err(|e| setup(format!("{e:#}")))?;
                cargo(workbook, "clean", &["-p", &package], None)?;
                cleaned = true;
            }
            (true, Some(library), true) => {
                return Err(setup(format!(
                    "{} was not compiled in the grader's sandbox, even after cleaning it: is cargo's RUSTC_WRAPPER \
                     overridden in a .cargo/config.toml?",
                    library.display()
                )));
            }
            _ => return executable(args, bin, &output, messages),
        }
    }
}

/// The wrapper's configuration for `workbook`: every crate under `exercises/` is the learner's.
fn compile_config(workbook: &Workbook) -> anyhow::Result<compile::Config> {
    let crates = std::fs::read_dir(workbook.path("exercises"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    compile::Config::new(
        workbook.root(),
        crates,
        workspace_libraries(workbook)?,
        workbook.state_dir().join("sandboxed-builds"),
    )
}

/// The library names of the workspace's members, from `cargo metadata`.
fn workspace_libraries(workbook: &Workbook) -> anyhow::Result<Vec<String>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(workbook.root())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    anyhow::ensure!(output.status.success(), "cargo metadata failed in {}", workbook.root().display());
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let mut names = Vec::new();
    for target in metadata["packages"].as_array().into_iter().flatten().flat_map(|p| p["targets"].as_array()).flatten()
    {
        let kinds = target["kind"].as_array().into_iter().flatten().filter_map(serde_json::Value::as_str);
        if kinds.clone().any(|k| matches!(k, "lib" | "rlib" | "dylib" | "proc-macro"))
            && let Some(name) = target["name"].as_str()
        {
            names.push(name.replace('-', "_"));
        }
    }
    Ok(names)
}

/// The package name of the learner's crate that built `library`.
fn package_of(library: &Path, crates: &[PathBuf]) -> anyhow::Result<String> {
    let name = library.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for dir in crates {
        let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))?.parse()?;
        let package = manifest.get("package").and_then(|p| p.get("name")).and_then(toml::Value::as_str).unwrap_or("");
        let lib = manifest.get("lib").and_then(|l| l.get("name")).and_then(toml::Value::as_str);
        let lib = lib.map(str::to_string).unwrap_or_else(|| package.replace('-', "_"));
        if name.starts_with(&format!("lib{lib}-")) {
            return Ok(package.to_string());
        }
    }
    anyhow::bail!("{} belongs to none of the learner's crates", library.display())
}

/// Runs `cargo COMMAND --message-format=json ARGS` in the workbook (through the compile wrapper
/// when `wrapper` is given).
fn cargo(
    workbook: &Workbook,
    command: &str,
    args: &[&str],
    wrapper: Option<(&compile::Config, &Path)>,
) -> Result<(std::process::Output, BuildMessages), BuildFailure> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cargo = Command::new(&cargo);
    cargo.arg(command);
    if command == "build" {
        cargo.arg("--message-format=json");
    }
    cargo.args(args).current_dir(workbook.root()).stdin(Stdio::null());
    if let Some((config, launcher)) = wrapper {
        config
            .apply(&mut cargo, launcher)
            .map_err(|e| BuildFailure { message: format!("set-up problem: {e:#}"), location: None })?;
    }
    let output = cargo.output().map_err(|e| BuildFailure {
        message: format!(
            "cannot run cargo ({e}): install Rust (https://rustup.rs), or run checks built elsewhere with --prebuilt DIR"
        ),
        location: None,
    })?;
    let messages = parse_messages(&String::from_utf8_lossy(&output.stdout));
    Ok((output, messages))
}

/// The executable of bin target `bin` from a build's output, or why there is none.
fn executable(
    args: &[&str],
    bin: &str,
    output: &std::process::Output,
    messages: BuildMessages,
) -> Result<PathBuf, BuildFailure> {
    if let Some(executable) = messages.executable_of(bin).filter(|_| output.status.success()) {
        return Ok(executable);
    }
    Err(messages.first_error.unwrap_or_else(|| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim_start().starts_with("Compiling")).collect();
        BuildFailure {
            message: format!(
                "cargo build {} failed:\n{}",
                args.join(" "),
                lines[lines.len().saturating_sub(20)..].join("\n")
            ),
            location: None,
        }
    }))
}

/// What a build's JSON messages say: the artifacts built, and the first compiler error.
#[derive(Debug, Default)]
pub struct BuildMessages {
    executables: Vec<(String, PathBuf)>,
    /// Each crate's manifest and the files built for it.
    artifacts: Vec<(PathBuf, Vec<PathBuf>)>,
    /// The first error the compiler reported, if any.
    pub first_error: Option<BuildFailure>,
}

impl BuildMessages {
    /// The executable built for bin target `bin`.
    pub fn executable_of(&self, bin: &str) -> Option<PathBuf> {
        self.executables.iter().find(|(name, _)| name == bin).map(|(_, path)| path.clone())
    }

    /// The libraries (`.rlib`) built for the crates in `crates`.
    pub fn learner_libraries<'a>(&'a self, crates: &'a [PathBuf]) -> impl Iterator<Item = PathBuf> + 'a {
        self.artifacts
            .iter()
            .filter(|(manifest, _)| manifest.parent().is_some_and(|dir| crates.iter().any(|c| same_dir(c, dir))))
            .flat_map(|(_, files)| files.iter().filter(|f| f.extension().is_some_and(|e| e == "rlib")).cloned())
    }
}

/// Whether two paths name the same directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || a.canonicalize().ok().zip(b.canonicalize().ok()).is_some_and(|(a, b)| a == b)
}

/// How many lines of the compiler's rendered error to show.
const ERROR_LINES: usize = 30;

/// Reads the lines of `cargo build --message-format=json` output.
pub fn parse_messages(stdout: &str) -> BuildMessages {
    let mut messages = BuildMessages::default();
    for line in stdout.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        match message["reason"].as_str() {
            Some("compiler-artifact") => {
                if let (Some(name), Some(exe)) = (message["target"]["name"].as_str(), message["executable"].as_str()) {
                    messages.executables.push((name.to_string(), PathBuf::from(exe)));
                }
                if let Some(manifest) = message["manifest_path"].as_str() {
                    let files = message["filenames"].as_array().into_iter().flatten().filter_map(|f| f.as_str());
                    messages.artifacts.push((PathBuf::from(manifest), files.map(PathBuf::from).collect()));
                }
            }
            Some("compiler-message") if messages.first_error.is_none() => {
                messages.first_error = compiler_error(&message["message"]);
            }
            _ => {}
        }
    }
    messages
}

/// A compiler diagnostic of level `error` with a primary span, as a [`BuildFailure`].
fn compiler_error(diagnostic: &serde_json::Value) -> Option<BuildFailure> {
    if diagnostic["level"].as_str() != Some("error") {
        return None;
    }
    let spans = diagnostic["spans"].as_array()?;
    let primary = spans.iter().find(|s| s["is_primary"].as_bool() == Some(true))?;
    let file = primary["file_name"].as_str()?;
    let location = format!("{file}:{}", primary["line_start"].as_u64()?);
    let rendered = diagnostic["rendered"].as_str().unwrap_or_else(|| diagnostic["message"].as_str().unwrap_or(""));
    let lines: Vec<&str> = rendered.trim_end().lines().collect();
    let mut message = lines[..lines.len().min(ERROR_LINES)].join("\n");
    if lines.len() > ERROR_LINES {
        message.push_str("\n...");
    }
    if message.contains("Permission denied") {
        message.push_str(
            "\n\nThe grader compiles your crate in a sandbox that reads the workbook's exercises, engine and models, \
             but not solutions/, grader/, .git/ or the compiled runners: keep your code in your crate's own files.",
        );
    }
    if file.starts_with("grader/") {
        message.push_str(
            "\n\nThis error is in the grader's checks, which call your code: did a public signature change? \
             Keep the stubs' signatures as they are.",
        );
    }
    Some(BuildFailure {
        message: format!("does not compile; the compiler's first error:\n{message}"),
        location: Some(location),
    })
}

/// A pack: runners built elsewhere by `grader pack`, with their manifest.
#[derive(Debug)]
pub struct Pack {
    dir: PathBuf,
    /// What the pack holds.
    pub manifest: PackManifest,
}

/// The contents of `grader-pack.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct PackManifest {
    /// Which crates the subject runners were built against.
    pub subject: Subject,
    /// What the pack holds for each phase: the subject's runner.
    pub phases: BTreeMap<String, PackedPhase>,
    /// Each phase's judge: the runner built against the solutions.
    pub judges: BTreeMap<String, String>,
}

/// A phase in a pack: its runner's file name, or why it could not be built.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PackedPhase {
    /// The runner's file name in the pack directory.
    Runner(String),
    /// The phase's crate did not compile when packing.
    BuildError(BuildFailure),
}

impl Pack {
    /// Opens the pack in `dir`.
    pub fn open(dir: &Path) -> Result<Pack> {
        let path = dir.join(PACK_MANIFEST);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("{} is not a pack made by `grader pack` (no {PACK_MANIFEST})", dir.display()))?;
        let manifest = serde_json::from_str(&text).with_context(|| format!("{} is unreadable", path.display()))?;
        Ok(Pack { dir: dir.to_path_buf(), manifest })
    }

    /// The pack this grader executable lies in, if it was copied there by `grader pack`. A
    /// manifest beside a grader that cargo built (in a target directory) is no pack: `grader pack`
    /// never writes there, so it was put there by something else, such as a build script, and is
    /// ignored with a warning.
    pub fn beside_executable() -> Option<Pack> {
        Pack::beside(std::env::current_exe().ok()?.parent()?)
    }

    /// The pack in `dir`, unless `dir` is one of cargo's target directories (see
    /// [`Pack::beside_executable`]).
    pub fn beside(dir: &Path) -> Option<Pack> {
        if !dir.join(PACK_MANIFEST).is_file() {
            return None;
        }
        if dir.join(".fingerprint").exists() || dir.join("deps").exists() {
            eprintln!(
                "warning: ignoring {}: packs are made with `grader pack --out DIR` and never lie in cargo's \
                 target directory; something else wrote it (a build script?). Delete it.",
                dir.join(PACK_MANIFEST).display()
            );
            return None;
        }
        Pack::open(dir).ok()
    }

    /// Fails unless the pack was built for `subject`.
    pub fn expect_subject(&self, subject: Subject) -> Result<()> {
        if self.manifest.subject != subject {
            bail!(
                "the pack in {} holds runners for {}, not {subject}: make one with `grader pack --out DIR{}`",
                self.dir.display(),
                self.manifest.subject,
                if subject == Subject::Solutions { " --solutions" } else { "" }
            );
        }
        Ok(())
    }

    fn runner(&self, phase: &Phase, subject: Subject) -> Result<PathBuf, BuildFailure> {
        let missing = || BuildFailure {
            message: format!(
                "the pack in {} has no {subject} runner for {}: pack again",
                self.dir.display(),
                phase.name
            ),
            location: None,
        };
        if subject == Subject::Solutions {
            return self.manifest.judges.get(phase.name).map(|file| self.dir.join(file)).ok_or_else(missing);
        }
        match self.manifest.phases.get(phase.name) {
            Some(PackedPhase::Runner(file)) => Ok(self.dir.join(file)),
            Some(PackedPhase::BuildError(failure)) => Err(failure.clone()),
            None => Err(missing()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two lines of real `cargo build --message-format=json` output for a type error in an
    /// exercise, then the "aborting" summary that must not be taken for the first error.
    const BROKEN_BUILD: &str = r#"{"reason":"compiler-message","package_id":"path+file:///w/exercises/phase1-backends#0.1.0","manifest_path":"/w/exercises/phase1-backends/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"phase1_backends","src_path":"/w/exercises/phase1-backends/src/lib.rs","edition":"2024","doc":true,"doctest":true,"test":true},"message":{"rendered":"error[E0308]: mismatched types\n  --> exercises/phase1-backends/src/latency.rs:36:5\n   |\n36 |     7\n   |     ^ expected `Duration`, found integer\n","$message_type":"diagnostic","children":[],"code":{"code":"E0308","explanation":null},"level":"error","message":"mismatched types","spans":[{"byte_end":1500,"byte_start":1499,"column_end":6,"column_start":5,"expansion":null,"file_name":"exercises/phase1-backends/src/latency.rs","is_primary":true,"label":"expected `Duration`, found integer","line_end":36,"line_start":36,"suggested_replacement":null,"suggestion_applicability":null,"text":[]}]}}
{"reason":"compiler-message","package_id":"path+file:///w/exercises/phase1-backends#0.1.0","manifest_path":"/w/exercises/phase1-backends/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"phase1_backends","src_path":"/w/exercises/phase1-backends/src/lib.rs","edition":"2024","doc":true,"doctest":true,"test":true},"message":{"rendered":"error: aborting due to 1 previous error\n\n","$message_type":"diagnostic","children":[],"code":null,"level":"error","message":"aborting due to 1 previous error","spans":[]}}
{"reason":"build-finished","success":false}"#;

    #[test]
    fn the_first_compiler_error_keeps_its_file_and_line() {
        let messages = parse_messages(BROKEN_BUILD);
        let failure = messages.first_error.expect("an error");
        assert_eq!(failure.location.as_deref(), Some("exercises/phase1-backends/src/latency.rs:36"));
        assert!(failure.message.contains("error[E0308]: mismatched types"), "{}", failure.message);
        assert!(failure.message.contains("--> exercises/phase1-backends/src/latency.rs:36:5"), "{}", failure.message);
    }

    #[test]
    fn a_pack_in_cargos_target_directory_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = PackManifest { subject: Subject::Exercises, phases: BTreeMap::new(), judges: BTreeMap::new() };
        std::fs::write(dir.path().join(PACK_MANIFEST), serde_json::to_string(&manifest).unwrap()).unwrap();
        assert!(Pack::beside(dir.path()).is_some(), "a pack made by `grader pack` is used");
        // What a build script could drop beside target/debug/grader.
        std::fs::create_dir(dir.path().join("deps")).unwrap();
        assert!(Pack::beside(dir.path()).is_none());
    }

    #[test]
    fn warnings_are_not_errors_and_executables_are_found() {
        let stdout = r#"{"reason":"compiler-message","message":{"level":"warning","rendered":"warning: unused","spans":[{"is_primary":true,"file_name":"a.rs","line_start":1}]}}
{"reason":"compiler-artifact","target":{"name":"phase1-exercises"},"executable":"/w/target/debug/phase1-exercises"}"#;
        let messages = parse_messages(stdout);
        assert!(messages.first_error.is_none());
        assert_eq!(messages.executable_of("phase1-exercises"), Some(PathBuf::from("/w/target/debug/phase1-exercises")));
    }
}
