//! Where the workbook is: its root directory (found from the current directory upward, or given
//! with `--root` / `GRADER_ROOT`), its `.grader/` state directory, and how the learner invokes the
//! grader, so that printed commands can be pasted as they are.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// The environment variable naming the workbook root, for a `grader` installed with
/// `cargo install --path grader` and run outside the workbook.
pub const ROOT_ENV: &str = "GRADER_ROOT";

/// A workbook checkout.
#[derive(Clone, Debug)]
pub struct Workbook {
    root: PathBuf,
}

impl Workbook {
    /// The workbook at `explicit` (from `--root`), else at `$GRADER_ROOT`, else the nearest
    /// directory at or above the current one that holds `Cargo.toml` and `exercises/`.
    pub fn find(explicit: Option<&Path>) -> Result<Workbook> {
        if let Some(root) = explicit.map(Path::to_path_buf).or_else(|| std::env::var_os(ROOT_ENV).map(PathBuf::from)) {
            if !Workbook::is_root(&root) {
                bail!("{} is not a workbook root (it needs Cargo.toml and exercises/)", root.display());
            }
            return Ok(Workbook { root: root.canonicalize()? });
        }
        let cwd = std::env::current_dir()?;
        match cwd.ancestors().find(|dir| Workbook::is_root(dir)) {
            Some(root) => Ok(Workbook { root: root.to_path_buf() }),
            None => bail!(
                "no workbook found at or above {}: run the grader inside the workbook, or pass --root DIR (or set {ROOT_ENV})",
                cwd.display()
            ),
        }
    }

    fn is_root(dir: &Path) -> bool {
        dir.join("Cargo.toml").is_file() && dir.join("exercises").is_dir()
    }

    /// The workbook's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `root/relative`.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// The grader's own state (hints seen, last results, backups), kept out of git by `.gitignore`.
    pub fn state_dir(&self) -> PathBuf {
        self.root.join(".grader")
    }
}

/// How to spell a grader command for the learner: `cargo grader` when run through the cargo
/// alias, `grader` otherwise.
pub fn command_name() -> &'static str {
    if std::env::var_os("CARGO").is_some() { "cargo grader" } else { "grader" }
}
