//! The structured compile trace, the analogue of PyTorch's `TORCH_TRACE` (`trace_structured` in
//! `torch._logging`): with `ENGINE_TRACE=DIR` (or [`trace_to`] from code), every compile writes
//! JSON records, one per line, to a file of its own process in `DIR`, for `compile-report` to
//! render as HTML (as `tlparse` renders PyTorch's).
//!
//! Each record has a `kind`, the [`CompileId`] of the compile it belongs to (when it belongs to
//! one), and the kind's fields:
//!
//! | kind | written by | fields |
//! | --- | --- | --- |
//! | `dynamo_start` | dynamo, as a compile starts | `function`, `stack` (where it was compiled, called, resumed), `reason` (first compile, or the guard failures of a recompile) |
//! | `graph` | dynamo (`dynamo_output_graph`), later passes (AOTAutograd's joint, forward and backward graphs) through [`graph`] | `name`, `text` (the graph printed with source lines) |
//! | `guards` | dynamo | `guards` (one line each) |
//! | `graph_break` | dynamo, at a break | `function`, `reason`, `location`, `graph` (graphs of the call before it) |
//! | `fusion` | Inductor | `text` (pattern rewrites and fusion decisions) |
//! | `output_code` | Inductor | `output_code` (every kernel with the nodes it fused, their source lines, its source, the call plan) |
//! | `fx_graph_cache` | Inductor | `result`: `hit`, `miss` or `bypass` |
//! | `compile_metrics` | dynamo, as a compile ends | `wall_ms`, `stages_ms` (`stage`, `ms` in pipeline order), `compiler_runs`, `disk_cache_hits`, `events` (each piece timed: `stage`, `what`, `ms`, `cached`), `error` if it failed |
//! | `specialization` | dynamo, after a dynamic graph compiled for new sizes while running | `what`, `wall_ms`, `stages_ms`, `events` |
//!
//! Records of a compile are written while it runs on the thread that compiles it:
//! [`with_compile`] names the compile for the records written inside it, so a pass deep in the
//! backend calls [`graph`] or [`emit`] without knowing its id.

use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Which compile a record belongs to: the compiled function (numbered in the order functions
/// first compiled in this process), its resume point (0 for its start, then one per graph break
/// met), and the attempt (0 for the first graph of that resume point, then one per recompile).
/// Printed `[function/resume/attempt]`, as tlparse prints Dynamo's `[frame/compile]` ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CompileId {
    /// The compiled function.
    pub function: u32,
    /// Its resume point: 0 at its start, then one per graph break.
    pub resume: u32,
    /// Its graphs at that resume point: 0, then one per recompile.
    pub attempt: u32,
}

impl fmt::Display for CompileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}/{}/{}]", self.function, self.resume, self.attempt)
    }
}

/// A number for a compiled function that compiles for the first time.
pub fn next_function_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Where the trace goes: a file opened on the first record, or nowhere.
struct Sink {
    dir: Option<PathBuf>,
    file: Option<BufWriter<File>>,
    failed: bool,
}

fn sink() -> &'static Mutex<Sink> {
    static SINK: OnceLock<Mutex<Sink>> = OnceLock::new();
    SINK.get_or_init(|| {
        let dir = std::env::var_os("ENGINE_TRACE").filter(|d| !d.is_empty()).map(PathBuf::from);
        Mutex::new(Sink { dir, file: None, failed: false })
    })
}

/// Writes the trace to `dir` from now on, as `ENGINE_TRACE=DIR` does (a later call moves it to
/// another file; `None` stops tracing).
pub fn trace_to(dir: Option<&Path>) {
    let mut sink = sink().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(file) = sink.file.as_mut() {
        let _ = file.flush();
    }
    *sink = Sink { dir: dir.map(Path::to_path_buf), file: None, failed: false };
}

/// Whether records are being written.
pub fn enabled() -> bool {
    sink().lock().unwrap_or_else(|e| e.into_inner()).dir.is_some()
}

/// Writes any buffered records to the file.
pub fn flush() {
    if let Some(file) = sink().lock().unwrap_or_else(|e| e.into_inner()).file.as_mut() {
        let _ = file.flush();
    }
}

thread_local! {
    static CURRENT: RefCell<Option<CompileId>> = const { RefCell::new(None) };
}

/// Runs `f` with `id` as the compile the records written inside it belong to.
pub fn with_compile<T>(id: CompileId, f: impl FnOnce() -> T) -> T {
    let previous = CURRENT.with(|c| c.replace(Some(id)));
    let result = f();
    CURRENT.with(|c| *c.borrow_mut() = previous);
    result
}

/// The compile running on this thread, if any.
pub fn current_compile() -> Option<CompileId> {
    CURRENT.with(|c| *c.borrow())
}

/// Writes one record of `kind` for the current compile (if any): `fields` (a JSON object, built
/// only when tracing is on) with `kind` and `compile_id` added.
pub fn emit(kind: &str, fields: impl FnOnce() -> Value) {
    emit_for(current_compile(), kind, fields);
}

/// [`emit`] for the compile `id`.
pub fn emit_for(id: Option<CompileId>, kind: &str, fields: impl FnOnce() -> Value) {
    let mut sink = sink().lock().unwrap_or_else(|e| e.into_inner());
    let Some(dir) = sink.dir.clone() else { return };
    if sink.failed {
        return;
    }
    if sink.file.is_none() {
        match open(&dir) {
            Ok(file) => sink.file = Some(file),
            Err(e) => {
                sink.failed = true;
                drop(sink);
                crate::logs::warn(|| {
                    format!("ENGINE_TRACE: cannot write a trace in {} ({e}); tracing is off", dir.display())
                });
                return;
            }
        }
    }
    let mut record = match fields() {
        Value::Object(map) => map,
        other => serde_json::Map::from_iter([("value".to_string(), other)]),
    };
    record.insert("kind".into(), json!(kind));
    if let Some(id) = id {
        record.insert("compile_id".into(), json!(id));
    }
    let file = sink.file.as_mut().expect("opened above");
    let written = serde_json::to_writer(&mut *file, &record).map_err(std::io::Error::from).and_then(|()| {
        file.write_all(b"\n")?;
        file.flush()
    });
    if written.is_err() {
        sink.failed = true;
    }
}

/// Writes a named graph of the current compile: what a pass that makes a graph (AOTAutograd's
/// joint, forward and backward graphs, a rewrite's result) calls to put it in the report, beside
/// the graph Dynamo captured.
pub fn graph(name: &str, text: impl FnOnce() -> String) {
    emit("graph", || json!({ "name": name, "text": text() }));
}

/// A new file for this process's records in `dir` (created if missing).
fn open(dir: &Path) -> std::io::Result<BufWriter<File>> {
    std::fs::create_dir_all(dir)?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let path = dir.join(format!("engine_trace.{}.{stamp}.jsonl", std::process::id()));
    Ok(BufWriter::new(File::create(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_carry_their_compile_and_kind() {
        let dir = std::env::temp_dir().join(format!("engine-trace-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        trace_to(Some(&dir));
        let id = CompileId { function: 7, resume: 1, attempt: 2 };
        with_compile(id, || graph("aot_forward_graph", || "graph(x):".into()));
        emit("note", || json!({ "text": "outside a compile" }));
        trace_to(None);
        let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
        let lines: Vec<Value> =
            std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[0]["kind"], "graph");
        assert_eq!(lines[0]["name"], "aot_forward_graph");
        assert_eq!(lines[0]["compile_id"], json!({ "function": 7, "resume": 1, "attempt": 2 }));
        assert!(lines[1].get("compile_id").is_none());
        assert_eq!(id.to_string(), "[7/1/2]");
        let _ = std::fs::remove_dir_all(dir);
    }
}
