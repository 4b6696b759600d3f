//! Reading a compile trace: the JSON records `ENGINE_TRACE` writes (see
//! `engine::trace_structured`), grouped into runs (one file each, one process each) and, within a
//! run, into compiles by their id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use engine::trace_structured::CompileId;
use serde_json::Value;

/// One process's trace.
pub struct Run {
    /// The file it was read from.
    pub file: PathBuf,
    /// Its compiles, in id order.
    pub compiles: BTreeMap<CompileId, Compile>,
    /// Records of no compile, or of a kind the report does not know (kept, and listed).
    pub other: Vec<Value>,
}

/// Everything the trace says about one compile.
#[derive(Default)]
pub struct Compile {
    /// How the compiled function is named.
    pub function: String,
    /// Where it was compiled, called, resumed.
    pub stack: Vec<String>,
    /// Why it compiled: a first compile, or a recompile's guard failures.
    pub reason: Vec<String>,
    /// Its graphs, by name, in the order they were written.
    pub graphs: Vec<(String, String)>,
    /// Its guards, one per line.
    pub guards: Vec<String>,
    /// Pattern rewrites and fusion decisions.
    pub fusion: Option<String>,
    /// The output code as data (`engine::inductor::OutputCode`) and as printed.
    pub output_code: Option<(Value, String)>,
    /// The FX graph cache's answer: `hit`, `miss` or `bypass`.
    pub fx_graph_cache: Option<String>,
    /// Times by stage and each compiler run or load.
    pub metrics: Option<Value>,
    /// The graph break the graph ends at, if it does.
    pub graph_break: Option<Value>,
    /// Compiles of this graph for new sizes, made while it ran.
    pub specializations: Vec<Value>,
}

/// How a compile ended, for the index's colours.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It compiled.
    Compiled,
    /// It compiled, and its graph ends at a graph break.
    Break,
    /// A recompile (an earlier graph's guards failed).
    Recompile,
    /// The backend failed.
    Failed,
}

impl Status {
    /// The CSS class and the word the index shows.
    pub fn name(self) -> &'static str {
        match self {
            Status::Compiled => "compiled",
            Status::Break => "graph break",
            Status::Recompile => "recompile",
            Status::Failed => "failed",
        }
    }

    /// The CSS class.
    pub fn class(self) -> &'static str {
        match self {
            Status::Compiled => "ok",
            Status::Break => "break",
            Status::Recompile => "recompile",
            Status::Failed => "failed",
        }
    }
}

impl Compile {
    /// How it ended.
    pub fn status(&self, id: CompileId) -> Status {
        if self.metrics.as_ref().is_some_and(|m| m.get("error").is_some()) {
            Status::Failed
        } else if self.graph_break.is_some() {
            Status::Break
        } else if id.attempt > 0 {
            Status::Recompile
        } else {
            Status::Compiled
        }
    }

    /// Milliseconds the compile took, if its metrics were written.
    pub fn wall_ms(&self) -> Option<f64> {
        self.metrics.as_ref().and_then(|m| m["wall_ms"].as_f64())
    }

    /// Kernels in its output code.
    pub fn kernel_count(&self) -> usize {
        self.output_code.as_ref().and_then(|(v, _)| v["kernels"].as_array().map(Vec::len)).unwrap_or(0)
    }
}

/// Every run of `path`: a trace file, or a folder of them (`engine_trace.*.jsonl`).
pub fn read(path: &Path) -> Result<Vec<Run>> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    if files.is_empty() {
        bail!("no trace in {} (files named *.jsonl, written with ENGINE_TRACE={0})", path.display());
    }
    files.iter().map(|f| read_run(f)).collect()
}

fn read_run(file: &Path) -> Result<Run> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut run = Run { file: file.to_path_buf(), compiles: BTreeMap::new(), other: Vec::new() };
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let record: Value =
            serde_json::from_str(line).with_context(|| format!("{}:{}: not a JSON record", file.display(), n + 1))?;
        let id: Option<CompileId> = record.get("compile_id").and_then(|v| serde_json::from_value(v.clone()).ok());
        let Some(id) = id else {
            run.other.push(record);
            continue;
        };
        let compile = run.compiles.entry(id).or_default();
        let text = |key: &str| record[key].as_str().unwrap_or_default().to_string();
        let lines = |key: &str| -> Vec<String> {
            record[key]
                .as_array()
                .map(|a| a.iter().filter_map(|l| l.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        match record["kind"].as_str().unwrap_or_default() {
            "dynamo_start" => {
                compile.function = text("function");
                compile.stack = lines("stack");
                compile.reason = lines("reason");
            }
            "graph" => compile.graphs.push((text("name"), text("text"))),
            "guards" => compile.guards = lines("guards"),
            "fusion" => compile.fusion = Some(text("text")),
            "output_code" => compile.output_code = Some((record["output_code"].clone(), text("text"))),
            "fx_graph_cache" => compile.fx_graph_cache = Some(text("result")),
            "compile_metrics" => compile.metrics = Some(record),
            "graph_break" => compile.graph_break = Some(record),
            "specialization" => compile.specializations.push(record),
            _ => run.other.push(record),
        }
    }
    Ok(run)
}
