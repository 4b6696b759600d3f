//! The knobs of `torch.compile`: `backend`, `mode`, `fullgraph`, `dynamic`, and Dynamo's
//! `recompile_limit` and `compiled_autograd`.

use std::sync::Arc;

use crate::backends::{Backend, Inductor};
use crate::compile_mode::Mode;
use crate::error::SourceLocation;

/// PyTorch's default `torch._dynamo.config.recompile_limit`.
pub const DEFAULT_RECOMPILE_LIMIT: usize = 8;

/// How a compiled function captures and compiles. Set through [`Compiled`](super::Compiled)'s
/// builder methods.
#[derive(Clone)]
pub(crate) struct Options {
    pub backend: Arc<dyn Backend>,
    /// Handed to the backend with each graph (only Inductor takes a mode other than the default).
    pub mode: Mode,
    /// A graph break is an error instead of a split.
    pub fullgraph: bool,
    /// `None`: automatic dynamic shapes (a size that changes becomes symbolic on the
    /// recompile it causes); `Some(true)`: every input size symbolic from the start;
    /// `Some(false)`: never symbolic, one graph per shape.
    pub dynamic: Option<bool>,
    /// Graphs kept per resume point before the function runs that part eagerly.
    pub recompile_limit: usize,
    /// How logs and warnings name the function.
    pub name: Arc<str>,
    /// A `backward()` inside the function is traced into its graph instead of breaking it
    /// (`torch._dynamo.config.compiled_autograd`).
    pub compiled_autograd: bool,
}

impl Options {
    pub fn new(defined_at: SourceLocation) -> Options {
        Options {
            backend: Arc::new(Inductor::default()),
            mode: Mode::Default,
            fullgraph: false,
            dynamic: None,
            recompile_limit: DEFAULT_RECOMPILE_LIMIT,
            name: format!("compiled function at {}", defined_at.short()).into(),
            compiled_autograd: false,
        }
    }
}
