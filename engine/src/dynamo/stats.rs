//! The counters a compiled function keeps (calls, compiles, cache hits, recompiles, graph
//! breaks), the analogue of `torch._dynamo.utils.counters`.

use std::time::Duration;

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
    /// Time spent inside the backend's `compile`, summed.
    pub compile_time: Duration,
}
