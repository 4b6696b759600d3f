//! `grader reset` never loses a byte: backups are the file's bytes (invalid UTF-8 too), two resets
//! in one second keep two backups, the stub restored is the one the workbook shipped (not a
//! learner's commit that still holds a `todo!()`), and a copy taken after the learner started is
//! never taken for the stub.

use std::path::{Path, PathBuf};
use std::process::Command;

use grader::state::State;
use grader::workbook::Workbook;

const STUB: &str = "exercises/phase1-backends/src/latency.rs";

/// The shipped stub's bytes, from this repository's history, or `None` outside a git checkout.
fn shipped_stub() -> Option<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let log =
        Command::new("git").arg("-C").arg(root).args(["log", "--all", "--format=%H", "--", STUB]).output().ok()?;
    String::from_utf8(log.stdout).ok()?.lines().find_map(|rev| {
        let shown = Command::new("git").arg("-C").arg(root).args(["show", &format!("{rev}:{STUB}")]).output().ok()?;
        grader::stubs::is_shipped(STUB, &shown.stdout).then_some(shown.stdout)
    })
}

/// A minimal workbook in a temporary directory holding `stub` at [`STUB`].
fn workbook(stub: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    std::fs::write(root.join("Cargo.toml"), "[workspace]\n").unwrap();
    std::fs::create_dir_all(root.join(STUB).parent().unwrap()).unwrap();
    std::fs::write(root.join(STUB), stub).unwrap();
    (dir, root)
}

fn git(root: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["-c", "user.name=learner", "-c", "user.email=l@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(status.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&status.stderr));
}

fn reset(root: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_grader")).args(["reset", "latency", "--root"]).arg(root).output().unwrap()
}

/// Every backup of [`STUB`] under the workbook, as bytes.
fn backups(root: &Path) -> Vec<Vec<u8>> {
    let dir = root.join(".grader/backups");
    let mut found: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(STUB))
        .map(|p| (p.clone(), std::fs::read(p).unwrap()))
        .collect();
    found.sort();
    found.into_iter().map(|(_, bytes)| bytes).collect()
}

#[test]
fn reset_keeps_every_byte_and_restores_the_shipped_stub() {
    let Some(stub) = shipped_stub() else {
        eprintln!("skipped: not in a git checkout holding the shipped stub");
        return;
    };
    let (_dir, root) = workbook(&stub);
    git(&root, &["init", "-q"]);
    git(&root, &["add", "."]);
    git(&root, &["commit", "-qm", "the workbook as shipped"]);
    // The learner's own commit still holds a todo!(): it is not the stub.
    let mut started = stub.clone();
    started.extend_from_slice(b"\npub fn helper() -> u32 { todo!() }\n");
    std::fs::write(root.join(STUB), &started).unwrap();
    git(&root, &["commit", "-qam", "half way"]);
    // Then a file that is not UTF-8 at all.
    let not_utf8 = b"fn f() {}\n\xff\xfe latin-1 \xe9\n".to_vec();
    std::fs::write(root.join(STUB), &not_utf8).unwrap();

    let out = reset(&root);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(root.join(STUB)).unwrap(), stub, "the shipped stub, not the learner's commit");
    assert_eq!(backups(&root), vec![not_utf8.clone()], "the backup is the file's bytes");

    // Two resets in the same second keep both versions.
    for version in [b"first version\n".to_vec(), b"second version\n".to_vec()] {
        std::fs::write(root.join(STUB), &version).unwrap();
        assert!(reset(&root).status.success());
    }
    assert_eq!(backups(&root), vec![not_utf8, b"first version\n".to_vec(), b"second version\n".to_vec()]);
}

#[test]
fn a_learners_edit_is_never_kept_as_the_pristine_copy() {
    let Some(stub) = shipped_stub() else {
        eprintln!("skipped: not in a git checkout holding the shipped stub");
        return;
    };
    // No git: the grader first sees a file the learner has already started.
    let mut started = stub.clone();
    started.extend_from_slice(b"// my notes; todo!() still below\n");
    let (_dir, root) = workbook(&started);
    let workbook = Workbook::find(Some(&root)).unwrap();
    State::of(&workbook).remember_pristine(&workbook).unwrap();
    let out = reset(&root);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot find the stub"), "{out:?}");
    assert_eq!(std::fs::read(root.join(STUB)).unwrap(), started, "nothing was overwritten");

    // Seen as shipped first, the copy is kept and restores it.
    std::fs::write(root.join(STUB), &stub).unwrap();
    State::of(&workbook).remember_pristine(&workbook).unwrap();
    std::fs::write(root.join(STUB), &started).unwrap();
    assert!(reset(&root).status.success());
    assert_eq!(std::fs::read(root.join(STUB)).unwrap(), stub);
    assert_eq!(backups(&root), vec![started]);
}
