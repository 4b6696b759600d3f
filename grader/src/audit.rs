//! What the grader refuses to build in a learner's crate, before cargo runs any of it.
//!
//! What the learner's crate can read while it compiles is bounded by the sandbox the compiler runs
//! in ([`crate::compile`]), and what its code runs by the sandbox of the checks and the engine's
//! trip wires ([`grader_harness::wires`]). The audit refuses only what those cannot bound, or
//! where it says more, earlier:
//! - a build script (`build.rs`, or `build =` in the manifest): cargo runs it, unconfined;
//! - any change to the crate's manifest beyond the shipped shape: another dependency (the
//!   solutions crate, a proc-macro), a renamed one, a `[lib] path` into another crate;
//! - a plain use of an engine item an exercise asks the learner to write (its [`Forbidden`]
//!   list), named in the source: the trip wire would stop it too, but only once a check ran it,
//!   and without the line.
//!
//! Refusals are reported like a compile error, with the file and line and what to do.

use std::path::{Path, PathBuf};

use grader_harness::{Forbidden, Phase};
use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

use crate::runners::BuildFailure;
use crate::stubs;
use crate::workbook::Workbook;

/// Dependencies an exercise crate may have, each as `NAME.workspace = true`: the engine, the given
/// models, and `plotters`, which phase 5 plots with (a plotting library, with no build script and
/// nothing in it that could answer an exercise).
const ALLOWED_DEPENDENCIES: &[&str] = &["engine", "workbook-models", "plotters"];

/// What the audit refuses, exercise by exercise: for each exercise whose forbidden items the crate
/// names, the first such use, with its file and line. Those exercises' checks are not run; the
/// others are graded as usual.
pub type Refusals = Vec<(&'static str, BuildFailure)>;

/// Audits the learner's crate of `phase`. `Err` refuses the whole crate (a build script, a changed
/// manifest, a file that cannot be read): nothing of it is built. `Ok` lists the exercises refused
/// for naming an engine item they forbid ([`Refusals`]), empty when there are none.
pub fn phase(workbook: &Workbook, phase: &Phase) -> Result<Refusals, BuildFailure> {
    let dir = workbook.path(phase.exercises_dir);
    let manifest = format!("{}/Cargo.toml", phase.exercises_dir);
    if dir.join("build.rs").exists() {
        return Err(refuse(
            format!("{}/build.rs", phase.exercises_dir),
            "exercise crates may not have a build script: cargo runs it outside the grader's sandbox. Delete build.rs."
                .into(),
        ));
    }
    let text = std::fs::read_to_string(dir.join("Cargo.toml"))
        .map_err(|e| refuse(manifest.clone(), format!("cannot read the crate's manifest: {e}")))?;
    manifest_shape(&text).map_err(|m| refuse(manifest.clone(), m))?;
    let mut refusals: Refusals = Vec::new();
    // Only `src/` is linked into the check runner: examples (the scratch one) are the learner's
    // to edit freely and never run under the grader.
    for file in rust_files(&dir.join("src")) {
        let relative = file.strip_prefix(workbook.root()).unwrap_or(&file).display().to_string();
        let bytes = std::fs::read(&file).map_err(|e| refuse(relative.clone(), format!("cannot read it: {e}")))?;
        if stubs::is_shipped(&relative, &bytes) {
            continue; // As shipped: given code may use what the learner's own code may not.
        }
        let source = String::from_utf8(bytes)
            .map_err(|e| refuse(relative.clone(), format!("cannot read this file as UTF-8 text: {e}")))?;
        // Each exercise's items: those it forbids everywhere, and in its own file the others too.
        for exercise in phase.exercises {
            if refusals.iter().any(|(name, _)| *name == exercise.name) {
                continue;
            }
            let own_file = dir.join(exercise.file) == file;
            let forbidden: Vec<&Forbidden> = exercise.forbidden.iter().filter(|f| f.everywhere || own_file).collect();
            if forbidden.is_empty() {
                continue;
            }
            if let Err((line, message)) = source_rules(&source, &forbidden) {
                refusals.push((exercise.name, refuse(format!("{relative}:{line}"), message)));
            }
        }
    }
    Ok(refusals)
}

/// A refusal at `place` (`file` or `file:line`) saying `message`.
fn refuse(place: String, message: String) -> BuildFailure {
    BuildFailure { message: format!("refused by the grader: {message}"), location: Some(place) }
}

/// Fails unless the manifest has only the shipped sections and keys.
fn manifest_shape(text: &str) -> Result<(), String> {
    let manifest: toml::Table = text.parse().map_err(|e| format!("the manifest does not parse: {e}"))?;
    let restore = "Restore Cargo.toml as shipped (`git checkout -- Cargo.toml` in the crate).";
    for (section, value) in &manifest {
        let keys = |allowed: &[&str]| -> Result<(), String> {
            let table = value.as_table().ok_or_else(|| format!("[{section}] is not a table. {restore}"))?;
            match table.keys().find(|k| !allowed.contains(&k.as_str())) {
                Some(key) => Err(format!("`{key}` in [{section}] is not allowed in an exercise crate. {restore}")),
                None => Ok(()),
            }
        };
        match section.as_str() {
            "package" => keys(&["name", "description", "version", "edition", "rust-version", "license", "publish"])?,
            "lib" => keys(&["name"])?,
            "lints" => keys(&["workspace"])?,
            "dependencies" | "dev-dependencies" => {
                keys(ALLOWED_DEPENDENCIES)?;
                let table = value.as_table().expect("checked above");
                if let Some((name, _)) = table.iter().find(|(_, v)| !is_workspace_dependency(v)) {
                    return Err(format!(
                        "`{name}` in [{section}] must stay `{name}.workspace = true`: exercises build against the \
                         workbook's own crates. {restore}"
                    ));
                }
            }
            other => {
                return Err(format!(
                    "[{other}] is not allowed in an exercise crate (build scripts, other targets and other \
                     dependencies would run or read code outside the grader's view). {restore}"
                ));
            }
        }
    }
    Ok(())
}

fn is_workspace_dependency(value: &toml::Value) -> bool {
    value.as_table().is_some_and(|t| t.len() == 1 && t.get("workspace").and_then(toml::Value::as_bool) == Some(true))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The first use of a `forbidden` item in `source`, as `(line, message)`.
fn source_rules(source: &str, forbidden: &[&Forbidden]) -> Result<(), (usize, String)> {
    let tokens: TokenStream = source
        .parse()
        .map_err(|e: proc_macro2::LexError| (e.span().start().line, format!("the file does not lex: {e}")))?;
    let mut flat = Vec::new();
    flatten(tokens, &mut flat);
    for (i, token) in flat.iter().enumerate() {
        if let Some(item) = forbidden.iter().find(|item| uses_item(&flat, i, item.path)) {
            return Err((token.line, format!("`{}` is off limits here: {}", item.path, item.why)));
        }
    }
    Ok(())
}

/// One token of a file, flattened.
struct Token {
    /// An identifier's text, without a raw `r#` prefix.
    ident: Option<String>,
    /// A punctuation character, and whether the next one joins it (`::`).
    punct: Option<(char, bool)>,
    line: usize,
    /// Inside a `use` item.
    in_use: bool,
}

impl Token {
    fn new(tree: &TokenTree, in_use: bool) -> Token {
        let ident = match tree {
            TokenTree::Ident(ident) => {
                let text = ident.to_string();
                Some(text.strip_prefix("r#").map(str::to_string).unwrap_or(text))
            }
            _ => None,
        };
        let punct = match tree {
            TokenTree::Punct(p) => Some((p.as_char(), p.spacing() == Spacing::Joint)),
            _ => None,
        };
        Token { ident, punct, line: tree.span().start().line, in_use }
    }

    fn ident(&self) -> Option<&str> {
        self.ident.as_deref()
    }

    fn punct(&self) -> Option<char> {
        self.punct.map(|(c, _)| c)
    }

    fn joint(&self) -> bool {
        self.punct.is_some_and(|(_, joint)| joint)
    }
}

/// Flattens `tokens` into `out`, groups' contents in place of the groups.
fn flatten(tokens: TokenStream, out: &mut Vec<Token>) {
    let mut in_use = false;
    for tree in tokens {
        if let TokenTree::Ident(ident) = &tree
            && ident == "use"
        {
            in_use = true;
        }
        if let TokenTree::Punct(p) = &tree
            && p.as_char() == ';'
        {
            in_use = false;
        }
        match tree {
            TokenTree::Group(group) => {
                // The opening bracket stays as a token of its own, so that `f(` reads as a call.
                let open = match group.delimiter() {
                    Delimiter::Parenthesis => Some('('),
                    Delimiter::Bracket => Some('['),
                    Delimiter::Brace => Some('{'),
                    Delimiter::None => None,
                };
                let start = out.len();
                out.push(Token {
                    ident: None,
                    punct: open.map(|c| (c, false)),
                    line: group.span().start().line,
                    in_use,
                });
                flatten(group.stream(), out);
                if in_use {
                    out[start..].iter_mut().for_each(|t| t.in_use = true);
                }
            }
            _ => out.push(Token::new(&tree, in_use)),
        }
    }
}

/// Whether token `i` starts a use of `path` (`module::item`, `item` or `.method`, see
/// [`Forbidden::path`]).
fn uses_item(tokens: &[Token], i: usize, path: &str) -> bool {
    if let Some(method) = path.strip_prefix('.') {
        // `x.method(...)`, or `Type::method` (called or taken as a function); a field of the same
        // name (`summary.op_count`) is not a call.
        let before = |back: usize| i.checked_sub(back).and_then(|j| tokens[j].punct());
        let called = tokens.get(i + 1).is_some_and(|t| t.punct() == Some('('));
        return tokens[i].ident() == Some(method)
            && ((before(1) == Some('.') && called) || (before(1) == Some(':') && before(2) == Some(':')));
    }
    let (module, item) = match path.rsplit_once("::") {
        Some((module, item)) => (module.rsplit("::").next(), item),
        None => (None, path),
    };
    let Some(module) = module else { return tokens[i].ident() == Some(item) };
    if tokens[i].ident() != Some(module) {
        return false;
    }
    let path_sep = |j: usize| {
        tokens.get(j).is_some_and(|t| t.punct() == Some(':') && t.joint())
            && tokens.get(j + 1).is_some_and(|t| t.punct() == Some(':'))
    };
    // `module::item`, or `module::*` (which would bring the item in unnamed).
    if path_sep(i + 1)
        && let Some(next) = tokens.get(i + 3)
        && (next.ident() == Some(item) || next.punct() == Some('*'))
    {
        return true;
    }
    // `use module::{a, item as b}`: the item named anywhere in the same `use`.
    tokens[i].in_use && tokens[i + 1..].iter().take_while(|t| t.in_use).any(|t| t.ident() == Some(item))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERPRETER: Forbidden =
        Forbidden { path: "fx::Interpreter", everywhere: true, why: "write the interpreter yourself" };
    const CAN_FUSE: Forbidden = Forbidden { path: "scheduler::can_fuse", everywhere: true, why: "decide yourself" };

    const OP_COUNT: Forbidden = Forbidden { path: ".op_count", everywhere: true, why: "count them yourself" };

    fn refused(source: &str) -> Option<(usize, String)> {
        source_rules(source, &[&INTERPRETER, &CAN_FUSE, &OP_COUNT]).err()
    }

    #[test]
    fn ordinary_code_passes() {
        let source = "/// Mentions include_str! and #[path] in a comment.\n\
                      // and Interpreter::new here too\n\
                      fn f(path: &str) -> usize { let path = path; let s = \"include!(x)\"; path.len() + s.len() }\n\
                      pub fn can_fuse() -> bool { true }\n\
                      struct S { op_count: usize }\n\
                      fn g(s: &S) -> S { S { op_count: s.op_count + 1 } }\n\
                      use engine::inductor::scheduler::{Decision, is_row_shape};";
        assert_eq!(refused(source), None);
    }

    #[test]
    fn forbidden_engine_items_are_refused_however_they_are_named() {
        for source in [
            "use engine::fx::Interpreter;",
            "fn f() { engine::fx::Interpreter::new(g); }",
            "use engine::fx::{Graph, Interpreter as I};",
            "fn f() -> bool { engine::inductor::scheduler::can_fuse(c) }",
            "use engine::inductor::scheduler::{Decision, can_fuse as decide};",
            "pub use engine::inductor::scheduler::*;",
            "fn f(r: &Report) -> usize { r.op_count() }",
            "fn f(r: &Report) -> usize { Report::op_count(r) }",
        ] {
            let (_, message) = refused(source).unwrap_or_else(|| panic!("not refused: {source}"));
            assert!(message.contains("off limits"), "{message}");
        }
    }

    #[test]
    fn the_training_exercises_refuse_autograd_and_the_partitioner_by_any_route() {
        // Phase 4's layer_norm_backward and save_or_recompute, as declared: each route a learner
        // could take to the engine's answer that names it (an alias, a glob, a method through its
        // type, a macro) is refused before the build; the others (`backward_with`, AOT's joint
        // graph, which run the same autograd engine) trip the engine's wires when they run.
        let forbidden: Vec<&Forbidden> = checks_phase4::PHASE
            .exercises
            .iter()
            .filter(|e| ["layer_norm_backward", "save_or_recompute"].contains(&e.name))
            .flat_map(|e| e.forbidden.iter())
            .collect();
        for source in [
            "fn g(x: &Tensor, y: &Tensor) { y.mul(x).unwrap().sum_all().unwrap().backward().unwrap(); }",
            "fn g(y: &Tensor) { Tensor::backward(y).unwrap(); }",
            "use engine::tensor::autograd::grad as derivative;",
            "use engine::tensor::autograd::*;",
            "fn g() { engine::tensor::autograd::grad(&[], &[], &[], false); }",
            "use engine::tensor::{Tensor, autograd as ad};",
            "fn plan(j: JointGraph) { let _ = engine::aot::partition(j); }",
            "use engine::aot::{Network, INFINITE};",
            "use engine::aot::partition as split;",
            "macro_rules! ask { ($j:expr) => { engine::aot::partition($j) } }",
        ] {
            let refusal = source_rules(source, &forbidden);
            assert!(refusal.is_err(), "not refused: {source}");
        }
        // Their own names are theirs: a helper called `grad` or `partition` of the learner's.
        for source in ["fn grad(x: f32) -> f32 { x }", "fn partition(v: &[usize]) -> usize { v.len() }"] {
            assert_eq!(source_rules(source, &forbidden), Ok(()), "{source}");
        }
    }

    #[test]
    fn recompiles_refuses_the_cache_and_its_symbols_by_name() {
        // Phase 2's recompiles, as declared: the engine items that would decide its answer (the
        // cache, re-tracing with symbolic sizes, a symbolic input, the size guards) are refused
        // however a use names them; the learner's own items of similar names are not.
        let forbidden: Vec<&Forbidden> =
            checks_phase2::PHASE.exercise("recompiles").expect("phase 2 has recompiles").forbidden.iter().collect();
        for source in [
            "fn g(f: F) { let _ = engine::dynamo::compile(f); }",
            "fn g(t: Traced) { let _ = t.graph.with_dynamic_dims(&[vec![0]]); }",
            "use engine::fx::Graph;\nfn g(t: &Graph) { let _ = Graph::with_dynamic_dims(t, &[]); }",
            "fn g(t: &Tracer, m: TensorMeta) { t.dynamic_placeholder(\"x\", m, vec![1], &[0]); }",
            "fn g(g: &mut Graph, m: TensorMeta) { g.add_dynamic_placeholder(\"x\", m, vec![1], &[0]); }",
            "fn g(g: &Graph, s: &[usize]) -> bool { g.bind_symbols(&[s]).is_ok() }",
            "fn g() { let check = engine::fx::Graph::bind_symbols; }",
        ] {
            let refusal = source_rules(source, &forbidden);
            assert!(refusal.is_err(), "not refused: {source}");
        }
        for source in [
            "fn bind_symbols(s: &[usize]) -> bool { s.len() > 1 }",
            "struct Cache { dynamic_placeholder: bool }\nfn g(c: &Cache) -> bool { c.dynamic_placeholder }",
            "fn g(x: &Tensor) -> Vec<usize> { x.shape().to_vec() }",
        ] {
            assert_eq!(source_rules(source, &forbidden), Ok(()), "{source}");
        }
    }

    const PHASE: Phase = Phase {
        name: "phase0",
        title: "Fixture",
        exercises_dir: "exercises/p",
        solutions_dir: "solutions/p",
        runner_package: "none",
        book_page: "book/src/p.md",
        exercises: &[grader_harness::Exercise {
            name: "interpreter",
            file: "src/interpreter.rs",
            section: "interpreter",
            stretch: false,
            hints: &[],
            checks: &[],
            forbidden: &[INTERPRETER],
        }],
        mutants: &[],
    };

    /// A workbook holding the fixture's crate with `files` (path, text) over a shipped manifest.
    fn workbook(files: &[(&str, &str)]) -> (tempfile::TempDir, Workbook) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("Cargo.toml"), "[workspace]\n").unwrap();
        let manifest = "[package]\nname = \"p\"\n[dependencies]\nengine.workspace = true\n";
        for (path, text) in [("Cargo.toml", manifest), ("src/lib.rs", "pub mod interpreter;\n")].iter().chain(files) {
            let path = root.join("exercises/p").join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let workbook = Workbook::find(Some(root)).unwrap();
        (dir, workbook)
    }

    #[test]
    fn a_crate_as_shipped_is_accepted() {
        // The scratch example is the learner's to edit, and never linked into a runner.
        let (_dir, workbook) = workbook(&[
            ("src/interpreter.rs", "pub fn interpret() {}\n"),
            ("examples/scratch.rs", "#[path = \"../../show.rs\"]\nmod show;\nuse engine::fx::Interpreter;\n"),
        ]);
        assert!(phase(&workbook, &PHASE).unwrap().is_empty());
    }

    #[test]
    fn each_route_around_the_exercise_is_refused_with_its_place() {
        for (files, place, needle) in [
            (&[("build.rs", "fn main() {}")][..], "exercises/p/build.rs", "build script"),
            (
                &[(
                    "Cargo.toml",
                    "[package]\nname = \"p\"\n[dependencies]\nsolution = { path = \"../../solutions/p\" }\n",
                )],
                "exercises/p/Cargo.toml",
                "`solution`",
            ),
        ] {
            let (_dir, workbook) = workbook(files);
            let refusal = phase(&workbook, &PHASE).unwrap_err();
            assert_eq!(refusal.location.as_deref(), Some(place), "{refusal:?}");
            assert!(
                refusal.message.starts_with("refused by the grader") && refusal.message.contains(needle),
                "{refusal:?}"
            );
        }
    }

    /// A forbidden item refuses the exercise that forbids it, not the crate: the other exercises
    /// are still graded.
    #[test]
    fn a_forbidden_item_refuses_its_exercise_only() {
        for (files, place, needle) in [
            (
                &[("src/interpreter.rs", "\nuse engine::fx::Interpreter;\n")][..],
                "exercises/p/src/interpreter.rs:2",
                "off limits",
            ),
            (&[("src/helper.rs", "pub use engine::fx::Interpreter;\n")], "exercises/p/src/helper.rs:1", "off limits"),
        ] {
            let (_dir, workbook) = workbook(files);
            let refusals = phase(&workbook, &PHASE).unwrap();
            let [(exercise, refusal)] = refusals.as_slice() else { panic!("one refusal: {refusals:?}") };
            assert_eq!(*exercise, "interpreter");
            assert_eq!(refusal.location.as_deref(), Some(place), "{refusal:?}");
            assert!(
                refusal.message.starts_with("refused by the grader") && refusal.message.contains(needle),
                "{refusal:?}"
            );
        }
    }

    #[test]
    fn manifests_keep_their_shipped_shape() {
        let shipped = "[package]\nname = \"p\"\nversion.workspace = true\n[lib]\nname = \"p\"\n\
                       [dependencies]\nengine.workspace = true\n[lints]\nworkspace = true\n";
        manifest_shape(shipped).unwrap();
        for (change, needle) in [
            ("[package]\nname = \"p\"\nbuild = \"b.rs\"\n", "`build`"),
            ("[dependencies]\nsolution = { path = \"../../solutions/p\" }\n", "`solution`"),
            (
                "[dependencies]\nengine = { path = \"../../solutions/p\", package = \"p-solution\" }\n",
                "workspace = true",
            ),
            ("[lib]\nname = \"p\"\npath = \"../../solutions/p/src/lib.rs\"\n", "`path`"),
            ("[build-dependencies]\ncc = \"1\"\n", "[build-dependencies]"),
            ("[target.'cfg(unix)'.dependencies]\nx = \"1\"\n", "[target]"),
        ] {
            let error = manifest_shape(change).unwrap_err();
            assert!(error.contains(needle), "{change}: {error}");
        }
    }
}
