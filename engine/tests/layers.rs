//! The engine's layers, checked: every `crate::` and `super::` path in `engine/src` may name only
//! its own layer or one below (the order is written in `src/lib.rs`), no module may reach
//! itself through imports (no loop, inside a layer either), the fast paths, mode features and
//! codegen targets are named only by the modules that plug them in (the pipeline a learner reads
//! never names them), and Inductor names devices only in its targets and their runtimes.
//!
//! The check reads the source as text, so it needs no tool beyond the test itself. Comments and
//! the `#[cfg(test)]` module at the end of a file are skipped; a `pub use` in a module counts for
//! the layer rule but not as a dependency of that module (a re-export), and a path through a
//! re-export is followed to the module that defines the item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, bottom first: each entry is a module path prefix (the longest one matching a
/// module decides its layer). Keep in step with the order in `src/lib.rs`.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "base types",
        &[
            "wires",
            "scalar",
            "dtype",
            "layout",
            "device",
            "error",
            "logs",
            "compile_time",
            "trace_structured",
            "codecache",
            "parallel",
            "compile_mode",
            "host_overhead",
        ],
    ),
    ("op catalogue", &["op"]),
    (
        "tensors and eager kernels",
        &["tensor", "eager", "device::provider", "device::cpu", "device::cuda", "bench", "profiler"],
    ),
    ("fx", &["fx"]),
    ("aot", &["aot"]),
    ("inductor", &["inductor"]),
    ("backends", &["backends"]),
    ("dynamo", &["dynamo"]),
    ("optim", &["optim"]),
];

/// The fast paths, the mode features and the codegen targets, each with the only modules outside
/// it that may import it: the registries that choose a kernel provider or a target, the targets
/// and their runtimes, and the mode features that run the tuned kernels. The most specific entry
/// that covers an imported module decides. An importer ending in `::*` allows a whole subtree; any
/// other names one module exactly (`device::cpu` is the provider registry in `cpu/mod.rs`, not the
/// plain kernels beside it; `inductor::target` is the target registry in `target/mod.rs`).
const GUARDED: &[(&str, &str, &[&str])] = &[
    ("fast path", "device::cpu::tuned", &["device::cpu", "inductor::modes::*", "inductor::runtime::host"]),
    (
        "fast path",
        "device::cuda::tuned",
        &["device::cuda", "inductor::modes::*", "inductor::runtime::cuda", "inductor::target::cuda"],
    ),
    ("mode feature", "inductor::modes", &["inductor::target::*", "inductor::runtime::cuda"]),
    ("mode feature", "inductor::modes::fx_graph_cache", &["inductor::compile_fx"]),
    ("codegen target", "inductor::target::c", &["inductor::target"]),
    ("codegen target", "inductor::target::cuda", &["inductor::target"]),
    ("codegen target", "inductor::target::interpreter", &["inductor::target"]),
];

/// The only Inductor modules that may name a device (`Device::Cpu`, `Device::Cuda`): the targets,
/// their runtimes and the GPU's mode features. Everything else asks the target.
const NAMES_DEVICES: &[&str] = &[
    "inductor::target",
    "inductor::runtime::host",
    "inductor::runtime::cuda",
    "inductor::modes::autotune",
    "inductor::modes::launch_tuning",
    "inductor::modes::cudagraphs",
];

/// One source file: its module path (`fx::proxy`, or `` for `lib.rs`) and code lines.
struct Module {
    path: String,
    lines: Vec<String>,
}

fn load(dir: &Path, prefix: &[String], out: &mut Vec<Module>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("engine/src is readable").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for entry in entries {
        let name = entry.file_stem().unwrap().to_string_lossy().to_string();
        if entry.is_dir() {
            let mut inner = prefix.to_vec();
            inner.push(name);
            load(&entry, &inner, out);
        } else if entry.extension().is_some_and(|e| e == "rs") {
            let mut path = prefix.to_vec();
            if name != "mod" && name != "lib" {
                path.push(name);
            }
            let text = std::fs::read_to_string(&entry).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let lines = code.lines().filter(|l| !l.trim_start().starts_with("//")).map(str::to_string).collect();
            out.push(Module { path: path.join("::"), lines });
        }
    }
}

/// The paths a `use` tree or expression names after `start` (`crate::` or `super::`), with brace
/// groups expanded one level: `crate::{a::B, c}` gives `a::B` and `c`.
fn paths_after(line: &str, start: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find(start) {
        let after = &rest[at + start.len()..];
        let ident =
            |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect::<String>();
        let head = ident(after);
        let tail = &after[head.len()..];
        if tail.starts_with('{') {
            let group = &tail[1..tail.find('}').unwrap_or(tail.len())];
            for item in group.split(',') {
                let item = ident(item.trim());
                if !item.is_empty() {
                    found.push(format!("{head}{item}").trim_end_matches(':').to_string());
                }
            }
        } else {
            found.push(head.trim_end_matches(':').to_string());
        }
        rest = after;
    }
    found
}

/// Absolute module path segments a path in `module` names (`super::` resolved against it).
fn absolute(module: &str, path: &str, is_super: bool) -> Vec<String> {
    let mut segments: Vec<String> = if is_super {
        let mut parent: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
        parent.pop();
        parent
    } else {
        Vec::new()
    };
    let mut rest = path;
    while let Some(more) = rest.strip_prefix("super::") {
        segments.pop();
        rest = more;
    }
    segments.extend(rest.split("::").filter(|s| !s.is_empty() && *s != "self").map(str::to_string));
    segments
}

struct Engine {
    modules: BTreeSet<String>,
    /// `(module, name)` to the module a `pub use` in `module` takes `name` from.
    reexports: BTreeMap<(String, String), Vec<String>>,
}

impl Engine {
    /// The module that defines what `segments` names: the longest module prefix, followed
    /// through re-exports.
    fn resolve(&self, segments: &[String]) -> String {
        let mut depth = segments.len();
        while depth > 0 && !self.modules.contains(&segments[..depth].join("::")) {
            depth -= 1;
        }
        let module = segments[..depth].join("::");
        match segments.get(depth).and_then(|name| self.reexports.get(&(module.clone(), name.clone()))) {
            Some(source) if *source != segments[..depth] => {
                let mut next = source.clone();
                next.extend_from_slice(&segments[depth + 1..]);
                self.resolve(&next)
            }
            _ => module,
        }
    }
}

fn layer_of(module: &str) -> Option<(usize, &'static str)> {
    let matches = |prefix: &str| module == prefix || module.starts_with(&format!("{prefix}::"));
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, (name, prefixes))| prefixes.iter().filter(|p| matches(p)).map(move |p| (p.len(), i, *name)))
        .max()
        .map(|(_, i, name)| (i, name))
}

/// Every import as `(from module, to module, is a re-export)`.
fn imports() -> Vec<(String, String, bool)> {
    let mut modules = Vec::new();
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &[], &mut modules);
    let mut engine = Engine { modules: modules.iter().map(|m| m.path.clone()).collect(), reexports: BTreeMap::new() };
    for m in &modules {
        for line in m.lines.iter().filter(|l| l.trim_start().starts_with("pub")) {
            let Some(tree) = line.split(" use ").nth(1) else { continue };
            let tree = tree.trim_end_matches(';');
            for path in paths_after(&format!("self::{tree}"), "self::") {
                let mut segments = if let Some(p) = path.strip_prefix("crate::") {
                    absolute("", p, false)
                } else if let Some(p) = path.strip_prefix("super::") {
                    absolute(&m.path, p, true)
                } else {
                    absolute("", &format!("{}::{path}", m.path), false)
                };
                if let Some(name) = segments.pop() {
                    engine.reexports.insert((m.path.clone(), name), segments);
                }
            }
        }
    }
    let mut edges = Vec::new();
    for m in &modules {
        for line in &m.lines {
            let reexport = line.trim_start().starts_with("pub") && line.contains(" use ");
            let targets = paths_after(line, "crate::")
                .into_iter()
                .map(|p| absolute("", &p, false))
                .chain(paths_after(line, "super::").into_iter().map(|p| absolute(&m.path, &p, true)));
            for target in targets {
                let to = engine.resolve(&target);
                if to != m.path && !to.is_empty() {
                    edges.push((m.path.clone(), to, reexport));
                }
            }
        }
    }
    edges
}

#[test]
fn no_module_imports_a_higher_layer() {
    let mut violations = BTreeSet::new();
    for (from, to, _) in imports() {
        let (Some((a, a_name)), Some((b, b_name))) = (layer_of(&from), layer_of(&to)) else {
            if !from.is_empty() {
                violations.insert(format!("{from} -> {to}: a module missing from LAYERS"));
            }
            continue;
        };
        if b > a {
            violations.insert(format!("{from} ({a_name}) imports {to} ({b_name}), a higher layer"));
        }
    }
    assert!(violations.is_empty(), "layer violations:\n{}", violations.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn no_import_loops() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to, reexport) in imports() {
        // A parent module importing its own child, or re-exporting, is how Rust lays out a
        // module tree, not a dependency of the parent's code on the child's.
        if !reexport && !to.starts_with(&format!("{from}::")) && !from.is_empty() {
            graph.entry(from).or_default().insert(to);
        }
    }
    let reaches = |from: &str, to: &str| {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from.to_string()]);
        while let Some(node) = todo.pop() {
            if node == to {
                return true;
            }
            if seen.insert(node.clone()) {
                todo.extend(graph.get(&node).into_iter().flatten().cloned());
            }
        }
        false
    };
    // An import from `a` to `b` closes a loop when `b` leads back to `a`.
    let looping: Vec<String> = graph
        .iter()
        .flat_map(|(a, targets)| targets.iter().map(move |b| (a, b)))
        .filter(|(a, b)| reaches(b, a))
        .map(|(a, b)| format!("{a} -> {b}"))
        .collect();
    assert!(looping.is_empty(), "imports that are part of a loop:\n{}", looping.join("\n"));
}

#[test]
fn fast_paths_mode_features_and_targets_are_named_only_where_they_plug_in() {
    let within = |module: &str, prefix: &str| module == prefix || module.starts_with(&format!("{prefix}::"));
    let allowed = |module: &str, entry: &str| match entry.strip_suffix("::*") {
        Some(prefix) => within(module, prefix),
        None => module == entry,
    };
    let mut violations = BTreeSet::new();
    for (from, to, _) in imports() {
        let rule = GUARDED.iter().filter(|(_, guarded, _)| within(&to, guarded)).max_by_key(|(_, g, _)| g.len());
        if let Some((kind, guarded, importers)) = rule
            && !within(&from, guarded)
            && !importers.iter().any(|e| allowed(&from, e))
        {
            violations.insert(format!("{from} imports {to}, a {kind}; only {} may", importers.join(", ")));
        }
    }
    assert!(violations.is_empty(), "seam violations:\n{}", violations.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn inductor_asks_its_target_instead_of_matching_on_devices() {
    let mut modules = Vec::new();
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &[], &mut modules);
    let offenders: Vec<String> = modules
        .iter()
        .filter(|m| m.path.starts_with("inductor"))
        .filter(|m| !NAMES_DEVICES.iter().any(|n| m.path == *n || m.path.starts_with(&format!("{n}::"))))
        .filter(|m| m.lines.iter().any(|l| l.contains("Device::Cpu") || l.contains("Device::Cuda")))
        .map(|m| m.path.clone())
        .collect();
    assert!(offenders.is_empty(), "modules that match on devices instead of asking the target: {offenders:?}");
}

#[test]
fn the_interpreter_target_is_at_most_six_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/inductor/target/interpreter");
    let files = std::fs::read_dir(&dir).expect("the interpreter target is a folder").count();
    assert!(files <= 6, "the interpreter target has {files} files; the seam promises a target in at most six");
}
