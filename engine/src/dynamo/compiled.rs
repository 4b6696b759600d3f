//! The compiled function: trace, look up, compile on a miss, run.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::io::{Inputs, Outputs};
use crate::backends::{Backend, CompiledGraph, Eager};
use crate::error::{Error, Result, SourceLocation};
use crate::fx::Graph;
use crate::fx::proxy::{Tracer, is_tracing};
use crate::tensor::Tensor;

/// Counters of what a compiled function has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Calls made.
    pub calls: usize,
    /// Graphs handed to the backend (cache misses).
    pub compiles: usize,
    /// Calls whose graph was already compiled.
    pub cache_hits: usize,
    /// Time spent inside the backend's `compile`, summed.
    pub compile_time: Duration,
}

/// A closure wrapped by [`compile`]. Call it with [`Compiled::call`].
pub struct Compiled<I, O, F> {
    f: F,
    backend: Arc<dyn Backend>,
    cache: Mutex<HashMap<Graph, Arc<dyn CompiledGraph>>>,
    stats: Mutex<CompileStats>,
    _io: PhantomData<fn(I) -> O>,
}

/// Wraps `f` so that calls capture it into graphs and run them through a backend, like
/// `torch.compile(f)`. The default backend is [`Eager`]; choose another with
/// [`Compiled::backend`].
///
/// ```
/// use engine::{dynamo, Tensor};
/// let f = dynamo::compile(|x: Tensor| x.mul(2.0)?.relu());
/// let y = f.call(&Tensor::from_vec(vec![-1.0, 3.0], &[2])?)?;
/// assert_eq!(y.to_vec()?, vec![0.0, 6.0]);
/// # Ok::<(), engine::Error>(())
/// ```
pub fn compile<I, O, F>(f: F) -> Compiled<I, O, F>
where
    I: Inputs,
    O: Outputs,
    F: Fn(I) -> Result<O>,
{
    Compiled {
        f,
        backend: Arc::new(Eager),
        cache: Mutex::new(HashMap::new()),
        stats: Mutex::new(CompileStats::default()),
        _io: PhantomData,
    }
}

impl<I, O, F> Compiled<I, O, F>
where
    I: Inputs,
    O: Outputs,
    F: Fn(I) -> Result<O>,
{
    /// Uses `backend` to compile captured graphs (`torch.compile(backend=...)`).
    pub fn backend(mut self, backend: impl Backend + 'static) -> Self {
        self.backend = Arc::new(backend);
        self
    }

    /// What this compiled function has done so far.
    pub fn stats(&self) -> CompileStats {
        *self.stats.lock().expect("stats lock")
    }

    /// Calls the function: trace it, reuse or compile the graph, run it. Inside another compiled
    /// function's trace it is simply inlined into that trace, as Dynamo inlines nested calls.
    #[track_caller]
    pub fn call(&self, inputs: I::Ref<'_>) -> Result<O> {
        let location = SourceLocation::caller();
        let concrete = I::to_vec(inputs);
        if is_tracing() {
            return (self.f)(I::from_vec(concrete));
        }
        self.stats.lock().expect("stats lock").calls += 1;
        let tracer = Tracer::new();
        let symbolic = concrete.iter().map(|t| tracer.input(t)).collect::<Result<Vec<_>>>()?;
        let outputs = (self.f)(I::from_vec(symbolic))?.into_vec();
        if outputs.is_empty() {
            return Err(Error::Capture { message: "the compiled function returned no tensor".into(), location });
        }
        let traced = tracer.finish(&outputs)?;
        let inputs: Vec<Tensor> =
            traced.inputs.into_iter().map(|t| t.expect("every placeholder of a capture is bound")).collect();
        let compiled = self.lookup_or_compile(traced.graph, &inputs)?;
        Ok(O::from_vec(compiled.run(&inputs)?))
    }

    fn lookup_or_compile(&self, graph: Graph, inputs: &[Tensor]) -> Result<Arc<dyn CompiledGraph>> {
        if let Some(hit) = self.cache.lock().expect("cache lock").get(&graph) {
            self.stats.lock().expect("stats lock").cache_hits += 1;
            return Ok(hit.clone());
        }
        let start = Instant::now();
        let compiled: Arc<dyn CompiledGraph> = Arc::from(self.backend.compile(&graph, inputs)?);
        let mut stats = self.stats.lock().expect("stats lock");
        stats.compiles += 1;
        stats.compile_time += start.elapsed();
        self.cache.lock().expect("cache lock").insert(graph, compiled.clone());
        Ok(compiled)
    }
}
