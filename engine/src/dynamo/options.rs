//! The knobs of `torch.compile`: `backend`, `mode`, `fullgraph`, `dynamic`, and Dynamo's
//! `recompile_limit`.

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
    /// Where `compile` was called (the compile trace's stack starts there).
    pub defined_at: SourceLocation,
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
            defined_at,
            compiled_autograd: false,
        }
    }
}

/// The builder methods of `torch.compile`'s knobs, for each kind of compiled callable
/// ([`Compiled`](super::Compiled), [`Region`](super::Region)): each sets one field of its
/// `options`.
macro_rules! options_builder {
    () => {
        /// Uses `backend` to compile captured graphs (`torch.compile(backend=...)`).
        pub fn backend(mut self, backend: impl Backend + 'static) -> Self {
            Arc::make_mut(&mut self.options).backend = Arc::new(backend);
            self
        }

        /// Compiles in `mode` (`torch.compile(mode="reduce-overhead")` and so on): see [`Mode`]. Modes
        /// other than [`Mode::Default`] need the Inductor backend.
        ///
        /// ```
        /// use engine::{dynamo::{self, Mode}, Tensor};
        /// let f = dynamo::compile(|x: Tensor| x.mul(2.0)?.relu()).mode(Mode::ReduceOverhead);
        /// assert_eq!(f.call(&Tensor::from_vec(vec![-1.0, 3.0], &[2])?)?.to_vec()?, vec![0.0, 6.0]);
        /// # Ok::<(), engine::Error>(())
        /// ```
        pub fn mode(mut self, mode: Mode) -> Self {
            Arc::make_mut(&mut self.options).mode = mode;
            self
        }

        /// With `true`, a graph break is an error naming its reason and line, instead of a split
        /// (`torch.compile(fullgraph=True)`).
        pub fn fullgraph(mut self, fullgraph: bool) -> Self {
            Arc::make_mut(&mut self.options).fullgraph = fullgraph;
            self
        }

        /// With `true`, every size of every input (except captured tensors) is symbolic from the
        /// first call; with `false`, sizes are never symbolic and each new shape compiles a new graph.
        /// Without a call, sizes become symbolic once they change (automatic dynamic shapes).
        pub fn dynamic(mut self, dynamic: bool) -> Self {
            Arc::make_mut(&mut self.options).dynamic = Some(dynamic);
            self
        }

        /// How many graphs to keep per resume point before running that part of the function eagerly
        /// (default 8, PyTorch's `recompile_limit`).
        pub fn recompile_limit(mut self, limit: usize) -> Self {
            Arc::make_mut(&mut self.options).recompile_limit = limit;
            self
        }

        /// With `true`, a `backward()` inside the function is traced into its graph, with the
        /// gradients it leaves in leaves' `.grad`, instead of breaking the graph there: forward,
        /// loss, backward and an optimizer's step (whose `copy_` into each parameter the graph
        /// performs) compile into one graph, a whole training step (PyTorch's
        /// `torch._dynamo.config.compiled_autograd`, which captures the backward as a graph of its
        /// own; here it joins the forward's). Off by default, as in PyTorch.
        ///
        /// ```
        /// use engine::{dynamo, optim::{Optimizer, Sgd}, Tensor};
        /// let w = Tensor::from_vec(vec![1.0, 2.0], &[2])?.requires_grad_(true);
        /// let sgd = Sgd::new(&[w.clone()], 0.5);
        /// let step = dynamo::compile(|x: Tensor| {
        ///     let loss = w.mul(&x)?.sum_all()?;
        ///     loss.backward()?; // the gradient is x
        ///     sgd.step()?;
        ///     sgd.zero_grad();
        ///     Ok(loss)
        /// })
        /// .compiled_autograd(true)
        /// .fullgraph(true);
        /// step.call(&Tensor::from_vec(vec![2.0, 4.0], &[2])?)?;
        /// assert_eq!(w.to_vec()?, vec![0.0, 0.0]); // w - 0.5 * x
        /// # Ok::<(), engine::Error>(())
        /// ```
        pub fn compiled_autograd(mut self, enabled: bool) -> Self {
            Arc::make_mut(&mut self.options).compiled_autograd = enabled;
            self
        }

        /// The name logs and warnings use for this function (default: where `compile` was called).
        pub fn name(mut self, name: &str) -> Self {
            Arc::make_mut(&mut self.options).name = name.into();
            self
        }
    };
}
pub(super) use options_builder;
