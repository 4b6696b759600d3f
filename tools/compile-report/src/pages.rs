//! The report's pages: `index.html` (every compile of every run, grouped by compiled function,
//! with its stack, status and time), one page per compile (its reason, stages, graphs, guards,
//! fusion decisions, kernels with the nodes they fused, output code, the break it ends at), and a
//! stylesheet. Every page is static HTML with relative links, so the folder can be opened from
//! disk or served anywhere.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use engine::trace_structured::CompileId;
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use crate::highlight::{Lang, code_block};
use crate::trace::{Compile, Run};

const STYLE: &str = include_str!("style.css");

/// Writes the report of `runs` into `out` (created if missing); returns the number of pages.
pub fn write(runs: &[Run], out: &Path) -> Result<usize> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("style.css"), STYLE)?;
    let mut pages = 0;
    std::fs::write(out.join("index.html"), index(runs).into_string())?;
    pages += 1;
    for (r, run) in runs.iter().enumerate() {
        let ids: Vec<CompileId> = run.compiles.keys().copied().collect();
        for (i, (id, compile)) in run.compiles.iter().enumerate() {
            let neighbours = (i.checked_sub(1).map(|p| ids[p]), ids.get(i + 1).copied());
            let html = compile_page(r, run, *id, compile, neighbours).into_string();
            std::fs::write(out.join(page_name(r, *id)), html)?;
            pages += 1;
        }
    }
    Ok(pages)
}

/// The file of compile `id` of run `r`.
fn page_name(r: usize, id: CompileId) -> String {
    format!("run{r}_compile_{}_{}_{}.html", id.function, id.resume, id.attempt)
}

fn layout(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                link rel="stylesheet" href="style.css";
                link rel="icon" href="data:,";
            }
            body { main { (body) } }
        }
    }
}

/// The index: per run, the compiled functions, each with its compiles.
fn index(runs: &[Run]) -> Markup {
    let compiles: usize = runs.iter().map(|r| r.compiles.len()).sum();
    layout(
        "Compile report",
        html! {
            h1 { "Compile report" }
            p {
                (compiles) " compile(s) in " (runs.len()) " trace file(s). Each compile id reads "
                code { "[function/resume/attempt]" } ": the compiled function (in the order functions first compiled), "
                "its resume point (0 at its start, then one per graph break) and its attempt (0, then one per recompile)."
            }
            p.legend {
                span.ok { "compiled" } " " span.break { "ends at a graph break" } " "
                span.recompile { "recompile" } " " span.failed { "failed" }
            }
            @for (r, run) in runs.iter().enumerate() {
                h2 id=(format!("run{r}")) { "Trace " (r) ": " code { (file_name(&run.file)) } }
                @for (function, compiles) in by_function(run) {
                    h3 { (function) }
                    @if let Some((_, first)) = compiles.first() {
                        @if let Some(site) = first.stack.first() { p.stack { (site) } }
                    }
                    ul.compiles {
                        @for (id, compile) in &compiles {
                            @let status = compile.status(*id);
                            li class=(status.class()) {
                                a href=(page_name(r, *id)) { (id.to_string()) }
                                " " (status.name())
                                @if let Some(ms) = compile.wall_ms() { ", " (format!("{ms:.1} ms")) }
                                ", " (compile.kernel_count()) " kernel(s)"
                                @if id.resume > 0 { ", resumed after a graph break" }
                                @if let Some(b) = &compile.graph_break {
                                    ": breaks at " code { (b["location"].as_str().unwrap_or("?")) }
                                }
                                @if !compile.specializations.is_empty() {
                                    ", " (compile.specializations.len()) " specialization(s) for new sizes"
                                }
                            }
                        }
                    }
                }
                @if !run.other.is_empty() {
                    h3 { "Other records" }
                    (code_block(&pretty(&run.other), Lang::C))
                }
            }
        },
    )
}

/// A compiled function's name and its compiles.
type Function<'a> = (String, Vec<(CompileId, &'a Compile)>);

/// The compiles of `run` grouped by the function they compile, in order of first compile.
fn by_function(run: &Run) -> Vec<Function<'_>> {
    let mut groups: BTreeMap<u32, Function<'_>> = BTreeMap::new();
    for (id, compile) in &run.compiles {
        let group = groups.entry(id.function).or_insert_with(|| (compile.function.clone(), Vec::new()));
        if group.0.is_empty() {
            group.0 = compile.function.clone();
        }
        group.1.push((*id, compile));
    }
    groups.into_values().collect()
}

/// One compile's page.
fn compile_page(
    r: usize,
    run: &Run,
    id: CompileId,
    compile: &Compile,
    (previous, next): (Option<CompileId>, Option<CompileId>),
) -> Markup {
    let title = format!("Compile {id} of {}", compile.function);
    let siblings: Vec<CompileId> =
        run.compiles.keys().filter(|o| o.function == id.function && **o != id).copied().collect();
    let broke_before = (id.resume > 0)
        .then(|| {
            run.compiles
                .iter()
                .find(|(o, c)| o.function == id.function && o.resume == id.resume - 1 && c.graph_break.is_some())
        })
        .flatten()
        .map(|(o, _)| *o);
    html! {
        (layout(&title, html! {
            nav {
                a href="index.html" { "index" }
                @if let Some(p) = previous { " · " a href=(page_name(r, p)) { "previous " (p.to_string()) } }
                @if let Some(n) = next { " · " a href=(page_name(r, n)) { "next " (n.to_string()) } }
            }
            h1 { (title) }
            p.status { "Status: " span class=(compile.status(id).class()) { (compile.status(id).name()) } }
            h2 id="stack" { "Stack" }
            ul { @for line in &compile.stack { li { code { (line) } } } }
            @if let Some(before) = broke_before {
                p { "Resumes after the graph break that ends " a href=(page_name(r, before)) { (before.to_string()) } "." }
            }
            @if !siblings.is_empty() {
                p { "Other compiles of this function: "
                    @for (i, s) in siblings.iter().enumerate() {
                        @if i > 0 { ", " }
                        a href=(page_name(r, *s)) { (s.to_string()) }
                    }
                }
            }
            h2 id="reason" { "Why it compiled" }
            pre.code { code { (compile.reason.join("\n")) } }
            @if let Some(b) = &compile.graph_break {
                h2 id="graph-break" { "Graph break" }
                p { "The graph ends at " code { (b["location"].as_str().unwrap_or("?")) } ": " (b["reason"].as_str().unwrap_or("?")) }
            }
            (metrics(compile))
            @for (i, (name, text)) in compile.graphs.iter().enumerate() {
                h2 id=(format!("graph-{i}")) { "Graph: " (name) }
                (code_block(text, Lang::Graph))
            }
            @if !compile.guards.is_empty() {
                h2 id="guards" { "Guards (" (compile.guards.len()) ")" }
                ul { @for g in &compile.guards { li { code { (g) } } } }
            }
            @if let Some(fusion) = &compile.fusion {
                h2 id="fusion" { "Fusion decisions" }
                (code_block(fusion, Lang::Graph))
            }
            @if let Some((code, text)) = &compile.output_code {
                (kernels(code))
                h2 id="output-code" { "Output code" }
                (code_block(text, Lang::C))
            }
            @for (i, s) in compile.specializations.iter().enumerate() {
                h2 id=(format!("specialization-{i}")) { "Specialization: " (s["what"].as_str().unwrap_or("?")) }
                (stage_table(s))
            }
        }))
    }
}

/// The compile's times: by stage, then each compiler run and load.
fn metrics(compile: &Compile) -> Markup {
    let Some(m) = &compile.metrics else { return html! {} };
    html! {
        h2 id="metrics" { "Compile time" }
        p {
            (format!("{:.1} ms", m["wall_ms"].as_f64().unwrap_or(0.0))) " in all; the FX graph cache: "
            (compile.fx_graph_cache.as_deref().unwrap_or("not asked")) "; compiler runs: " (m["compiler_runs"].to_string())
            ", served by the disk cache: " (m["disk_cache_hits"].to_string()) "."
        }
        @if let Some(error) = m["error"].as_str() { p.failed { "The backend failed: " (error) } }
        (stage_table(m))
    }
}

/// A table of stage times and one of events, from a record with `stages_ms` and `events`.
fn stage_table(m: &Value) -> Markup {
    let stages = m["stages_ms"].as_array().cloned().unwrap_or_default();
    let events = m["events"].as_array().cloned().unwrap_or_default();
    html! {
        table.stages {
            thead { tr { th { "stage" } th { "ms" } } }
            tbody {
                @for s in &stages {
                    tr { td { (s["stage"].as_str().unwrap_or("")) } td.num { (format!("{:.1}", s["ms"].as_f64().unwrap_or(0.0))) } }
                }
            }
        }
        @if !events.is_empty() {
            table.events {
                thead { tr { th { "stage" } th { "what" } th { "ms" } th { "disk cache" } } }
                tbody {
                    @for e in &events {
                        tr {
                            td { (e["stage"].as_str().unwrap_or("")) }
                            td { (e["what"].as_str().unwrap_or("")) }
                            td.num { (format!("{:.1}", e["ms"].as_f64().unwrap_or(0.0))) }
                            td { @if e["cached"].as_bool() == Some(true) { "hit" } }
                        }
                    }
                }
            }
        }
    }
}

/// Each kernel with the graph nodes it fused and their source lines, then its source.
fn kernels(code: &Value) -> Markup {
    let kernels = code["kernels"].as_array().cloned().unwrap_or_default();
    html! {
        h2 id="kernels" { "Kernels (" (kernels.len()) ")" }
        @for (i, k) in kernels.iter().enumerate() {
            h3 id=(format!("kernel-{i}")) { code { (k["name"].as_str().unwrap_or("?")) } }
            @let origins = k["origins"].as_array().cloned().unwrap_or_default();
            p { "Fuses " (origins.len()) " node(s): " }
            ul.origins {
                @for o in &origins { li { code { (origin(o)) } } }
            }
            (code_block(k["source"].as_str().unwrap_or(""), Lang::C))
        }
    }
}

/// A fused node as `name (op) at file:line`, from whatever fields the origin has.
fn origin(o: &Value) -> String {
    let field = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    let name = field("node").or_else(|| field("name")).unwrap_or_else(|| o.to_string());
    match (field("op"), o.get("location").and_then(location)) {
        (Some(op), Some(at)) => format!("{name} ({op}) at {at}"),
        (Some(op), None) => format!("{name} ({op})"),
        (None, Some(at)) => format!("{name} at {at}"),
        (None, None) => name,
    }
}

/// A source location written as a string or as `{file, line, ...}`.
fn location(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => Some(format!("{}:{}", m.get("file")?.as_str()?, m.get("line")?)),
        _ => None,
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn pretty(values: &[Value]) -> String {
    values.iter().map(|v| serde_json::to_string_pretty(v).unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use engine::{Tensor, dynamo};

    use super::*;

    /// A function that breaks once and recompiles once, traced and rendered: a page per compile,
    /// every link of every page naming a page of the report, the break and the recompile shown.
    #[test]
    fn a_traced_function_renders_with_working_links() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace");
        engine::trace_structured::trace_to(Some(&trace));
        let f = dynamo::compile(|x: Tensor| {
            let y = x.mul(2.0)?.relu()?;
            let peak = y.sum_all()?.item()?;
            y.add(peak)?.tanh()
        })
        .name("breaks once");
        for rows in [4, 8] {
            f.call(&Tensor::randn(&[rows, 3], rows as u64)).unwrap();
        }
        engine::trace_structured::trace_to(None);
        let runs = crate::trace::read(&trace).unwrap();
        let out = dir.path().join("report");
        let pages = write(&runs, &out).unwrap();
        let compiles = &runs[0].compiles;
        assert_eq!(pages, 1 + compiles.len());
        assert_eq!(compiles.len(), 4, "two graphs around the break, each compiled for two batch sizes");
        for entry in std::fs::read_dir(&out).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "html") {
                continue;
            }
            let html = std::fs::read_to_string(&path).unwrap();
            for href in html.split("href=\"").skip(1).map(|rest| &rest[..rest.find('"').unwrap()]) {
                if !href.starts_with("data:") {
                    assert!(out.join(href).exists(), "{}: broken link {href}", path.display());
                }
            }
        }
        let first = std::fs::read_to_string(out.join("run0_compile_0_0_0.html")).unwrap();
        assert!(first.contains("Graph break") && first.contains("item()"), "{first}");
        let recompile = std::fs::read_to_string(out.join("run0_compile_0_0_1.html")).unwrap();
        assert!(recompile.contains("size mismatch at dim 0"), "{recompile}");
        assert!(recompile.contains("poi_fused"), "the kernels are listed");
    }
}
