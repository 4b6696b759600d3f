//! `book-sources`: an mdBook preprocessor that puts the workbook's sources the book links to into
//! the book itself.
//!
//! The book links to the files it talks about (`[engine::bench](../../../engine/src/bench.rs)`),
//! which is right in the repository and in an editor, but a built book holds only `book/src`: such
//! a link would lead out of the book and break, offline, under `mdbook serve`, in the Docker
//! `book` service and hosted. So each file the book links to becomes a page of the book,
//! `sources/<path>.md` (its text highlighted as code, or a Markdown file rendered as one), listed
//! under "Sources" with the pages that link to it, and every such link is pointed at that page.
//! A link that names no file of the workbook stops the build, with the page and the link.
//!
//! `book/book.toml` runs it after mdBook's own `links` preprocessor, so included code is already
//! in place (and its text is code, never a link).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use mdbook_preprocessor::book::{Book, BookItem, Chapter};
use pulldown_cmark::{Event, Options, Parser, Tag};

/// The folder of the book the source pages live in.
pub const SOURCES: &str = "sources";

/// Where the book is: its `src` folder and the workbook's root, both absolute.
pub struct Layout {
    /// `book/src`.
    pub src: PathBuf,
    /// The workbook's root, which every linked file must be in.
    pub root: PathBuf,
}

impl Layout {
    /// The layout of the book whose `book.toml` is in `book_root`, with the workbook one folder up.
    pub fn of_book(book_root: &Path) -> Result<Layout> {
        let book_root = fs::canonicalize(book_root).with_context(|| format!("{}", book_root.display()))?;
        let root = book_root.parent().context("the book has no parent folder")?.to_path_buf();
        Ok(Layout { src: book_root.join("src"), root })
    }
}

/// One page that links to a source file: its title and its path in the book.
type Referrer = (String, String);

/// Rewrites every link of `book` that leaves `book/src` into a link to the linked file's page, and
/// adds those pages, under a "Sources" part at the end.
pub fn link_sources(layout: &Layout, book: &mut Book) -> Result<()> {
    let mut wanted: BTreeMap<String, BTreeSet<Referrer>> = BTreeMap::new();
    let mut problems = Vec::new();
    book.for_each_chapter_mut(|chapter| {
        let Some(path) = chapter.path.clone() else { return };
        let page = slash_path(&path);
        let dir = layout.src.join(&path).parent().map(Path::to_path_buf).unwrap_or_else(|| layout.src.clone());
        match rewrite_links(&chapter.content, &page, &dir, layout) {
            Ok((content, files)) => {
                chapter.content = content;
                for file in files {
                    wanted.entry(file).or_default().insert((chapter.name.clone(), page.clone()));
                }
            }
            Err(e) => problems.push(format!("{page}: {e:#}")),
        }
    });
    if !problems.is_empty() {
        bail!("links out of the book that cannot be rendered:\n{}", problems.join("\n"));
    }
    // A Markdown file shown as a page may link to more files: follow them to the end.
    let mut pages: BTreeMap<String, String> = BTreeMap::new();
    while let Some(file) = wanted.keys().find(|f| !pages.contains_key(*f)).cloned() {
        let page = source_page(&file);
        let content = fs::read_to_string(layout.root.join(&file)).with_context(|| format!("reading {file}"))?;
        let body = if file.ends_with(".md") {
            let dir = layout.root.join(&file).parent().map(Path::to_path_buf).unwrap_or_default();
            let (text, more) = rewrite_links(&content, &page, &dir, layout).with_context(|| file.clone())?;
            for more_file in more {
                wanted.entry(more_file).or_default().insert((file.clone(), page.clone()));
            }
            text
        } else {
            code_block(&file, &content)
        };
        pages.insert(file, body);
    }
    if pages.is_empty() {
        return Ok(());
    }
    let index = format!("{SOURCES}/index.md");
    let mut listing = String::from(
        "# Files the book links to\n\nThe workbook's files this book links to, as they were when the book was built. To change \
         one, open it in your checkout: the path above each page is relative to the workbook's root.\n\n",
    );
    let mut chapters = Vec::new();
    for (file, body) in pages {
        let page = source_page(&file);
        listing.push_str(&format!("- [`{file}`]({})\n", relative(&index, &page)));
        let referrers: Vec<String> = wanted[&file]
            .iter()
            .map(|(title, from)| format!("[{}]({})", escape_title(title), relative(&page, from)))
            .collect();
        let content = format!("# `{file}`\n\n*Linked from {}.*\n\n{body}", referrers.join(", "));
        let mut chapter = Chapter::new(&file, content, &page, vec!["Files the book links to".into()]);
        chapter.source_path = None;
        chapters.push(BookItem::Chapter(chapter));
    }
    let mut sources = Chapter::new("Files the book links to", listing, &index, Vec::new());
    sources.source_path = None;
    sources.sub_items = chapters;
    book.push_item(BookItem::PartTitle("Sources".into()));
    book.push_item(BookItem::Chapter(sources));
    Ok(())
}

/// The page of the book that shows `file` (a path from the workbook's root).
pub fn source_page(file: &str) -> String {
    format!("{SOURCES}/{file}.md")
}

/// `markdown` (the page `page` of the book, a file in `dir`) with each link that leaves `book/src`
/// pointed at its file's page, and the files so linked (paths from the workbook's root).
fn rewrite_links(markdown: &str, page: &str, dir: &Path, layout: &Layout) -> Result<(String, Vec<String>)> {
    let mut edits = Vec::new();
    let mut files = Vec::new();
    for (event, range) in Parser::new_ext(markdown, Options::all()).into_offset_iter() {
        let Event::Start(Tag::Link { dest_url, .. }) = event else { continue };
        let target = dest_url.as_ref();
        if target.is_empty() || target.starts_with('#') || target.starts_with('/') || target.contains("://") {
            continue;
        }
        if target.split_once(':').is_some_and(|(scheme, _)| !scheme.contains('/')) {
            continue; // mailto: and the like
        }
        let (path, fragment) = target.split_once('#').map_or((target, None), |(p, f)| (p, Some(f)));
        let resolved = normalize(&dir.join(path));
        let new_target = if let Ok(in_book) = resolved.strip_prefix(&layout.src) {
            if !page.starts_with(&format!("{SOURCES}/")) {
                continue; // a page of the book linking to another: mdBook's own business
            }
            relative(page, &slash_path(in_book))
        } else if let Ok(in_workbook) = resolved.strip_prefix(&layout.root) {
            if !resolved.is_file() {
                bail!("the link `{target}` names {}, which is not a file of the workbook", resolved.display());
            }
            let file = slash_path(in_workbook);
            let new = relative(page, &source_page(&file));
            files.push(file);
            new
        } else {
            bail!("the link `{target}` leads out of the workbook, to {}", resolved.display());
        };
        let new_target = match fragment {
            Some(f) => format!("{new_target}#{f}"),
            None => new_target,
        };
        let Some(at) = markdown[range.clone()].find(target) else {
            bail!("the link `{target}` is not written inline (`[text](path)`): write it so, to render it");
        };
        let start = range.start + at;
        edits.push((start, start + target.len(), new_target));
    }
    let mut text = markdown.to_string();
    for (start, end, new) in edits.into_iter().rev() {
        text.replace_range(start..end, &new);
    }
    Ok((text, files))
}

/// `file`'s text as a fenced code block, highlighted by its extension. The fence is longer than
/// any run of backticks in the text, and in Rust the lines mdBook would hide (`# ...`) are
/// escaped, so the block shows the file exactly.
fn code_block(file: &str, text: &str) -> String {
    let language = match Path::new(file).extension().and_then(|e| e.to_str()).unwrap_or_default() {
        "rs" => "rust",
        "cu" | "cuh" | "cpp" | "h" => "cpp",
        "c" => "c",
        "py" => "python",
        "sh" | "sbatch" => "bash",
        "toml" => "toml",
        "json" => "json",
        "yaml" | "yml" => "yaml",
        "js" | "mjs" => "javascript",
        _ => "text",
    };
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let mut block = format!("<div class=\"source-file\">\n\n{fence}{language}\n");
    for line in text.lines() {
        let body = line.trim_start();
        let hidden = body.starts_with('#') && matches!(body[1..].chars().next(), None | Some(' ') | Some('#'));
        if language == "rust" && hidden {
            let indent = &line[..line.len() - body.len()];
            block.push_str(&format!("{indent}#{body}\n"));
        } else {
            block.push_str(line);
            block.push('\n');
        }
    }
    block.push_str(&format!("{fence}\n\n</div>\n"));
    block
}

/// A link from the page `from` to the page `to`, both paths in the book.
fn relative(from: &str, to: &str) -> String {
    let depth = from.matches('/').count();
    format!("{}{to}", "../".repeat(depth))
}

/// A chapter title as link text: brackets escaped.
fn escape_title(title: &str) -> String {
    title.replace('[', "\\[").replace(']', "\\]")
}

fn slash_path(path: &Path) -> String {
    path.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// `a/b/../c` as `a/c`, without touching the file system.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::of_book(&Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap()
    }

    fn chapter(path: &str, content: &str) -> Book {
        let mut book = Book::new();
        book.push_item(BookItem::Chapter(Chapter::new("A page", content.into(), path, Vec::new())));
        book
    }

    fn pages(book: &Book) -> BTreeMap<String, String> {
        book.iter()
            .filter_map(|item| match item {
                BookItem::Chapter(c) => Some((slash_path(c.path.as_ref()?), c.content.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_link_out_of_the_book_leads_to_the_file_as_a_page() {
        let mut book = chapter(
            "phase5/engine.md",
            "See [the timer](../../../engine/src/bench.rs#L1), [the tour](../tour.md), \
             [PyTorch](https://pytorch.org) and `[code](../../../nowhere.rs)`.\n\n\
             ```rust\nlet link = \"[not a link](../../../nowhere.rs)\";\n```\n",
        );
        link_sources(&layout(), &mut book).unwrap();
        let pages = pages(&book);
        assert_eq!(
            pages["phase5/engine.md"],
            "See [the timer](../sources/engine/src/bench.rs.md#L1), [the tour](../tour.md), \
             [PyTorch](https://pytorch.org) and `[code](../../../nowhere.rs)`.\n\n\
             ```rust\nlet link = \"[not a link](../../../nowhere.rs)\";\n```\n"
        );
        let page = &pages["sources/engine/src/bench.rs.md"];
        assert!(page.starts_with("# `engine/src/bench.rs`\n"), "{page}");
        assert!(page.contains("*Linked from [A page](../../../phase5/engine.md).*"), "{page}");
        assert!(page.contains("```rust\n//! "), "{page}");
        assert!(pages["sources/index.md"].contains("- [`engine/src/bench.rs`](../sources/engine/src/bench.rs.md)"));
    }

    #[test]
    fn a_markdown_file_is_rendered_and_its_own_links_followed() {
        let mut book = chapter("phase5/engine.md", "[notes](../../../bench/NOTES-inductor.md)\n");
        link_sources(&layout(), &mut book).unwrap();
        let pages = pages(&book);
        let notes = &pages["sources/bench/NOTES-inductor.md.md"];
        assert!(notes.contains("# `bench/NOTES-inductor.md`") && !notes.contains("source-file"), "{notes}");
    }

    #[test]
    fn a_broken_link_out_of_the_book_stops_the_build_with_its_page() {
        for (link, expected) in [
            ("../../../engine/src/no_such_file.rs", "not a file of the workbook"),
            ("../../../engine/src", "not a file of the workbook"),
            ("../../../../../etc/passwd", "leads out of the workbook"),
        ] {
            let mut book = chapter("phase1/engine.md", &format!("[x]({link})\n"));
            let err = format!("{:#}", link_sources(&layout(), &mut book).unwrap_err());
            assert!(err.contains("phase1/engine.md") && err.contains(expected), "{link}: {err}");
        }
        let mut book = chapter("phase1/engine.md", "[x][def]\n\n[def]: ../../../engine/src/bench.rs\n");
        let err = format!("{:#}", link_sources(&layout(), &mut book).unwrap_err());
        assert!(err.contains("not written inline"), "{err}");
    }

    #[test]
    fn code_shows_exactly_whatever_it_holds() {
        let text = "# hidden by mdBook\n#[derive(Debug)]\n    ## doubled\n#\nlet s = \"```\";\n";
        let block = code_block("x.rs", text);
        assert!(block.contains("\n````rust\n## hidden by mdBook\n#[derive(Debug)]\n    ### doubled\n##\n"), "{block}");
        assert!(block.ends_with("````\n\n</div>\n"), "{block}");
        assert!(code_block("k.cu", "# x\n").contains("```cpp\n# x\n"));
    }
}
