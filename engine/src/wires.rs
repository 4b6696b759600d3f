//! Trip wires on the engine items that answer the workbook's exercises: the FX interpreter, the
//! fusion decision, the kernel printers, the timer, the shape rules, the explain counts, the
//! compiled-function cache and the symbolic-size machinery it decides with. No PyTorch
//! counterpart: this is how the grader tells that a learner's code handed an exercise to the
//! engine item that already does it, however the item was reached (an alias, a wrapper, a trait
//! object, a macro, or another public item that calls it: the scheduler's default policy, the C
//! renderer, the matmul shape rule).
//!
//! Each such item calls [`trip`] with its [`Wire`] when it runs. Nothing happens unless a hook
//! was [installed](install): the grader's check runners install one before any learner code runs
//! (the first installation wins and stays for the process's life), and the hook decides whether
//! the wire is armed. Uses inside the engine that are no answer to an exercise trip nothing:
//! they call the item's crate-private twin, which has no wire (`Graph::calls` for
//! `Graph::op_count`, `Graph::symbol_bindings` for `Graph::bind_symbols`, the re-trace behind
//! `Graph::with_dynamic_dims` for dynamo's cache), or, where the item is reached through layers
//! that run no code of the learner's (autotuning timing its candidates with the engine's own
//! timer), run [`internal`]ly.

use std::cell::Cell;
use std::sync::OnceLock;

/// An engine item an exercise asks a learner to write for themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wire {
    /// `fx::Interpreter::run` (phase 1, `interpreter`).
    FxInterpreter,
    /// The `Eager` backend's compile (phase 1, `interpreter`).
    EagerBackend,
    /// The `AotEager` backend's compile (phase 1, `interpreter`).
    AotEagerBackend,
    /// The `Inductor` backend's compile (phase 1, `interpreter`).
    InductorBackend,
    /// `bench::Bench::run` and `run_interleaved` (phases 1 and 5).
    Bench,
    /// `bench::Timing::new`, the engine's medians and quantiles (phases 1 and 5).
    Timing,
    /// `bench::time_once` (phases 1 and 5).
    TimeOnce,
    /// `bench::baseline`'s ceilings (phases 1 and 5).
    Baseline,
    /// `ExplainOutput::graph_count` (phase 2, `explain_report`).
    GraphCount,
    /// `ExplainOutput::graph_break_count` (phase 2, `explain_report`).
    GraphBreakCount,
    /// `ExplainOutput::op_count` (phase 2, `explain_report`).
    ExplainOpCount,
    /// `fx::Graph::op_count` (phase 2, `explain_report`).
    GraphOpCount,
    /// `ExplainOutput::ops_per_graph`, and its printed form (phase 2, `explain_report`).
    OpsPerGraph,
    /// `layout::broadcast_shapes` (phase 2, `shape_propagation`).
    BroadcastShapes,
    /// `op::Op::infer_shape` (phase 2, `shape_propagation`).
    InferShape,
    /// `inductor::scheduler::can_fuse` (phase 4, `can_fuse`).
    CanFuse,
    /// `inductor::codegen::c::kernel` (phase 4, `pointwise_c`).
    CKernel,
    /// `inductor::codegen::c::module` (phase 4, `pointwise_c`).
    CModule,
    /// `inductor::codegen::scalar_spelling` (phase 4, `pointwise_c`).
    ScalarSpelling,
    /// `inductor::codegen::Spelling::stmt`, which prints a statement (phase 4, `pointwise_c`).
    Spelling,
    /// `inductor::codegen::cuda::kernel` and `kernel_for` (phase 4, `pointwise_cuda`).
    CudaKernel,
    /// `inductor::codegen::cuda::module` (phase 4, `pointwise_cuda`).
    CudaModule,
    /// `dynamo::compile_region` (phase 3, `regional`).
    CompileRegion,
    /// `Tensor::scaled_mm` and the GPU's FP8 matrix product under it, however reached (phase 5,
    /// `fp8_scales`).
    ScaledMm,
    /// The autograd engine running a backward: `Tensor::backward`, `backward_with`,
    /// `autograd::grad`, and AOT's joint graph, which runs it (phase 4, `layer_norm_backward`).
    Autograd,
    /// `aot::partition`, the min-cut partitioner, and `aot::min_cut_partition` with it (phase 4,
    /// `save_or_recompute`).
    Partitioner,
    /// `aot::Network::min_cut`, the minimum cut the partitioner solves (phase 4,
    /// `save_or_recompute`).
    MinCut,
    /// A compiled function's cache of graphs looked up or filled: every `dynamo::compile`d or
    /// `dynamo::explain`ed call (phase 2, `recompiles`).
    DynamoCache,
    /// `fx::Graph::with_dynamic_dims`: a graph re-traced with some input sizes symbolic, which
    /// decides which become symbols and which the ops specialize or unify (phase 2, `recompiles`).
    WithDynamicDims,
    /// `fx::proxy::Tracer::dynamic_placeholder`: a traced input with symbolic sizes, on which the
    /// ops' symbolic shape rules then run (phase 2, `recompiles`).
    DynamicPlaceholder,
    /// `fx::Graph::add_dynamic_placeholder`: a graph input with symbolic sizes, where the rule for
    /// sizes 0 and 1 is applied (phase 2, `recompiles`).
    AddDynamicPlaceholder,
    /// `fx::Graph::bind_symbols`: a graph's size guards checked against input shapes (phase 2,
    /// `recompiles`).
    BindSymbols,
}

impl Wire {
    /// Every wire.
    pub const ALL: [Wire; 32] = [
        Wire::FxInterpreter,
        Wire::EagerBackend,
        Wire::AotEagerBackend,
        Wire::InductorBackend,
        Wire::Bench,
        Wire::Timing,
        Wire::TimeOnce,
        Wire::Baseline,
        Wire::GraphCount,
        Wire::GraphBreakCount,
        Wire::ExplainOpCount,
        Wire::GraphOpCount,
        Wire::OpsPerGraph,
        Wire::BroadcastShapes,
        Wire::InferShape,
        Wire::CanFuse,
        Wire::CKernel,
        Wire::CModule,
        Wire::ScalarSpelling,
        Wire::Spelling,
        Wire::CudaKernel,
        Wire::CudaModule,
        Wire::CompileRegion,
        Wire::Autograd,
        Wire::Partitioner,
        Wire::MinCut,
        Wire::ScaledMm,
        Wire::DynamoCache,
        Wire::WithDynamicDims,
        Wire::DynamicPlaceholder,
        Wire::AddDynamicPlaceholder,
        Wire::BindSymbols,
    ];

    /// The item's path inside the engine, its module's last part first: `fx::Interpreter`,
    /// `scheduler::can_fuse`, `bench::Bench`.
    pub fn path(self) -> &'static str {
        match self {
            Wire::FxInterpreter => "fx::Interpreter",
            Wire::EagerBackend => "backends::Eager",
            Wire::AotEagerBackend => "backends::AotEager",
            Wire::InductorBackend => "backends::Inductor",
            Wire::Bench => "bench::Bench",
            Wire::Timing => "bench::Timing",
            Wire::TimeOnce => "bench::time_once",
            Wire::Baseline => "bench::baseline",
            Wire::GraphCount => "dynamo::graph_count",
            Wire::GraphBreakCount => "dynamo::graph_break_count",
            Wire::ExplainOpCount => "dynamo::op_count",
            Wire::GraphOpCount => "fx::op_count",
            Wire::OpsPerGraph => "dynamo::ops_per_graph",
            Wire::BroadcastShapes => "layout::broadcast_shapes",
            Wire::InferShape => "op::infer_shape",
            Wire::CanFuse => "scheduler::can_fuse",
            Wire::CKernel => "c::kernel",
            Wire::CModule => "c::module",
            Wire::ScalarSpelling => "codegen::scalar_spelling",
            Wire::Spelling => "codegen::Spelling",
            Wire::CudaKernel => "cuda::kernel",
            Wire::CudaModule => "cuda::module",
            Wire::CompileRegion => "dynamo::compile_region",
            Wire::ScaledMm => "Tensor::scaled_mm",
            Wire::Autograd => "autograd::backward",
            Wire::Partitioner => "aot::partition",
            Wire::MinCut => "aot::Network",
            Wire::DynamoCache => "dynamo::compile",
            Wire::WithDynamicDims => "fx::with_dynamic_dims",
            Wire::DynamicPlaceholder => "proxy::dynamic_placeholder",
            Wire::AddDynamicPlaceholder => "fx::add_dynamic_placeholder",
            Wire::BindSymbols => "fx::bind_symbols",
        }
    }
}

/// The installed hook.
static HOOK: OnceLock<fn(Wire)> = OnceLock::new();

thread_local! {
    /// How deep this thread is in [`internal`] calls.
    static INTERNAL: Cell<u32> = const { Cell::new(0) };
}

/// Installs `hook`, called with each wire that trips from now on. Only the first installation in
/// a process takes effect; returns whether this one did.
pub fn install(hook: fn(Wire)) -> bool {
    HOOK.set(hook).is_ok()
}

/// Called by a wired item when it runs.
pub(crate) fn trip(wire: Wire) {
    if let Some(hook) = HOOK.get()
        && INTERNAL.with(Cell::get) == 0
    {
        hook(wire);
    }
}

/// Runs `f`, the engine's own use of wired items (no answer to any exercise), tripping nothing.
pub(crate) fn internal<T>(f: impl FnOnce() -> T) -> T {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            INTERNAL.with(|depth| depth.set(depth.get() - 1));
        }
    }
    INTERNAL.with(|depth| depth.set(depth.get() + 1));
    let _leave = Leave;
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wire_has_its_own_path() {
        let mut paths: Vec<&str> = Wire::ALL.iter().map(|w| w.path()).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), Wire::ALL.len());
    }
}
