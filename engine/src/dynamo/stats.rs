//! The counters a compiled function keeps (calls, compiles, cache hits, recompiles, graph
//! breaks, and where compile time went), the analogue of `torch._dynamo.utils.counters` and
//! `compile_times()`.

use std::time::Duration;

use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::compile_time::StageTimes;

/// Counters of what a compiled function has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Calls made.
    pub calls: usize,
    /// Graphs handed to the backend (cache misses that compiled).
    pub compiles: usize,
    /// Graphs whose compiled form was already cached.
    pub cache_hits: usize,
    /// Compiles caused by a guard failure of an existing graph (a subset of `compiles`).
    pub recompiles: usize,
    /// Graph breaks met, over all calls.
    pub graph_breaks: usize,
    /// Graphs run eagerly because their resume point hit the recompile limit.
    pub eager_fallbacks: usize,
    /// Compiles a backend made while a compiled graph ran: Inductor compiling a dynamic graph's
    /// kernels for sizes it had not met (no new graph, so not in `compiles`).
    pub specializations: usize,
    /// Time spent compiling, summed: tracing the calls that compiled, everything inside the
    /// backend's `compile`, and the specializations (wall-clock time).
    pub compile_time: Duration,
    /// The same time by stage (tracing, lowering, ..., each C or NVRTC compile, loading), summed
    /// over compiles. Compiles that ran in parallel each count, so the stages may add up to more
    /// than `compile_time`. `ENGINE_LOGS=compile_time` prints each compile's stages as it ends.
    pub stages: StageTimes,
}

impl CompileStats {
    /// Adds every counter of `other`.
    pub fn merge(&mut self, other: &CompileStats) {
        self.calls += other.calls;
        self.compiles += other.compiles;
        self.cache_hits += other.cache_hits;
        self.recompiles += other.recompiles;
        self.graph_breaks += other.graph_breaks;
        self.eager_fallbacks += other.eager_fallbacks;
        self.specializations += other.specializations;
        self.compile_time += other.compile_time;
        self.stages.merge(&other.stages);
    }
}

/// What keeps a compiled function's counters (its cache).
pub(crate) trait Counted: Send + Sync {
    /// The counters so far.
    fn stats(&self) -> CompileStats;
}

/// Every compiled function's cache this process made, for [`counters`]; and the counters of those
/// already dropped.
struct Registry {
    live: Vec<Weak<dyn Counted>>,
    dropped: CompileStats,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(Registry { live: Vec::new(), dropped: CompileStats::default() }))
}

/// Counts `counted` in [`counters`] while it lives.
pub(crate) fn register(counted: &Arc<impl Counted + 'static>) {
    let weak: Weak<dyn Counted> = Arc::downgrade(counted) as Weak<dyn Counted>;
    let mut registry = registry().lock().unwrap_or_else(|e| e.into_inner());
    registry.live.retain(|w| w.strong_count() > 0);
    registry.live.push(weak);
}

/// A dropped cache's counters stay in [`counters`].
pub(crate) fn count_dropped(stats: &CompileStats) {
    registry().lock().unwrap_or_else(|e| e.into_inner()).dropped.merge(stats);
}

/// What every compiled function of this process has done so far, summed: the analogue of
/// `torch._dynamo.utils.counters`, which is process-wide too. A grader or a benchmark reads it
/// before and after running code it did not write, to count that code's compiles.
pub fn counters() -> CompileStats {
    let (mut total, live) = {
        let registry = registry().lock().unwrap_or_else(|e| e.into_inner());
        (registry.dropped, registry.live.iter().filter_map(Weak::upgrade).collect::<Vec<_>>())
    };
    // Read with the registry unlocked: a cache dropped meanwhile (the last holder being this
    // list) adds its counters to `dropped`, which needs the lock.
    for cache in &live {
        total.merge(&cache.stats());
    }
    total
}
