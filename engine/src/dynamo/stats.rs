//! The counters a compiled function keeps (calls, compiles, cache hits, recompiles, graph
//! breaks, and where compile time went), the analogue of `torch._dynamo.utils.counters` and
//! `compile_times()`.

use std::time::Duration;

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
