//! The compiled function's cache, the analogue of Dynamo's per-code-object cache entries: for
//! each *resume point* (the function's start, and the line after each graph break, like
//! Dynamo's resume functions) a list of compiled graphs with their guards, newest first.
//!
//! A miss on a resume point that already has graphs is a *recompile*: the `recompiles` log says
//! which guard failed. Every input size that differs from the one the first graph was compiled
//! for becomes dynamic for the next graph, whatever guard failed (automatic dynamic shapes: Dynamo
//! merges each compile's sizes into its frame state). Past the recompile limit, the graph runs
//! eagerly.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::guards::{GuardFailure, Guards, first_difference, wants_grad};
use super::options::Options;
use super::stats::CompileStats;
use crate::backends::CompiledGraph;
use crate::compile_time::{self, CompileRecord, Stage, StageTimes};
use crate::error::{Result, SourceLocation};
use crate::fx::proxy::{InputOrigin, Traced};
use crate::fx::{Graph, Interpreter};
use crate::logs::{self, Artifact};
use crate::tensor::Tensor;
use crate::trace_structured::{self, CompileId};
use serde_json::json;

/// Every graph a compiled function has compiled, and its counters.
#[derive(Default)]
pub(crate) struct Cache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    frames: Vec<Frame>,
    stats: CompileStats,
    /// The function's number in the compile trace, given on its first compile.
    function_id: Option<u32>,
}

/// What a lookup found: the compiled graph to run, which compile made it (none for a graph run
/// eagerly past the recompile limit), and whether that compile happened now.
pub(crate) struct Found {
    pub compiled: Arc<dyn CompiledGraph>,
    pub id: Option<CompileId>,
    pub compiled_now: bool,
}

/// Where a call came from, for the compile trace's stack, and how long its trace took.
pub(crate) struct CallSite {
    /// Where the compiled function was called.
    pub called_at: SourceLocation,
    /// How long the trace of this graph took (counted only if it compiles).
    pub tracing: Duration,
}

/// The graphs of one resume point.
struct Frame {
    resumed_at: Option<SourceLocation>,
    entries: Vec<Entry>,
    /// Per input, the dims that have changed size between compiles (or all, under `dynamic(true)`).
    dynamic: Vec<BTreeSet<usize>>,
    /// Per input, its sizes at the first compile: Dynamo's frame state, against which a later
    /// compile's sizes are compared.
    first_sizes: Vec<Vec<usize>>,
    warned: bool,
}

struct Entry {
    /// Which compile made it.
    id: CompileId,
    /// Shared with the traces that follow it (see `fx/proxy/cached_graph.rs`).
    graph: Arc<Graph>,
    guards: Guards,
    compiled: Arc<dyn CompiledGraph>,
}

impl Frame {
    fn label(&self) -> String {
        match self.resumed_at {
            None => "its graph at the start".into(),
            Some(location) => format!("its graph resuming after the break at {}", location.short()),
        }
    }

    /// The dims to make symbolic in a trace with these inputs.
    fn marking(&mut self, traced: &Traced, options: &Options) -> Vec<Vec<usize>> {
        let n = traced.origins.len();
        if self.dynamic.len() < n {
            self.dynamic.resize(n, BTreeSet::new());
        }
        if options.dynamic == Some(true) {
            for (i, origin) in traced.origins.iter().enumerate() {
                if *origin != InputOrigin::Captured {
                    let graph = traced.recorded();
                    self.dynamic[i].extend(0..graph.node(graph.placeholders()[i]).meta.shape.len());
                }
            }
        }
        self.dynamic[..n].iter().map(|dims| dims.iter().copied().collect()).collect()
    }
}

impl Frame {
    /// Marks dynamic every size of an input (not a captured one) that differs from its size at the
    /// first compile, as Dynamo's frame state does (a changed rank marks every dim); returns the
    /// `(input, dim)` pairs newly marked.
    fn mark_changed_sizes(&mut self, traced: &Traced, inputs: &[Tensor], options: &Options) -> Vec<(usize, usize)> {
        let _ = self.marking(traced, options);
        let mut marked = Vec::new();
        for (input, (tensor, first)) in inputs.iter().zip(&self.first_sizes).enumerate() {
            if traced.origins[input] == InputOrigin::Captured {
                continue;
            }
            let shape = tensor.shape();
            let changed = (0..shape.len()).filter(|&d| first.len() != shape.len() || first[d] != shape[d]);
            marked.extend(changed.filter(|&dim| self.dynamic[input].insert(dim)).map(|dim| (input, dim)));
        }
        marked
    }
}

impl Cache {
    /// A new cache for a compiled function, counted by [`counters`](super::counters).
    pub fn registered() -> Arc<Cache> {
        let cache = Arc::new(Cache::default());
        super::stats::register(&cache);
        cache
    }
}

impl super::stats::Counted for Cache {
    fn stats(&self) -> CompileStats {
        Cache::stats(self)
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        super::stats::count_dropped(&inner.stats);
    }
}

impl Cache {
    pub fn stats(&self) -> CompileStats {
        self.inner.lock().expect("cache lock").stats
    }

    /// Counts a call and returns the graph its trace should follow (with `follow`): the newest
    /// one compiled for the function's start, when that one is static (a dynamic graph is
    /// compared after a re-trace, not followed). One lock for both, on every call's path.
    pub fn start_call(&self, follow: bool) -> Option<Arc<Graph>> {
        let mut inner = self.inner.lock().expect("cache lock");
        inner.stats.calls += 1;
        if !follow {
            return None;
        }
        let frame = inner.frames.iter().find(|f| f.resumed_at.is_none())?;
        let newest = frame.entries.last()?;
        (!newest.graph.is_dynamic()).then(|| newest.graph.clone())
    }

    /// Counts the compiles a compiled graph made while it ran (see
    /// [`compile_time::take_deferred`]), and logs them.
    /// `id` is the compile of the graph that ran.
    pub fn count_deferred(&self, name: &str, id: Option<CompileId>) {
        let deferred = compile_time::take_deferred();
        if deferred.is_empty() {
            return;
        }
        let mut inner = self.inner.lock().expect("cache lock");
        for (what, record) in deferred {
            inner.stats.specializations += 1;
            inner.stats.compile_time += record.wall;
            inner.stats.stages.merge(&record.stages());
            logs::log(Artifact::CompileTime, || format!("{what} of `{name}`: {}", record.describe()));
            trace_structured::emit_for(id, "specialization", || {
                let mut fields = metrics(&record, &StageTimes::default());
                fields["what"] = json!(what);
                fields
            });
        }
    }

    pub fn count_break(&self) {
        self.inner.lock().expect("cache lock").stats.graph_breaks += 1;
    }

    /// The compiled form of a traced graph: a cached one whose guards pass, a new one, or (past
    /// the recompile limit) the graph run eagerly.
    /// `tracing` is how long the trace took (counted only if it compiles).
    pub fn lookup_or_compile(
        &self,
        traced: &Traced,
        inputs: &[Tensor],
        options: &Options,
        site: &CallSite,
    ) -> Result<Found> {
        crate::wires::trip(crate::wires::Wire::DynamoCache);
        let mut inner = self.inner.lock().expect("cache lock");
        let Inner { frames, stats, function_id } = &mut *inner;
        let frame_index = match frames.iter().position(|f| f.resumed_at == traced.resumed_at) {
            Some(i) => i,
            None => {
                let frame = Frame {
                    resumed_at: traced.resumed_at,
                    entries: Vec::new(),
                    dynamic: Vec::new(),
                    first_sizes: Vec::new(),
                    warned: false,
                };
                frames.push(frame);
                frames.len() - 1
            }
        };
        let frame = &mut frames[frame_index];
        // Each set of dynamic dims is re-traced once per call at most; a static trace is compared
        // as it is.
        let mut generalized: Vec<(Vec<Vec<usize>>, Graph)> = Vec::new();
        let mut compare = |dims: &[Vec<usize>], cached: &Graph| -> std::result::Result<Option<String>, String> {
            if dims.iter().all(Vec::is_empty) {
                return Ok(first_difference(cached, traced.recorded()));
            }
            let index = match generalized.iter().position(|(d, _)| d == dims) {
                Some(i) => i,
                None => {
                    generalized.push((dims.to_vec(), generalize(traced, dims)?));
                    generalized.len() - 1
                }
            };
            Ok(first_difference(cached, &generalized[index].1))
        };
        let mut failures: Vec<(usize, GuardFailure)> = Vec::new();
        for (e, entry) in frame.entries.iter().enumerate().rev() {
            match entry.guards.check(&entry.graph, inputs, &mut compare) {
                Ok(()) => {
                    stats.cache_hits += 1;
                    return Ok(Found { compiled: entry.compiled.clone(), id: Some(entry.id), compiled_now: false });
                }
                Err(failure) => failures.push((e, failure)),
            }
        }
        let id = |e: usize| format!("{frame_index}/{e}");
        if frame.entries.len() >= options.recompile_limit {
            stats.eager_fallbacks += 1;
            if !std::mem::replace(&mut frame.warned, true) {
                let last =
                    failures.first().map(|(e, f)| format!(" Last guard failure: {}: {f}.", id(*e))).unwrap_or_default();
                logs::warn(|| {
                    format!(
                        "`{}` hit the recompile limit ({}) for {}; from now on a trace that misses the \
                     cache runs eagerly.{last} To see every recompile, set ENGINE_LOGS=recompiles.",
                        options.name,
                        options.recompile_limit,
                        frame.label()
                    )
                });
            }
            let eager = Arc::new(Interpreter::new(traced.recorded().clone()));
            return Ok(Found { compiled: eager, id: None, compiled_now: false });
        }
        let mut reason = vec!["first compile".to_string()];
        // A graph compiled with a backward has static sizes: its joint graph is traced for them. A
        // graph that updates state (a training step with its optimizer) is compiled as it is.
        let requires_grad: Vec<bool> = inputs.iter().map(wants_grad).collect();
        let training = requires_grad.iter().any(|&r| r) && !traced.updates_state;
        if !failures.is_empty() {
            stats.recompiles += 1;
            let mut lines = vec![format!(
                "Recompiling `{}` ({}): triggered by the following guard failure(s):",
                options.name,
                frame.label()
            )];
            lines.extend(failures.iter().map(|(e, f)| format!("    - {}: {f}", id(*e))));
            if training && failures.iter().any(|(_, f)| f.size.is_some()) {
                lines.push("    the new graph has a backward, so it is compiled for these static sizes".into());
            } else if options.dynamic.is_none() {
                for (input, dim) in frame.mark_changed_sizes(traced, inputs, options) {
                    lines.push(format!("    automatic dynamic shapes: input {input} dim {dim} is dynamic from now on"));
                }
            }
            logs::log(Artifact::Recompiles, || lines.join("\n"));
            reason = lines;
        }
        if frame.first_sizes.len() < inputs.len() {
            frame.first_sizes.extend(inputs[frame.first_sizes.len()..].iter().map(|t| t.shape().to_vec()));
        }
        let traced_for = StageTimes::one(Stage::Tracing, site.tracing);
        let marking = frame.marking(traced, options);
        let marking = if training { vec![Vec::new(); marking.len()] } else { marking };
        let graph = generalize(traced, &marking)
            .map_err(|message| crate::error::Error::Backend { backend: options.backend.name().to_string(), message })?;
        let guards = Guards::new(&graph, traced, inputs, marking);
        let e = frame.entries.len();
        logs::log(Artifact::Graph, || format!("graph {} of `{}` ({}):\n{graph}", id(e), options.name, frame.label()));
        logs::log(Artifact::Guards, || {
            let lines: Vec<String> = guards.describe(&graph).into_iter().map(|l| format!("    {l}")).collect();
            format!("guards of graph {} of `{}`:\n{}", id(e), options.name, lines.join("\n"))
        });
        let function = *function_id.get_or_insert_with(trace_structured::next_function_id);
        let compile_id = CompileId { function, resume: frame_index as u32, attempt: e as u32 };
        trace_structured::emit_for(Some(compile_id), "dynamo_start", || {
            let mut stack =
                vec![format!("compiled at {}", options.defined_at), format!("called at {}", site.called_at)];
            stack.extend(frame.resumed_at.map(|at| format!("resumed after the graph break at {at}")));
            json!({ "function": &*options.name, "stack": stack, "reason": reason })
        });
        trace_structured::emit_for(
            Some(compile_id),
            "graph",
            || json!({ "name": "dynamo_output_graph", "text": graph.to_string() }),
        );
        trace_structured::emit_for(Some(compile_id), "guards", || json!({ "guards": guards.describe(&graph) }));
        let (compiled, record) = trace_structured::with_compile(compile_id, || {
            compile_time::record(|| {
                if training {
                    options.backend.compile_for_training(&graph, inputs, &requires_grad, options.mode)
                } else {
                    options.backend.compile_in_mode(&graph, inputs, options.mode)
                }
            })
        });
        trace_structured::emit_for(Some(compile_id), "compile_metrics", || {
            let mut fields = metrics(&record, &traced_for);
            if let Err(error) = &compiled {
                fields["error"] = json!(error.to_string());
            }
            fields
        });
        let compiled: Arc<dyn CompiledGraph> = Arc::from(compiled?);
        let mut stages = record.stages();
        stages.merge(&traced_for);
        stats.compiles += 1;
        stats.compile_time += record.wall + traced_for.get(Stage::Tracing);
        stats.stages.merge(&stages);
        logs::log(Artifact::CompileTime, || {
            format!("compile of graph {} of `{}`: {}", id(e), options.name, describe(&record, &traced_for))
        });
        frame.entries.push(Entry { id: compile_id, graph: Arc::new(graph), guards, compiled: compiled.clone() });
        Ok(Found { compiled, id: Some(compile_id), compiled_now: true })
    }
}

/// A compile's times for the trace: the whole, by stage, and every compiler run and load.
fn metrics(record: &CompileRecord, traced: &StageTimes) -> serde_json::Value {
    let mut stages = record.stages();
    stages.merge(traced);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let by_stage: Vec<serde_json::Value> =
        stages.nonzero().into_iter().map(|(s, t)| json!({ "stage": s.name(), "ms": ms(t) })).collect();
    let events: Vec<serde_json::Value> = record
        .events
        .iter()
        .map(|e| json!({ "stage": e.stage.name(), "what": e.what, "ms": ms(e.duration), "cached": e.cached }))
        .collect();
    json!({
        "wall_ms": ms(record.wall + traced.get(Stage::Tracing)),
        "stages_ms": by_stage,
        "compiler_runs": stages.compiler_runs,
        "disk_cache_hits": stages.cache_hits,
        "events": events,
    })
}

/// The compile log's lines for one compile: the trace, then the backend's record.
fn describe(record: &CompileRecord, traced: &StageTimes) -> String {
    let tracing = traced.get(Stage::Tracing).as_secs_f64() * 1e3;
    format!("tracing {tracing:.1} ms, then {}", record.describe())
}

/// The trace's graph with `dims` of each input symbolic (the graph itself when none are).
fn generalize(traced: &Traced, dims: &[Vec<usize>]) -> std::result::Result<Graph, String> {
    if dims.iter().all(Vec::is_empty) {
        return Ok(traced.recorded().clone());
    }
    traced.recorded().generalized(dims).map_err(|e| format!("could not re-trace with dynamic sizes: {e}"))
}
