//! Compiler backends, the analogue of `torch.compile(backend=...)`: a backend receives each
//! captured graph with example inputs and returns something that runs it.
//!
//! `Eager` runs the captured graph as it is (PyTorch's `"eager"`), `AotEager` decomposes it
//! first (`"aot_eager"`), `Inductor` generates and compiles fused kernels (`"inductor"`); anyone
//! can write a backend by implementing [`Backend`].

mod aot_eager;
mod eager;
mod inductor;

pub use aot_eager::AotEager;
pub use eager::Eager;
pub use inductor::Inductor;

use crate::compile_mode::Mode;
use crate::error::{Error, Result};
use crate::fx::Graph;
use crate::tensor::Tensor;

// ANCHOR: backend_trait
/// Turns a captured graph into a runnable [`CompiledGraph`].
pub trait Backend: Send + Sync {
    /// A short name for logs and errors (`eager`, `aot_eager`, `inductor`).
    fn name(&self) -> &str;

    /// Compiles `graph`. `example_inputs` are the concrete tensors of this first call, one per
    /// placeholder, for backends that want to inspect or benchmark with real data.
    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>>;

    /// Compiles `graph` in `mode` (`torch.compile(mode=...)`). Only Inductor has modes: any other
    /// backend compiles the default mode and refuses the others with an error, as PyTorch does.
    fn compile_in_mode(&self, graph: &Graph, example_inputs: &[Tensor], mode: Mode) -> Result<Box<dyn CompiledGraph>> {
        if mode != Mode::Default {
            return Err(Error::Backend {
                backend: self.name().to_string(),
                message: format!("mode `{mode}` needs the inductor backend; this backend has no modes"),
            });
        }
        self.compile(graph, example_inputs)
    }

    /// Compiles `graph` for training: input `i` requires grad when `requires_grad[i]`, and the
    /// compiled graph must give its outputs a backward (`torch.compile` of a function used under
    /// autograd). By default the graph is compiled as for inference and the compiled graph is
    /// trusted to run engine ops, which autograd's tape records (the `eager` backend does; an
    /// opaque compiled graph would lose the gradients). `aot_eager` and `inductor` compile a
    /// forward and a backward graph instead, through [`aot::aot_module`](crate::aot::aot_module).
    fn compile_for_training(
        &self,
        graph: &Graph,
        example_inputs: &[Tensor],
        requires_grad: &[bool],
        mode: Mode,
    ) -> Result<Box<dyn CompiledGraph>> {
        let _ = requires_grad;
        self.compile_in_mode(graph, example_inputs, mode)
    }
}

/// A boxed backend is a backend, so a list of backends (`Vec<Box<dyn Backend>>`) can be handed to
/// [`Compiled::backend`](crate::dynamo::Compiled::backend) one by one.
impl<B: Backend + ?Sized> Backend for Box<B> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        (**self).compile(graph, example_inputs)
    }

    fn compile_in_mode(&self, graph: &Graph, example_inputs: &[Tensor], mode: Mode) -> Result<Box<dyn CompiledGraph>> {
        (**self).compile_in_mode(graph, example_inputs, mode)
    }

    fn compile_for_training(
        &self,
        graph: &Graph,
        example_inputs: &[Tensor],
        requires_grad: &[bool],
        mode: Mode,
    ) -> Result<Box<dyn CompiledGraph>> {
        (**self).compile_for_training(graph, example_inputs, requires_grad, mode)
    }
}

/// A forward and a backward graph compiled together run as a compiled graph: the outputs carry the
/// compiled backward.
impl CompiledGraph for crate::aot::AotModule {
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        crate::aot::AotModule::run(self, inputs)
    }
}

/// A compiled graph: takes one tensor per placeholder, returns one per output.
pub trait CompiledGraph: Send + Sync {
    /// Runs the compiled graph.
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
}
// ANCHOR_END: backend_trait

/// Any suitable closure is a compiled graph, so a backend can return `Box::new(move |inputs| ...)`.
impl<F> CompiledGraph for F
where
    F: Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync,
{
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self(inputs)
    }
}
