//! Checks the book's sources (`book/src/**/*.md`) without needing mdbook:
//!
//! - every `{{#include path}}` names a file that exists; an anchor (`path:name`) must be opened
//!   and closed in that file by `ANCHOR: name` / `ANCHOR_END: name` markers; a line range
//!   (`path:4:`) must lie in the file, and on an insta snapshot it must start on the first line
//!   after the snapshot's header, so the book never shows insta's metadata;
//! - every relative link or image names a file that exists, and a `#fragment` on a page names one
//!   of its headings;
//! - every ```rust block consists of includes only, so each line of Rust the book shows is
//!   compiled (and, for the examples crate, run) by `cargo test`.
//!
//! Each problem is reported with its page and line.

use std::fs;
use std::path::{Component, Path, PathBuf};

fn book_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../src")
}

#[test]
fn includes_links_and_code_blocks_resolve() {
    let src = normalize(&book_src());
    let mut pages = Vec::new();
    collect_pages(&src, &mut pages);
    assert!(pages.iter().any(|p| p.ends_with("SUMMARY.md")), "no SUMMARY.md under {}", src.display());
    let mut problems = Vec::new();
    for page in &pages {
        let text = fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        problems.extend(check_page(&src, page, &text));
    }
    assert!(problems.is_empty(), "the book has {} problem(s):\n{}", problems.len(), problems.join("\n"));
}

/// Every `.md` file under `dir`, in a stable order.
fn collect_pages(dir: &Path, pages: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_pages(&path, pages);
        } else if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
}

/// The problems of one page, each as `book/src/<page>:<line>: <what is wrong>`.
fn check_page(src: &Path, page: &Path, text: &str) -> Vec<String> {
    let shown = format!("book/src/{}", page.strip_prefix(src).unwrap_or(page).display());
    let dir = page.parent().expect("a page lives in a directory");
    let mut problems = Vec::new();
    let mut fence: Option<String> = None;
    for (index, line) in text.lines().enumerate() {
        let mut report = |message: String| problems.push(format!("{shown}:{}: {message}", index + 1));
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            fence = match fence {
                None => Some(info.trim().to_string()),
                Some(_) => None,
            };
            continue;
        }
        for directive in includes(line, &mut report) {
            if let Err(message) = check_include(dir, &directive) {
                report(message);
            }
        }
        match &fence {
            Some(lang) if lang.split(',').next() == Some("rust") => {
                if !trimmed.is_empty() && !trimmed.starts_with("{{#include ") {
                    report("a ```rust block may only include compiled code: use {{#include path:anchor}}".into());
                }
            }
            Some(_) => {}
            None => {
                for target in link_targets(line) {
                    if let Err(message) = check_link(src, page, &target) {
                        report(message);
                    }
                }
            }
        }
    }
    if fence.is_some() {
        problems.push(format!("{shown}: a ``` code block is never closed"));
    }
    problems
}

/// The arguments of the `{{#include ...}}` directives on a line (`\{{#include}}` is escaped).
fn includes(line: &str, report: &mut impl FnMut(String)) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("{{#") {
        let escaped = rest[..start].ends_with('\\');
        let after = &rest[start + 3..];
        let Some(end) = after.find("}}") else {
            report("a `{{#` directive is not closed with `}}`".into());
            break;
        };
        let body = after[..end].trim();
        if !escaped {
            match body.split_once(char::is_whitespace) {
                Some(("include", argument)) => found.push(argument.trim().to_string()),
                _ => report(format!("`{{{{#{body}}}}}`: only {{{{#include}}}} is used in this book")),
            }
        }
        rest = &after[end + 2..];
    }
    found
}

/// Checks one include argument, `path`, `path:anchor` or `path:start:end`, relative to `dir`.
fn check_include(dir: &Path, argument: &str) -> Result<(), String> {
    let (path, selector) = argument.split_once(':').unwrap_or((argument, ""));
    let file = normalize(&dir.join(path));
    let text = fs::read_to_string(&file).map_err(|e| format!("{{{{#include {argument}}}}}: {path}: {e}"))?;
    if selector.is_empty() {
        return Ok(());
    }
    let first = selector.split(':').next().unwrap_or_default();
    if first.is_empty() || first.chars().all(|c| c.is_ascii_digit()) {
        return check_line_range(&text, path, first, argument);
    }
    let has_marker = |marker: &str| {
        text.lines().any(|l| {
            l.split_once(marker)
                .is_some_and(|(_, rest)| rest.trim_start().split(|c: char| c.is_whitespace()).next() == Some(selector))
        })
    };
    for marker in ["ANCHOR:", "ANCHOR_END:"] {
        if !has_marker(marker) {
            return Err(format!("{{{{#include {argument}}}}}: {path} has no `{marker} {selector}` marker"));
        }
    }
    Ok(())
}

/// A line range must start inside the file, and an insta snapshot's range right after its header.
fn check_line_range(text: &str, path: &str, first: &str, argument: &str) -> Result<(), String> {
    let start: usize = first.parse().unwrap_or(1);
    let lines = text.lines().count();
    if start == 0 || start > lines {
        return Err(format!("{{{{#include {argument}}}}}: {path} has {lines} lines, so line {start} is not in it"));
    }
    if path.ends_with(".snap") {
        let header_end = text.lines().enumerate().skip(1).find(|(_, l)| *l == "---").map(|(i, _)| i + 2);
        if header_end != Some(start) {
            return Err(format!(
                "{{{{#include {argument}}}}}: the snapshot's output starts on line {}, not {start}",
                header_end.map_or("?".to_string(), |l| l.to_string())
            ));
        }
    }
    Ok(())
}

/// The targets of the Markdown links and images on a line outside code spans.
fn link_targets(line: &str) -> Vec<String> {
    let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(start) = rest.find("](") {
        let after = &rest[start + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or_default();
        targets.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
        rest = &after[end..];
    }
    targets
}

/// A relative link must name an existing file, and a `#fragment` on a page must name one of its headings.
fn check_link(src: &Path, page: &Path, target: &str) -> Result<(), String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() { page.to_path_buf() } else { normalize(&page.parent().unwrap_or(src).join(path)) };
    if !file.exists() {
        return Err(format!("link to `{target}`: no file {}", file.display()));
    }
    if fragment.is_empty() || file.extension().is_none_or(|e| e != "md") {
        return Ok(());
    }
    let text = fs::read_to_string(&file).map_err(|e| format!("link to `{target}`: {e}"))?;
    if heading_ids(&text).iter().any(|id| id == fragment) {
        Ok(())
    } else {
        Err(format!("link to `{target}`: {} has no heading with the id `{fragment}`", file.display()))
    }
}

/// The ids mdBook gives a page's headings: lower case, spaces as `-`, other punctuation dropped.
fn heading_ids(text: &str) -> Vec<String> {
    let mut in_fence = false;
    let mut ids = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && let Some(heading) = line.strip_prefix('#') {
            let title = heading.trim_start_matches('#');
            if title.starts_with(' ') {
                let id = title.trim().to_lowercase();
                let id = id.chars().filter_map(|c| match c {
                    c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
                    c if c.is_whitespace() => Some('-'),
                    _ => None,
                });
                ids.push(id.collect());
            }
        }
    }
    ids
}

/// `a/b/../c` as `a/c`, without touching the file system (the file may not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn the_checker_reports_each_kind_of_problem_with_its_line() {
    let src = normalize(&book_src());
    let page = src.join("phase1/example.md");
    let text = "\
ok: [tour](../tour.md) and `[not a link](nowhere.md)`
[missing](nowhere.md)
```rust
{{#include ../../examples/src/mlp.rs:mlp}}
{{#include ../../examples/src/mlp.rs:no_such_anchor}}
{{#include ../../examples/tests/snapshots/tour_eager.snap:1:}}
let written_by_hand = 1;
```
```python
x = [y](z)
```
{{#rustdoc_include ../../examples/src/mlp.rs}}
";
    let problems = check_page(&src, &page, text);
    let lines: Vec<&str> = problems.iter().map(|p| p.split(": ").next().unwrap()).collect();
    assert_eq!(
        lines,
        [
            "book/src/phase1/example.md:2",
            "book/src/phase1/example.md:5",
            "book/src/phase1/example.md:6",
            "book/src/phase1/example.md:7",
            "book/src/phase1/example.md:12",
        ],
        "{problems:#?}"
    );
    assert!(problems[1].contains("no `ANCHOR: no_such_anchor` marker"), "{}", problems[1]);
    assert!(problems[2].contains("output starts on line 4, not 1"), "{}", problems[2]);
}

#[test]
fn pending_pages_may_be_missing_but_other_pages_may_not() {
    let src = normalize(&book_src());
    let page = src.join("phase1/engine.md");
    assert!(check_link(&src, &page, "exercises.md").is_ok());
    assert!(check_link(&src, &page, "../grader.md").is_ok());
    assert!(check_link(&src, &page, "exercise.md").is_err());
    assert!(check_link(&src, &page, "https://pytorch.org/docs").is_ok());
}

#[test]
fn fragments_must_name_a_heading() {
    let src = normalize(&book_src());
    let page = src.join("phase1/engine.md");
    assert!(check_link(&src, &page, "../tour.md#where-capture-has-to-stop").is_ok());
    assert!(check_link(&src, &page, "#a-backend-of-your-own").is_ok());
    let err = check_link(&src, &page, "../tour.md#no-such-heading").unwrap_err();
    assert!(err.contains("no heading with the id `no-such-heading`"), "{err}");
    assert_eq!(heading_ids("# A `Backend`, explained\n```\n# not a heading\n```\n#hashtag\n"), ["a-backend-explained"]);
}
