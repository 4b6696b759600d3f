//! `grader dev stubs`: `--check` passes on the workbook as shipped and fails, naming the file and
//! showing the difference, when a stub drifts from its solution, a solution changes without its
//! stub, a file no solution makes appears, or the markers do not pair up; writing puts the stubs
//! back and keeps an edited file as a backup.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A copy of the workbook's parts that `dev stubs` reads: the root manifest, the exercise and
/// solution sources, and the table of shipped stubs.
fn workbook() -> (tempfile::TempDir, PathBuf) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    std::fs::copy(source.join("Cargo.toml"), root.join("Cargo.toml")).unwrap();
    std::fs::create_dir_all(root.join("grader")).unwrap();
    std::fs::copy(source.join("grader/shipped-stubs.sha256"), root.join("grader/shipped-stubs.sha256")).unwrap();
    for side in ["exercises", "solutions"] {
        for crate_dir in std::fs::read_dir(source.join(side)).unwrap().flatten().filter(|e| e.path().is_dir()) {
            copy_dir(&crate_dir.path().join("src"), &root.join(side).join(crate_dir.file_name()).join("src"));
        }
    }
    (dir, root)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

fn stubs(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_grader"))
        .args(["dev", "stubs"])
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const LATENCY: &str = "exercises/phase1-backends/src/latency.rs";
const LATENCY_SOLUTION: &str = "solutions/phase1-backends/src/latency.rs";

#[test]
fn check_passes_on_the_workbook_as_shipped() {
    let (_dir, root) = workbook();
    let output = stubs(&root, &["--check"]);
    assert!(output.status.success(), "{}{}", stdout(&output), String::from_utf8_lossy(&output.stderr));
    assert!(stdout(&output).contains("shipped-stubs.sha256 are those the solutions give"), "{}", stdout(&output));
}

#[test]
fn a_solution_module_of_its_own_has_no_stub() {
    let (_dir, root) = workbook();
    let helper = "// ANCHOR: solution-only\n//! A module only the solution has.\npub fn helper() {}\n// ANCHOR_END: solution-only\n";
    std::fs::write(root.join("solutions/phase1-backends/src/helper.rs"), helper).unwrap();
    let output = stubs(&root, &["--check"]);
    assert!(output.status.success(), "{}", stdout(&output));
    assert!(!root.join("exercises/phase1-backends/src/helper.rs").exists());
}

#[test]
fn check_fails_on_a_drifted_stub_and_writing_restores_it_keeping_the_edit() {
    let (_dir, root) = workbook();
    let shipped = std::fs::read(root.join(LATENCY)).unwrap();
    let drifted =
        String::from_utf8(shipped.clone()).unwrap().replacen("    todo!()", "    todo!(\"edited by hand\")", 1);
    std::fs::write(root.join(LATENCY), &drifted).unwrap();

    let output = stubs(&root, &["--check"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("{LATENCY} is not the stub of {LATENCY_SOLUTION}:")), "{text}");
    assert!(text.contains("-    todo!(\"edited by hand\")\n+    todo!()\n"), "the diff: {text}");
    assert!(text.contains("1 file(s) differ"), "{text}");
    assert_eq!(std::fs::read_to_string(root.join(LATENCY)).unwrap(), drifted, "--check writes nothing");

    let output = stubs(&root, &[]);
    assert!(output.status.success(), "{}", stdout(&output));
    assert_eq!(std::fs::read(root.join(LATENCY)).unwrap(), shipped);
    let backups: Vec<PathBuf> =
        std::fs::read_dir(root.join(".grader/backups")).unwrap().flatten().map(|e| e.path().join(LATENCY)).collect();
    assert_eq!(backups.len(), 1, "{}", stdout(&output));
    assert_eq!(std::fs::read_to_string(&backups[0]).unwrap(), drifted, "the edit is kept, byte for byte");
    assert!(stubs(&root, &["--check"]).status.success());
}

#[test]
fn check_fails_on_a_solution_changed_without_its_stub() {
    let (_dir, root) = workbook();
    let solution = std::fs::read_to_string(root.join(LATENCY_SOLUTION)).unwrap();
    let changed = solution.replacen("/// ", "/// Changed. ", 1);
    assert_ne!(changed, solution);
    std::fs::write(root.join(LATENCY_SOLUTION), changed).unwrap();
    let output = stubs(&root, &["--check"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("{LATENCY} is not the stub of {LATENCY_SOLUTION}")), "{text}");
    assert!(text.contains("grader/shipped-stubs.sha256 is not the hashes of the stubs"), "{text}");
    assert!(text.contains("2 file(s) differ"), "{text}");
}

#[test]
fn check_fails_on_an_exercise_file_no_solution_makes() {
    let (_dir, root) = workbook();
    std::fs::write(root.join("exercises/phase1-backends/src/extra.rs"), "pub fn extra() {}\n").unwrap();
    let output = stubs(&root, &["--check"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("exercises/phase1-backends/src/extra.rs is made by no solution file: solutions/phase1-backends/src/extra.rs does not exist"),
        "{text}"
    );
}

#[test]
fn markers_that_do_not_pair_up_are_an_error_with_file_and_line() {
    let (_dir, root) = workbook();
    std::fs::write(root.join(LATENCY_SOLUTION), "pub fn median() -> u32 {\n    // ANCHOR: solution\n    1\n}\n")
        .unwrap();
    let output = stubs(&root, &["--check"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{LATENCY_SOLUTION}: line 2: the `solution` region is never closed")), "{stderr}");
}
