//! The grader's output as the book shows it, checked against what the grader declares and what
//! the stubs hold, so that a stub regenerated, a check added or a message reworded fails here
//! rather than leaving a page that no longer matches the learner's screen:
//!
//! - every `todo!() at FILE:LINE` and `Next: write ... in FILE:LINE` names a line holding a
//!   `todo!(` (and the next step names the phase's first core exercise);
//! - each phase's table header, rows and score line agree with the phase's declaration in
//!   `grader/checks/phaseN` (exercises, checks, which need a GPU, which are stretch);
//! - any other `FILE.rs:LINE` the prose quotes lies inside its file;
//! - phase 1's failing case is printed as the grader prints it (its `Case` struct's fields);
//! - what the book says of shrinking (the learner's run shrinks a failing input, the judge shows
//!   it as drawn) is what the harness prints.

use std::fs;
use std::path::{Path, PathBuf};

use grader_harness::Phase;

const PHASES: [&Phase; 5] =
    [&checks_phase1::PHASE, &checks_phase2::PHASE, &checks_phase3::PHASE, &checks_phase4::PHASE, &checks_phase5::PHASE];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every page of the book, as (its path under book/src, its text).
fn pages() -> Vec<(String, String)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<PathBuf> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let name = path.strip_prefix(base).unwrap().display().to_string();
                out.push((name, fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let src = root().join("book/src");
    let mut out = Vec::new();
    walk(&src, &src, &mut out);
    out
}

/// The `FILE:LINE` that follows each occurrence of `marker` in `text`.
fn locations_after<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    text.match_indices(marker)
        .map(|(at, _)| {
            let rest = &text[at + marker.len()..];
            rest.split(|c: char| c.is_whitespace() || c == '│' || c == '`' || c == '"').next().unwrap_or_default()
        })
        .filter(|l| l.contains(".rs:"))
        .collect()
}

/// The text of line `line` (from 1) of the workbook's file `file`, if it has that line.
fn line_of(file: &str, line: usize) -> Option<String> {
    let text = fs::read_to_string(root().join(file)).ok()?;
    text.lines().nth(line.checked_sub(1)?).map(str::to_string)
}

fn split_location(location: &str) -> (&str, usize) {
    let (file, line) = location.rsplit_once(':').unwrap_or_else(|| panic!("`{location}` has no line"));
    (file, line.parse().unwrap_or_else(|_| panic!("`{location}`: the line is not a number")))
}

#[test]
fn todo_locations_name_a_todo() {
    let mut problems = Vec::new();
    for (page, text) in pages() {
        for marker in ["todo!() at ", "Next: write `"] {
            for location in locations_after(&text, marker).into_iter().chain(next_step_locations(&text, marker)) {
                let (file, line) = split_location(location);
                match line_of(file, line) {
                    Some(l) if l.contains("todo!(") => {}
                    Some(l) => problems.push(format!("{page}: {location} is `{}`, not a todo!()", l.trim())),
                    None => problems.push(format!("{page}: {location} is not a line of the workbook")),
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `Next: write `X` in FILE:LINE`: the location after the exercise's name.
fn next_step_locations<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    if marker != "Next: write `" {
        return Vec::new();
    }
    text.match_indices(marker)
        .filter_map(|(at, _)| text[at..].split_once("` in ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect()
}

#[test]
fn each_phase_table_and_score_are_the_graders() {
    let mut problems = Vec::new();
    for phase in PHASES {
        let page = phase.book_page.trim_start_matches("book/src/");
        let text = fs::read_to_string(root().join(phase.book_page)).unwrap();
        let header = format!("{} · {} ({})", phase.name, phase.title, phase.exercises_dir);
        if !text.contains(&header) {
            problems.push(format!("{page}: no table header `{header}`"));
        }
        let core: Vec<_> = phase.exercises.iter().filter(|e| !e.stretch).collect();
        let stretch = phase.exercises.len() - core.len();
        let required: Vec<_> = core.iter().flat_map(|e| e.checks.iter()).collect();
        let skipped = required.iter().filter(|c| c.needs_gpu).count();
        let note = if skipped > 0 { format!(", {skipped} skipped") } else { String::new() };
        let score = format!(
            "Score: 0/{} exercises done (0/{} required checks passed{note}), stretch 0/{stretch}",
            core.len(),
            required.len() - skipped
        );
        for line in text.lines().filter(|l| l.starts_with("Score: ")) {
            if line != score {
                problems.push(format!("{page}: `{line}`, but the grader prints `{score}` on a fresh checkout"));
            }
        }
        for line in text.lines().filter(|l| l.starts_with("Next: write `")) {
            let named = line.trim_start_matches("Next: write `").split('`').next().unwrap_or_default();
            if named != core[0].name {
                problems.push(format!("{page}: the next step names `{named}`, the grader `{}`", core[0].name));
            }
        }
        // Table rows: │ exercise │ check │ status │ result │
        for line in text.lines().filter(|l| l.starts_with('│')) {
            let cells: Vec<&str> = line.trim_matches('│').split('│').map(str::trim).collect();
            let [exercise, check, status, ..] = cells[..] else { continue };
            if exercise == "exercise" || exercise == "..." {
                continue;
            }
            let name = exercise.trim_end_matches(" (stretch)");
            let Some(declared) = phase.exercise(name) else {
                problems.push(format!("{page}: the table names an exercise `{name}` the grader does not have"));
                continue;
            };
            if exercise.ends_with(" (stretch)") != declared.stretch {
                problems.push(format!("{page}: `{exercise}` is marked as the grader does not mark it"));
            }
            let Some(spec) = declared.checks.iter().find(|c| c.id == check) else {
                problems.push(format!("{page}: `{name}` has no check `{check}`"));
                continue;
            };
            let expected = if spec.needs_gpu { "– skipped" } else { "· not started" };
            if status != expected {
                problems.push(format!("{page}: `{check}` reads `{status}`; on a fresh CPU checkout, `{expected}`"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn quoted_source_lines_lie_in_their_files() {
    let mut problems = Vec::new();
    for (page, text) in pages() {
        for word in text.split(|c: char| c.is_whitespace() || "`(),│\"".contains(c)) {
            let Some((file, line)) = word.split_once(".rs:") else { continue };
            let line: String = line.chars().take_while(char::is_ascii_digit).collect();
            let (Ok(line), false) = (line.parse::<usize>(), file.contains('<')) else { continue };
            let file = format!("{file}.rs");
            if !root().join(&file).is_file() {
                // A file named in an example of output from elsewhere (`model.rs:12`) is not ours.
                if file.contains('/') {
                    problems.push(format!("{page}: {file}:{line} names no file of the workbook"));
                }
            } else if line_of(&file, line).is_none() {
                problems.push(format!("{page}: {file}:{line} is past the end of the file"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_failing_case_is_shown_as_the_grader_prints_it() {
    let page = fs::read_to_string(root().join("book/src/phase1/exercises.md")).unwrap();
    let source = fs::read_to_string(root().join("grader/checks/phase1/src/checks/compare.rs")).unwrap();
    let declared = source.split("struct Case {").nth(1).expect("compare.rs declares `struct Case`");
    let fields: Vec<&str> = declared
        .split('}')
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().split_once(':').map(|(name, _)| name.trim()))
        .collect();
    let shown = page.split("shrunk by proptest):\n").nth(1).expect("the page shows a failing case");
    let shown: Vec<&str> = shown.lines().take_while(|l| !l.starts_with("```")).collect();
    assert_eq!(shown.first(), Some(&"Case {"), "{shown:?}");
    let names: Vec<&str> =
        shown[1..].iter().filter_map(|l| l.trim().split_once(':').map(|(name, _)| name.trim())).collect();
    assert_eq!(names, fields, "the book shows {shown:#?}");
    for piece in ["(a backend that adds ", " to every output)", " you reported `", "; the grader measured "] {
        assert!(source.contains(piece), "compare.rs no longer prints `{piece}`");
        assert!(page.contains(piece.trim_end_matches('`')), "the page does not show `{piece}`");
    }
}

#[test]
fn shrinking_is_where_the_book_says() {
    let random = fs::read_to_string(root().join("grader/harness/src/random.rs")).unwrap();
    for printed in [
        "smallest failing input (seed {seed}, shrunk by proptest)",
        "failing input (seed {seed}; judged as drawn, not shrunk)",
    ] {
        assert!(random.contains(printed), "grader/harness/src/random.rs no longer prints `{printed}`");
    }
    // A page's prose with its line breaks as spaces, so that a sentence reflowed still matches.
    let prose =
        |page: &str| fs::read_to_string(root().join(page)).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
    let grader = prose("book/src/grader.md");
    for said in [
        "When one fails in your code's run, proptest shrinks it to the smallest input that still fails",
        "When the judge finds an answer wrong, the message shows the input as drawn",
    ] {
        assert!(grader.contains(said), "book/src/grader.md no longer says `{said}`");
    }
    assert!(
        prose("book/src/troubleshooting.md")
            .contains("(the smallest one, shrunk by proptest, when your code's own run failed)")
    );
}

#[test]
fn the_checks_a_cpu_skips_are_the_ones_the_book_says() {
    let gpu_only: Vec<&str> =
        checks_phase5::PHASE.checks().filter(|(_, spec)| spec.needs_gpu).map(|(_, spec)| spec.id).collect();
    assert_eq!(gpu_only, ["challenge_is_faster"], "phase5/engine.md names the phase's only GPU-only check");
    let page = fs::read_to_string(root().join("book/src/phase5/engine.md")).unwrap();
    assert!(page.contains("`challenge_is_faster`, needs a GPU and is skipped on the CPU"));
}

#[test]
fn the_learner_kernel_cache_is_where_the_book_says() {
    let check = fs::read_to_string(root().join("grader/src/commands/check.rs")).unwrap();
    let workbook = fs::read_to_string(root().join("grader/src/workbook.rs")).unwrap();
    assert!(check.contains(r#"workbook.state_dir().join("learner-cache")"#), "grader/src/commands/check.rs");
    assert!(workbook.contains(r#"self.root.join(".grader")"#), "grader/src/workbook.rs");
    let page = fs::read_to_string(root().join("book/src/phase4/exercises.md")).unwrap();
    assert!(page.contains("`.grader/learner-cache/` in your checkout"));
}

#[test]
fn the_refused_report_methods_are_all_named() {
    let exercise = checks_phase2::PHASE.exercise("explain_report").expect("phase 2 has explain_report");
    let engine = fs::read_to_string(root().join("book/src/phase2/engine.md")).unwrap();
    let exercises = fs::read_to_string(root().join("book/src/phase2/exercises.md")).unwrap();
    let refused: Vec<&str> = exercise.forbidden.iter().map(|f| f.path.trim_start_matches('.')).collect();
    assert_eq!(refused.len(), 4, "the pages say `all four`: {refused:?}");
    for method in refused {
        assert!(engine.contains(&format!("`report.{method}()`")), "phase2/engine.md does not name `{method}`");
        assert!(exercises.contains(&format!("`{method}`")), "phase2/exercises.md does not name `{method}`");
    }
}

#[test]
fn what_recompiles_refuses_is_named_in_its_stub_and_page() {
    let exercise = checks_phase2::PHASE.exercise("recompiles").expect("phase 2 has recompiles");
    let stub = fs::read_to_string(root().join("exercises/phase2-capture/src/recompiles.rs")).unwrap();
    let page = fs::read_to_string(root().join("book/src/phase2/exercises.md")).unwrap();
    let section = &page[page.find("## recompiles").expect("the page has the section")..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    for item in exercise.forbidden.iter().map(|f| f.path.trim_start_matches('.')) {
        assert!(stub.contains(&format!("{item}`")), "the stub's doc does not name `{item}`");
        assert!(section.contains(&format!("{item}`")), "the page's `recompiles` section does not name `{item}`");
    }
}
