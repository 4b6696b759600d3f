//! The FX graph cache, modelled on PyTorch's `FxGraphCache` (`torch/_inductor/codecache.py`): the
//! compiled artifact of a graph kept on disk under a key over everything that decides it, so that
//! compiling a graph compiled before (in this process or an earlier one) skips decomposition,
//! pattern rewrites, lowering, scheduling, code printing and max-autotune's choices, and only
//! builds the program (its kernels come from the kernel cache, already compiled).
//!
//! **Key** ([`disk::cache_key`](crate::codecache::cache_key)): a canonical text of the graph (every
//! node's name, op with its parameters, arguments, shape, symbolic shape, dtype, device and source
//! location; each placeholder's shape, strides and device; the outputs), the mode, the GEMM
//! backends, the target and its identity (the C compiler's on the CPU; the GPU's name, compute
//! capability and cuBLASLt version on a GPU; the interpreter's) and the engine's build identity (a
//! hash of its source, from `build.rs`). Names and locations are in the key because the output code prints them.
//!
//! **Bypass** (never cached, each logged under `ENGINE_LOGS=fx_graph_cache`): dynamic graphs,
//! custom ops, `cond`, and any [`Config`] with a replacement printer or a fusion decision other
//! than the engine's [`can_fuse`].
//!
//! **Value**: the output code (so logs and [`crate::inductor::CompiledModule::output_code`] are the same on
//! a hit), the fusion log, and the program as data (the target's program spec), stored as JSON through the
//! [`DiskCache`], whose checksums turn a corrupt entry into a warning and a fresh compile.
//!
//! Off with [`Config::fx_graph_cache`] or `ENGINE_FX_GRAPH_CACHE=0` (PyTorch's
//! `torch._inductor.config.fx_graph_cache`). [`counters`] counts hits, misses and bypasses
//! (PyTorch's `fxgraph_cache_hit`, `fxgraph_cache_miss`, `fxgraph_cache_bypass`).

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::codecache::{DiskCache, cache_key};
use crate::error::Result;
use crate::fx::{Graph, NodeKind};
use crate::inductor::config::Config;
use crate::inductor::output_code::OutputCode;
use crate::inductor::scheduler::{FusionPolicy, can_fuse};
use crate::inductor::serde_refs;
use crate::inductor::target::{ProgramSpec, Target};
use crate::logs::{self, Artifact};
use crate::op::Op;

/// The file extension of entries in the disk cache.
const EXT: &str = "fxgraph";

/// What the cache keeps for one graph: what a compile logs and returns, and the program as data.
#[derive(Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The output code, as the compile that made the entry returned it.
    pub output_code: OutputCode,
    /// What `ENGINE_LOGS=fusion` printed for it, printed again on a hit.
    pub fusion_log: String,
    /// The program, built by the target on a hit as on a miss.
    pub program: ProgramSpec,
}

/// The cache's answer for one graph.
pub(crate) enum Lookup {
    /// The entry, read back.
    Hit(Box<Entry>),
    /// Not there: compile, then [`Key::encode`] and [`Encoded::store`] the result.
    Miss(Key),
    /// Not cached (the cache is off, or the graph or config is one it never serves).
    Bypass,
}

/// The key of a graph the cache may hold.
pub(crate) struct Key(String);

/// An entry ready to store.
pub(crate) struct Encoded {
    key: String,
    bytes: Vec<u8>,
}

/// How many compiles the FX graph cache has served, missed and bypassed in this process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Compiles served from the cache (`fxgraph_cache_hit`).
    pub hits: usize,
    /// Compiles of a graph the cache did not hold (`fxgraph_cache_miss`).
    pub misses: usize,
    /// Compiles the cache refused to serve or store (`fxgraph_cache_bypass`).
    pub bypasses: usize,
}

static HITS: AtomicUsize = AtomicUsize::new(0);
static MISSES: AtomicUsize = AtomicUsize::new(0);
static BYPASSES: AtomicUsize = AtomicUsize::new(0);

/// The counters so far, over every thread of the process.
pub fn counters() -> Counters {
    Counters {
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
        bypasses: BYPASSES.load(Ordering::Relaxed),
    }
}

/// Whether `ENGINE_FX_GRAPH_CACHE=0` turned the cache off for the process (read once).
fn off_by_env() -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    *OFF.get_or_init(|| std::env::var("ENGINE_FX_GRAPH_CACHE").is_ok_and(|v| v.trim() == "0"))
}

fn log(message: impl FnOnce() -> String) {
    logs::log(Artifact::FxGraphCache, message);
}

/// Looks `graph`, compiled for `target` with `config`, up in the cache.
pub(crate) fn lookup(graph: &Graph, target: &dyn Target, config: &Config) -> Lookup {
    if !config.fx_graph_cache || off_by_env() {
        return Lookup::Bypass;
    }
    if let Some(reason) = bypass_reason(graph, config) {
        BYPASSES.fetch_add(1, Ordering::Relaxed);
        log(|| format!("bypass: {reason}"));
        return Lookup::Bypass;
    }
    let key = match key(graph, target, config) {
        Ok(key) => key,
        Err(e) => {
            BYPASSES.fetch_add(1, Ordering::Relaxed);
            log(|| format!("bypass: the device's identity is unknown ({e})"));
            return Lookup::Bypass;
        }
    };
    let cache = DiskCache::global();
    if let Some(bytes) = cache.read(&key, EXT) {
        match serde_refs::with_locations(graph, || serde_json::from_slice::<Entry>(&bytes)) {
            Ok(entry) => {
                HITS.fetch_add(1, Ordering::Relaxed);
                log(|| format!("hit {key}"));
                return Lookup::Hit(Box::new(entry));
            }
            Err(e) => logs::warn(|| {
                format!(
                    "FX graph cache entry {}.{EXT} cannot be read ({e}); compiling again",
                    cache.dir().join(&key).display()
                )
            }),
        }
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    log(|| format!("miss {key}"));
    Lookup::Miss(Key(key))
}

/// Why the cache must not serve or store this compile, or `None` when it may.
///
/// Grading integrity: the workbook's phase 4 plugs a learner's printers and fusion decision into
/// [`Config`], and the grader compiles with them. An artifact produced by other code (the engine's
/// own, or an earlier attempt) must never be served in their place, and the key cannot see what a
/// function pointer computes; so any config that is not the engine's own printers and fusion is
/// never cached. Custom ops are kernel code the key cannot see either; `cond` holds graphs of its
/// own; a dynamic graph compiles one program per binding of its sizes.
fn bypass_reason(graph: &Graph, config: &Config) -> Option<String> {
    let printers = config.printers;
    if printers.pointwise_c.is_some() || printers.pointwise_cuda.is_some() || printers.reduction_c.is_some() {
        return Some("a replacement kernel printer (Config::printers)".into());
    }
    // A false "different" only costs a compile; functions with identical code merged into one
    // address would also have produced identical artifacts.
    if !std::ptr::fn_addr_eq(config.fusion, can_fuse as FusionPolicy) {
        return Some("a fusion decision other than the engine's can_fuse (Config::fusion)".into());
    }
    if graph.is_dynamic() {
        return Some("dynamic shapes (symbolic sizes)".into());
    }
    graph.nodes().iter().find_map(|node| match node.op() {
        Some(Op::Custom(custom)) => Some(format!("the custom op `{}` (node `{}`)", custom.name(), node.name)),
        Some(Op::Cond { .. }) => Some(format!("`cond` subgraphs (node `{}`)", node.name)),
        _ => None,
    })
}

/// The key of `graph` compiled for `target` with `config`: see the module comment.
fn key(graph: &Graph, target: &dyn Target, config: &Config) -> Result<String> {
    Ok(cache_key(&[
        b"fx-graph-cache-2",
        env!("ENGINE_SOURCE_HASH").as_bytes(),
        canonical(graph).as_bytes(),
        config.mode.name().as_bytes(),
        format!("{:?}", config.gemm_backends).as_bytes(),
        format!("{:?}", config.split_reductions).as_bytes(),
        // The GEMMs' accumulation (TF32 or not) is fixed when they are chosen.
        crate::precision::float32_matmul_precision().name().as_bytes(),
        target.name().as_bytes(),
        format!("{:?}", target.device()).as_bytes(),
        target.identity()?.as_bytes(),
    ]))
}

/// The graph as text with everything that decides its compiled form. Not the graph's `Display`:
/// that leaves out placeholders' strides, concrete shapes and the full source locations. `Debug`
/// of ops and scalars writes every parameter, floats exactly.
fn canonical(graph: &Graph) -> String {
    let mut text = String::new();
    for (i, node) in graph.nodes().iter().enumerate() {
        let (name, meta, location) = (&node.name, &node.meta, node.location);
        let _ = match &node.kind {
            NodeKind::Placeholder { strides } => writeln!(
                text,
                "{i} placeholder {name} {:?} {:?} strides {strides:?} {:?}",
                meta.dtype, meta.shape, meta.device
            ),
            NodeKind::Call { op, args } => writeln!(
                text,
                "{i} call {name} {op:?} {args:?} {:?} {:?} {} {:?} at {location:?}",
                meta.dtype, meta.shape, node.sym_shape, meta.device
            ),
        };
    }
    let outputs: Vec<usize> = graph.outputs().iter().map(|o| o.index()).collect();
    let _ = writeln!(text, "outputs {outputs:?}");
    text
}

impl Key {
    /// The entry as it will be stored, or `None` (logged) when it cannot be written.
    pub(crate) fn encode(self, entry: &Entry) -> Option<Encoded> {
        match serde_json::to_vec(entry) {
            Ok(bytes) => Some(Encoded { key: self.0, bytes }),
            Err(e) => {
                log(|| format!("not stored: {e}"));
                None
            }
        }
    }
}

impl Encoded {
    /// Writes the entry; a failed write is a warning (the compile has succeeded all the same).
    pub(crate) fn store(self) {
        let cache = DiskCache::global();
        match cache.write(&self.key, EXT, &self.bytes) {
            Ok(()) => log(|| format!("stored {}", self.key)),
            Err(e) => logs::warn(|| format!("the FX graph cache entry could not be written ({e})")),
        }
    }
}
