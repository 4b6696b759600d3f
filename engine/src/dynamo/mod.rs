//! Graph capture, the analogue of TorchDynamo: [`compile`] wraps a closure; each call traces it
//! with symbolic tensors into [`fx::Graph`](crate::fx::Graph)s, finds or builds the compiled form
//! of each graph with the chosen backend, and runs it.
//!
//! Dynamo captures Python by rewriting bytecode; a Rust closure cannot be rewritten, so the
//! engine traces it on every call instead. Tracing costs microseconds, and it gives the same
//! observable behaviour:
//!
//! - **graph breaks** where the code needs a value the trace does not have (`item()`, `to_vec()`,
//!   printing a tensor, [`Tensor::map_host`](crate::Tensor::map_host)) or does something a graph
//!   cannot hold ([`engine::print!`](crate::print)): the graph so far runs, tracing resumes in a
//!   new graph; [`explain`] shows them, [`Compiled::fullgraph`] forbids them;
//! - the fixes: [`where_`](crate::Tensor::where_), [`cond`], [`is_compiling`] and [`CustomOp`];
//! - **guards and recompiles**: each graph is cached with guards on its inputs' shapes, dtypes,
//!   devices and layouts and on the constants and path of the trace; a failed guard recompiles
//!   (logged under `ENGINE_LOGS=recompiles`), a size that changed becomes dynamic, and past the
//!   recompile limit the graph runs eagerly;
//! - **regional compilation**: [`compile_region`] compiles a repeated layer once for all its
//!   instances, their weights as graph inputs.

mod breaks;
mod cache;
mod capture;
mod compiled;
mod cond;
mod explain;
mod guards;
mod options;
mod region;
mod signature;
mod stats;

/// The compile modes, `torch.compile(mode=...)`, re-exported here beside [`Compiled::mode`].
pub use crate::compile_mode::Mode;
/// Custom ops belong to the op catalogue ([`crate::op`]), as `torch.library` does; re-exported
/// here, where the fixes for graph breaks are taught.
pub use crate::op::{CustomOp, CustomOpBuilder, MAX_CUSTOM_OP_INPUTS};
pub use breaks::graph_break;
#[doc(hidden)]
pub use breaks::print_side_effect;
pub use capture::CallTimes;
pub use compiled::{Compiled, compile};
pub use cond::cond;
pub use explain::{Explain, ExplainOutput, explain};
pub use options::DEFAULT_RECOMPILE_LIMIT;
pub use region::{Region, compile_region};
pub use signature::{Inputs, Outputs};
pub use stats::{CompileStats, counters};

/// True while the code calling it is being traced by a compiled function, like
/// `torch.compiler.is_compiling()`: guard side effects with it so they run only eagerly.
pub fn is_compiling() -> bool {
    crate::fx::proxy::is_tracing()
}
