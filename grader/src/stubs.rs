//! The exercise crates' sources, generated from the solutions, and the table of their hashes.
//!
//! Every file of `solutions/phaseN-*/src/` is the source of its twin in `exercises/phaseN-*/src/`
//! (`cargo grader dev stubs` writes them; `--check`, run by CI, fails when one drifts). The stub
//! is the solution file with what the learner writes taken out, marked by comments that are also
//! mdBook anchors, so a book page that includes a region of either file never shows them:
//!
//! ```text
//! /// The median of `samples` ...               (outside the markers: copied as it is, doc and all)
//! pub fn median(samples: &[Duration]) -> Duration {
//!     // ANCHOR: solution                        (from here ...
//!     let mut sorted = samples.to_vec();
//!     ...
//!     // ANCHOR_END: solution                    ... to here: `todo!()` in the stub)
//! }
//! ```
//!
//! - `// ANCHOR: solution` ... `// ANCHOR_END: solution`: the lines between become `todo!()`, at
//!   the markers' indentation, or, when the region holds `// stub:` lines, those lines.
//! - `// stub: TEXT`: the line `TEXT` in the stub (at the comment's indentation), and a comment
//!   in the solution: a struct's `// Your fields.`, a `todo!("with a message")`, an import or
//!   `#![allow(...)]` only the stub needs.
//! - `// ANCHOR: solution-only` ... `// ANCHOR_END: solution-only`: left out of the stub (a
//!   helper the solution uses), and one blank line with it where two would meet. A solution file that leaves nothing
//!   (one such region) has no stub: a module of the solution's own, whose `mod` line in the
//!   solution's `lib.rs` is in such a region too.
//!
//! Other anchors (`// ANCHOR: median`, for the book) are copied, so they must not sit inside a
//! solution region. `grader/shipped-stubs.sha256` (written with the stubs, in the format of
//! `sha256sum`) holds the SHA-256 of every stub as shipped: `reset` restores exactly what was
//! shipped (not a learner's commit that still holds a `todo!()`, nor a copy the grader took after
//! the learner had started), and the [audit](crate::audit) need not read a file the learner has
//! not changed.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use sha2::{Digest, Sha256};

use crate::phases::PHASES;

/// Where the table of shipped stubs lives, relative to the workbook root.
pub const TABLE: &str = "grader/shipped-stubs.sha256";

/// The table as this grader was built with it.
const SHIPPED: &str = include_str!("../shipped-stubs.sha256");

/// One generated stub.
#[derive(Clone, Debug, PartialEq)]
pub struct Stub {
    /// The solution file it is made from, relative to the workbook root.
    pub solution: String,
    /// The exercise file it is, relative to the workbook root.
    pub exercise: String,
    /// Its text.
    pub text: String,
}

/// A solution file whose markers do not pair up.
#[derive(Debug, PartialEq)]
pub struct MarkerError {
    /// The 1-based line of the offending marker (the opening one for a region never closed).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for MarkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// What a region leaves in the stub.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// `todo!()`, or its `// stub:` lines.
    Solution,
    /// Nothing.
    SolutionOnly,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Solution => "solution",
            Kind::SolutionOnly => "solution-only",
        }
    }
}

/// A region being read: its kind, where it opened, its indentation and its `// stub:` lines.
struct Region {
    kind: Kind,
    line: usize,
    indent: String,
    stub: Vec<String>,
}

/// The stub of a solution file's text (see the module docs for the markers).
pub fn stub_of(solution: &str) -> Result<String, MarkerError> {
    let mut out: Vec<String> = Vec::new();
    let mut open: Option<Region> = None;
    // A `solution-only` region was just left out right after a blank line: a blank line next
    // would make two in a row.
    let mut after_blank_and_removed = false;
    let error = |line: usize, message: String| Err(MarkerError { line, message });
    // Splitting on '\n' keeps the text after the last newline (empty when the file ends with
    // one), so joining the lines back gives the file's own ending.
    for (index, line) in solution.split('\n').enumerate() {
        let number = index + 1;
        let trimmed = line.trim();
        let indent = &line[..line.len() - line.trim_start().len()];
        if let Some(kind) = marker(trimmed, "// ANCHOR: ") {
            if let Some(region) = &open {
                return error(
                    number,
                    format!("a `{}` region opens inside the one opened at line {}", kind.name(), region.line),
                );
            }
            open = Some(Region { kind, line: number, indent: indent.to_string(), stub: Vec::new() });
        } else if let Some(kind) = marker(trimmed, "// ANCHOR_END: ") {
            let Some(region) = open.take() else {
                return error(number, format!("`ANCHOR_END: {}` closes no region", kind.name()));
            };
            if region.kind != kind {
                return error(
                    number,
                    format!(
                        "`ANCHOR_END: {}` closes the `{}` region of line {}",
                        kind.name(),
                        region.kind.name(),
                        region.line
                    ),
                );
            }
            match kind {
                Kind::Solution if region.stub.is_empty() => out.push(format!("{}todo!()", region.indent)),
                Kind::Solution => out.extend(region.stub),
                Kind::SolutionOnly => {
                    after_blank_and_removed = out.last().is_some_and(|l| l.trim().is_empty());
                    continue;
                }
            }
            after_blank_and_removed = false;
        } else if let Some(text) = trimmed.strip_prefix("// stub:") {
            let text = text.strip_prefix(' ').unwrap_or(text);
            let stub_line = if text.is_empty() { String::new() } else { format!("{indent}{text}") };
            match &mut open {
                None => {
                    out.push(stub_line);
                    after_blank_and_removed = false;
                }
                Some(region) if region.kind == Kind::Solution => region.stub.push(stub_line),
                Some(region) => {
                    return error(
                        number,
                        format!("a `// stub:` line inside the `solution-only` region of line {}", region.line),
                    );
                }
            }
        } else if let Some(region) = &open {
            if trimmed.contains("ANCHOR: ") || trimmed.contains("ANCHOR_END: ") {
                return error(
                    number,
                    format!(
                        "a book anchor inside the `{}` region of line {} would be missing from the stub",
                        region.kind.name(),
                        region.line
                    ),
                );
            }
        } else if !(after_blank_and_removed && trimmed.is_empty()) {
            out.push(line.to_string());
            after_blank_and_removed = false;
        }
    }
    match open {
        Some(region) => error(region.line, format!("the `{}` region is never closed", region.kind.name())),
        None => Ok(out.join("\n")),
    }
}

/// The region kind a marker line (already trimmed) opens or closes, after `prefix`.
fn marker(trimmed: &str, prefix: &str) -> Option<Kind> {
    match trimmed.strip_prefix(prefix)? {
        "solution" => Some(Kind::Solution),
        "solution-only" => Some(Kind::SolutionOnly),
        _ => None,
    }
}

/// The stub of every solution file of every phase, in path order.
pub fn generate(root: &Path) -> Result<Vec<Stub>> {
    let mut stubs = Vec::new();
    for phase in PHASES {
        let solutions = root.join(phase.solutions_dir);
        for file in rust_files(&solutions.join("src"))? {
            let inside = file.strip_prefix(&solutions).expect("listed under the crate").display().to_string();
            let solution = format!("{}/{inside}", phase.solutions_dir);
            let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {solution}"))?;
            let text = stub_of(&text).map_err(|e| anyhow::anyhow!("{solution}: {e}"))?;
            if text.trim().is_empty() {
                continue;
            }
            stubs.push(Stub { solution, exercise: format!("{}/{inside}", phase.exercises_dir), text });
        }
    }
    Ok(stubs)
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The table of `stubs`, as `TABLE` holds it: `<sha256>  <exercise file>` per line, as
/// `sha256sum` writes it (`sha256sum -c grader/shipped-stubs.sha256` at the workbook root
/// tells which stubs are untouched).
pub fn table(stubs: &[Stub]) -> String {
    stubs.iter().map(|s| format!("{}  {}\n", sha256(s.text.as_bytes()), s.exercise)).collect()
}

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `bytes` are the file `relative` (relative to the workbook root) as shipped.
pub fn is_shipped(relative: &str, bytes: &[u8]) -> bool {
    let hash = sha256(bytes);
    SHIPPED.lines().filter_map(|line| line.split_once("  ")).any(|(h, path)| path == relative && h == hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stub(text: &str) -> String {
        stub_of(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn refused(text: &str) -> MarkerError {
        stub_of(text).expect_err("the markers are wrong")
    }

    #[test]
    fn a_solution_region_becomes_todo_at_its_indentation() {
        let solution = "/// Doc.\npub fn f() -> u32 {\n    // ANCHOR: solution\n    let x = 1;\n    x + 1\n    // ANCHOR_END: solution\n}\n";
        assert_eq!(stub(solution), "/// Doc.\npub fn f() -> u32 {\n    todo!()\n}\n");
    }

    #[test]
    fn stub_lines_replace_their_region_or_stand_alone() {
        let solution = "\
//! Crate.
// stub: #![allow(dead_code)]
// stub:
pub struct S {
    // ANCHOR: solution
    // stub: // Your fields.
    // stub:     indented further
    field: u32,
    // ANCHOR_END: solution
}
";
        assert_eq!(
            stub(solution),
            "//! Crate.\n#![allow(dead_code)]\n\npub struct S {\n    // Your fields.\n        indented further\n}\n"
        );
    }

    #[test]
    fn a_solution_only_region_leaves_no_two_blank_lines_in_a_row() {
        let solution = "fn a() {}\n\n// ANCHOR: solution-only\nfn helper() {}\n// ANCHOR_END: solution-only\n\nfn b() {}\n\n// ANCHOR: solution-only\nfn last() {}\n// ANCHOR_END: solution-only\n";
        assert_eq!(stub(solution), "fn a() {}\n\nfn b() {}\n");
        let note = "fn a() {}\n\n// ANCHOR: solution-only\n/// A note for the solution.\n// ANCHOR_END: solution-only\n/// Doc.\nfn b() {}\n";
        assert_eq!(stub(note), "fn a() {}\n\n/// Doc.\nfn b() {}\n");
        let tight = "fn a() {}\n// ANCHOR: solution-only\nfn helper() {}\n// ANCHOR_END: solution-only\n\nfn b() {}\n";
        assert_eq!(stub(tight), "fn a() {}\n\nfn b() {}\n");
    }

    #[test]
    fn book_anchors_and_everything_else_are_copied_byte_for_byte() {
        let solution = "// ANCHOR: median\r\nfn median() {}\t \n// ANCHOR_END: median\n\u{e9}";
        assert_eq!(stub(solution), solution);
        assert_eq!(stub("no newline at the end"), "no newline at the end");
    }

    #[test]
    fn markers_that_do_not_pair_up_are_refused_with_their_line() {
        let unclosed = refused("fn f() {\n    // ANCHOR: solution\n    1\n}\n");
        assert_eq!((unclosed.line, unclosed.message.as_str()), (2, "the `solution` region is never closed"));
        let stray = refused("// ANCHOR_END: solution\n");
        assert_eq!((stray.line, stray.message.as_str()), (1, "`ANCHOR_END: solution` closes no region"));
        let nested = refused("// ANCHOR: solution\n// ANCHOR: solution-only\n");
        assert_eq!(nested.line, 2);
        assert!(nested.message.contains("opens inside the one opened at line 1"), "{nested}");
        let crossed = refused("// ANCHOR: solution-only\n// ANCHOR_END: solution\n");
        assert!(crossed.message.contains("closes the `solution-only` region of line 1"), "{crossed}");
        let anchor =
            refused("// ANCHOR: solution\n// ANCHOR: median\n1\n// ANCHOR_END: median\n// ANCHOR_END: solution\n");
        assert!(anchor.message.contains("book anchor"), "{anchor}");
        let stub_in_only = refused("// ANCHOR: solution-only\n// stub: x\n// ANCHOR_END: solution-only\n");
        assert!(stub_in_only.message.contains("`// stub:` line inside the `solution-only` region"), "{stub_in_only}");
    }

    /// The table the grader is built with is the one the solutions give: a solution changed
    /// without `cargo grader dev stubs` fails here (the exercise files themselves are the
    /// learner's, so `dev stubs --check` in CI compares those).
    #[test]
    fn the_shipped_table_is_generated_from_the_solutions() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workbook root");
        let stubs = generate(root).unwrap();
        assert!(stubs.len() > 25, "{} stubs", stubs.len());
        assert!(
            SHIPPED == table(&stubs),
            "{TABLE} is not the table of the solutions' stubs: run `cargo grader dev stubs`"
        );
        for stub in &stubs {
            assert!(is_shipped(&stub.exercise, stub.text.as_bytes()), "{}", stub.exercise);
            assert!(!stub.text.contains("ANCHOR: solution") && !stub.text.contains("// stub:"), "{}", stub.exercise);
        }
    }

    #[test]
    fn bytes_are_hashed_as_they_are() {
        assert_eq!(sha256(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_ne!(sha256(b"a\n"), sha256(b"a\r\n"));
    }
}
