//! `grader regrade CHECKOUT...`: grading that counts. Each learner's work is graded in a clean
//! copy of this workbook: the committed files of this checkout (never its working tree, so no
//! local edit to the grader or the solutions travels), with only `exercises/*/src` taken from the
//! learner, built in a fresh target directory, or in the one `--target-dir` names for the whole
//! class. A learner who edited the grader, the solutions, a manifest or the cargo configuration in
//! their own checkout changes nothing here.
//!
//! With `--target-dir DIR`, every learner's clean copy is made at one path, `DIR/clean-copy`
//! (emptied and unpacked again for each): cargo knows a workspace member by its path, so at the
//! same path the engine, the grader and the checks built for the first learner are fresh for the
//! next, and only the learners' crates (and the runners linking them) are compiled again.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context as _, Result, bail};
use grader::phases::PHASES;
use grader::workbook::Workbook;

/// Re-grades each checkout in `learners` and writes its `check all --json` results, stamped with
/// the learner's name (its directory's), to `out/<name>.json`, ready for `grader rollup out`.
pub fn run(root: Option<&Path>, learners: &[PathBuf], out: &Path, target_dir: Option<&Path>) -> Result<ExitCode> {
    let workbook = Workbook::find(root)?;
    let dirty = git(workbook.root(), &["status", "--porcelain", "--untracked-files=no"])?;
    if !dirty.trim().is_empty() {
        eprintln!(
            "note: this checkout has uncommitted changes; they are not used: the clean copy is its last commit \
             ({}).",
            git(workbook.root(), &["rev-parse", "--short", "HEAD"])?.trim()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    // The clean copy runs cargo in another directory: a relative DIR means one under this one.
    let target_dir = target_dir
        .map(std::path::absolute)
        .transpose()
        .context("cannot resolve --target-dir against the current directory")?;
    for learner in learners {
        let name = learner
            .canonicalize()
            .with_context(|| format!("{} is not a directory", learner.display()))?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "learner".into());
        eprintln!("Re-grading {name} ({}) in a clean copy...", learner.display());
        let results =
            regrade(&workbook, learner, &name, target_dir.as_deref()).with_context(|| format!("re-grading {name}"))?;
        let path = out.join(format!("{name}.json"));
        std::fs::write(&path, results).with_context(|| format!("cannot write {}", path.display()))?;
        println!("{name}: {}", path.display());
    }
    println!("Roll them up with `grader rollup {}`.", out.display());
    Ok(ExitCode::SUCCESS)
}

/// The `check all --json` results of one learner, graded in a clean copy.
fn regrade(workbook: &Workbook, learner: &Path, name: &str, target_dir: Option<&Path>) -> Result<Vec<u8>> {
    let copy = CleanCopy::new(target_dir)?;
    // The committed tree, not the working tree.
    let archive = Command::new("git")
        .arg("-C")
        .arg(workbook.root())
        .args(["archive", "--format=tar", "HEAD"])
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run git archive: the clean copy is made from this checkout's last commit")?;
    let untar =
        Command::new("tar").arg("-x").arg("-C").arg(copy.path()).stdin(archive.stdout.expect("piped")).status()?;
    if !untar.success() {
        bail!("cannot unpack this checkout's last commit into {}", copy.path().display());
    }
    for phase in PHASES {
        let (from, to) =
            (learner.join(phase.exercises_dir).join("src"), copy.path().join(phase.exercises_dir).join("src"));
        if !from.is_dir() {
            bail!("{} has no {}: is it a workbook checkout?", learner.display(), from.display());
        }
        std::fs::remove_dir_all(&to).with_context(|| format!("cannot clear {}", to.display()))?;
        copy_rust_sources(&from, &to)?;
    }
    // Without a shared target directory, a throw-away one: the learner's build starts from nothing.
    let fresh;
    let target = match target_dir {
        Some(dir) => dir,
        None => {
            fresh = tempfile::Builder::new().prefix("regrade-target-").tempdir()?;
            fresh.path()
        }
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["run", "-q", "-p", "grader", "--", "check", "all", "--json", "--learner", name])
        .current_dir(copy.path())
        .env("CARGO_TARGET_DIR", target)
        .env_remove("GRADER_ROOT")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo in the clean copy")?;
    // What it printed must be results; a learner whose work fails checks still gets them.
    grader::results::parse(&String::from_utf8_lossy(&output.stdout), learner)
        .with_context(|| format!("the clean copy's grader printed no results (exit {:?})", output.status.code()))?;
    Ok(output.stdout)
}

/// The clean copies' folder under a shared target directory (the instructor guide names it).
const SHARED_COPY: &str = "clean-copy";

/// The empty directory a learner's clean copy is unpacked into: `DIR/clean-copy` when the class
/// shares target directory DIR (the same path for every learner), else a fresh temporary one.
/// Either is removed when the grading is done.
enum CleanCopy {
    Shared(PathBuf),
    Fresh(tempfile::TempDir),
}

impl CleanCopy {
    fn new(target_dir: Option<&Path>) -> Result<CleanCopy> {
        let Some(dir) = target_dir else {
            return Ok(CleanCopy::Fresh(tempfile::Builder::new().prefix("regrade-").tempdir()?));
        };
        let path = dir.join(SHARED_COPY);
        if path.exists() {
            std::fs::remove_dir_all(&path).with_context(|| format!("cannot empty {}", path.display()))?;
        }
        std::fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(CleanCopy::Shared(path))
    }

    fn path(&self) -> &Path {
        match self {
            CleanCopy::Shared(path) => path,
            CleanCopy::Fresh(dir) => dir.path(),
        }
    }
}

impl Drop for CleanCopy {
    fn drop(&mut self) {
        if let CleanCopy::Shared(path) = self {
            // A copy left behind is emptied by the next regrade; nothing depends on this.
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// Copies the `.rs` files under `from` to `to`, keeping their layout: only source travels.
fn copy_rust_sources(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)?.flatten() {
        let (path, file_type) = (entry.path(), entry.file_type()?);
        if file_type.is_dir() {
            copy_rust_sources(&path, &to.join(entry.file_name()))?;
        } else if file_type.is_file() && path.extension().is_some_and(|e| e == "rs") {
            std::fs::copy(&path, to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new("git").arg("-C").arg(root).args(args).output().context("cannot run git")?;
    if !output.status.success() {
        bail!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every learner's copy is unpacked at one place under the shared target directory, the
    /// place the instructor guide names for its `--target-dir target/regrade`.
    #[test]
    fn the_shared_copy_is_where_the_guide_says() {
        let dir = tempfile::tempdir().unwrap();
        for _learner in 0..2 {
            let copy = CleanCopy::new(Some(dir.path())).unwrap();
            assert_eq!(copy.path(), dir.path().join(SHARED_COPY));
            assert!(copy.path().is_dir());
        }
        let guide = include_str!("../../../book/src/instructor-guide.md");
        assert!(guide.contains("--target-dir target/regrade\n"), "the guide's command");
        assert!(guide.contains(&format!("`target/regrade/{SHARED_COPY}`")), "the guide's sentence");
    }
}
