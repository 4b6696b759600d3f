//! The compiled function: trace, look up, compile on a miss, run; graph breaks split a call into
//! several graphs.

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use super::cache::Cache;
use super::capture::{CallRecord, Capture};
use super::io::{Inputs, Outputs};
use super::options::Options;
use super::stats::CompileStats;
use crate::backends::Backend;
use crate::error::{Error, Result, SourceLocation};
use crate::fx::proxy::{Tracer, is_tracing};
use crate::inductor::Mode;

/// A closure wrapped by [`compile`]. Call it with [`Compiled::call`].
pub struct Compiled<I, O, F> {
    f: F,
    options: Options,
    cache: Arc<Cache>,
    _io: PhantomData<fn(I) -> O>,
}

/// Wraps `f` so that calls capture it into graphs and run them through a backend, like
/// `torch.compile(f)`. The default backend is [`Inductor`](crate::backends::Inductor), as in
/// PyTorch; choose another with [`Compiled::backend`].
///
/// ```
/// use engine::{dynamo, Tensor};
/// let f = dynamo::compile(|x: Tensor| x.mul(2.0)?.relu());
/// let y = f.call(&Tensor::from_vec(vec![-1.0, 3.0], &[2])?)?;
/// assert_eq!(y.to_vec()?, vec![0.0, 6.0]);
/// # Ok::<(), engine::Error>(())
/// ```
#[track_caller]
pub fn compile<I, O, F>(f: F) -> Compiled<I, O, F>
where
    I: Inputs,
    O: Outputs,
    F: Fn(I) -> Result<O>,
{
    Compiled { f, options: Options::new(SourceLocation::caller()), cache: Arc::new(Cache::default()), _io: PhantomData }
}

impl<I, O, F> Compiled<I, O, F>
where
    I: Inputs,
    O: Outputs,
    F: Fn(I) -> Result<O>,
{
    /// Uses `backend` to compile captured graphs (`torch.compile(backend=...)`).
    pub fn backend(mut self, backend: impl Backend + 'static) -> Self {
        self.options.backend = Arc::new(backend);
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
        self.options.mode = mode;
        self
    }

    /// With `true`, a graph break is an error naming its reason and line, instead of a split
    /// (`torch.compile(fullgraph=True)`).
    pub fn fullgraph(mut self, fullgraph: bool) -> Self {
        self.options.fullgraph = fullgraph;
        self
    }

    /// With `true`, every size of every input (except captured tensors) is symbolic from the
    /// first call; with `false`, sizes are never symbolic and each new shape compiles a new graph.
    /// Without a call, sizes become symbolic once they change (automatic dynamic shapes).
    pub fn dynamic(mut self, dynamic: bool) -> Self {
        self.options.dynamic = Some(dynamic);
        self
    }

    /// How many graphs to keep per resume point before running that part of the function eagerly
    /// (default 8, PyTorch's `recompile_limit`).
    pub fn recompile_limit(mut self, limit: usize) -> Self {
        self.options.recompile_limit = limit;
        self
    }

    /// The name logs and warnings use for this function (default: where `compile` was called).
    pub fn name(mut self, name: &str) -> Self {
        self.options.name = name.into();
        self
    }

    /// What this compiled function has done so far.
    pub fn stats(&self) -> CompileStats {
        self.cache.stats()
    }

    /// Calls the function: trace it, reuse or compile each graph, run them. Inside another
    /// compiled function's trace it is simply inlined into that trace, as Dynamo inlines nested
    /// calls.
    #[track_caller]
    pub fn call(&self, inputs: I::Ref<'_>) -> Result<O> {
        self.call_recorded(inputs, SourceLocation::caller(), false).map(|(outputs, _)| outputs)
    }

    /// [`Compiled::call`], also returning the breaks met and, with `keep_graphs`, a copy of each
    /// graph run.
    pub(crate) fn call_recorded(
        &self,
        inputs: I::Ref<'_>,
        location: SourceLocation,
        keep_graphs: bool,
    ) -> Result<(O, CallRecord)> {
        let concrete = I::to_vec(inputs);
        if is_tracing() {
            return Ok(((self.f)(I::from_vec(concrete))?, CallRecord::default()));
        }
        self.cache.count_call();
        let capture = Rc::new(Capture::new(self.options.clone(), self.cache.clone(), keep_graphs));
        let tracer = Tracer::capture(capture.clone());
        let symbolic = concrete.iter().map(|t| tracer.input(t)).collect::<Result<Vec<_>>>()?;
        let outputs = (self.f)(I::from_vec(symbolic))?.into_vec();
        if outputs.is_empty() {
            return Err(Error::Capture {
                message: "the compiled function returned no tensor; return the tensors it computes".into(),
                location,
            });
        }
        let traced = tracer.finish(&outputs)?;
        let results = capture.run_graph(traced)?;
        Ok((O::from_vec(results), capture.take_record()))
    }
}
