//! Graph capture, the analogue of TorchDynamo: [`compile`] wraps a closure; each call traces it
//! with symbolic tensors into an [`fx::Graph`](crate::fx::Graph), finds or builds the compiled
//! form of that graph with the chosen backend, and runs it.
//!
//! Dynamo captures Python by rewriting bytecode; a Rust closure cannot be rewritten, so the
//! engine traces it on every call instead. Tracing costs microseconds, and it gives the same
//! observable behaviour: one graph per distinct path through the code, cached by structure.

mod compiled;
mod io;

pub use compiled::{CompileStats, Compiled, compile};
pub use io::{Inputs, Outputs};

/// True while the code calling it is being traced by a compiled function, like
/// `torch.compiler.is_compiling()`: guard side effects with it so they run only eagerly.
pub fn is_compiling() -> bool {
    crate::fx::proxy::is_tracing()
}
