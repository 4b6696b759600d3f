//! The compiled function: trace, look up, compile on a miss, run; graph breaks split a call into
//! several graphs.

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::cache::Cache;
use super::capture::{CallRecord, CallTimes, Capture};
use super::options::{Options, options_builder};
use super::signature::{Inputs, Outputs};
use super::stats::CompileStats;
use crate::backends::Backend;
use crate::compile_mode::Mode;
use crate::error::{Error, Result, SourceLocation};
use crate::fx::proxy::{Tracer, is_tracing};

/// A closure wrapped by [`compile`]. Call it with [`Compiled::call`].
pub struct Compiled<I, O, F> {
    f: F,
    /// Shared with each call's capture (one count to raise per call, not one per field).
    options: Arc<Options>,
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
    Compiled {
        f,
        options: Arc::new(Options::new(SourceLocation::caller())),
        cache: Cache::registered(),
        _io: PhantomData,
    }
}

impl<I, O, F> Compiled<I, O, F>
where
    I: Inputs,
    O: Outputs,
    F: Fn(I) -> Result<O>,
{
    options_builder!();

    /// What this compiled function has done so far.
    pub fn stats(&self) -> CompileStats {
        self.cache.stats()
    }

    /// Calls the function: trace it, reuse or compile each graph, run them. Inside another
    /// compiled function's trace it is simply inlined into that trace, as Dynamo inlines nested
    /// calls.
    #[track_caller]
    pub fn call(&self, inputs: I::Ref<'_>) -> Result<O> {
        self.call_recorded(inputs, SourceLocation::caller(), false, false).map(|(outputs, _)| outputs)
    }

    /// [`Compiled::call`], also saying where its host time went: tracing, guards and lookup, the
    /// compiled plan. (On a GPU the plan only queues work: the times are the host's.)
    #[track_caller]
    pub fn call_timed(&self, inputs: I::Ref<'_>) -> Result<(O, CallTimes)> {
        self.call_recorded(inputs, SourceLocation::caller(), false, true)
            .map(|(outputs, record)| (outputs, record.times))
    }

    /// [`Compiled::call`], also returning the breaks met, with `keep_graphs` a copy of each
    /// graph run, and with `timed` where the host time went.
    pub(crate) fn call_recorded(
        &self,
        inputs: I::Ref<'_>,
        location: SourceLocation,
        keep_graphs: bool,
        timed: bool,
    ) -> Result<(O, CallRecord)> {
        call_traced(&self.f, &self.options, &self.cache, inputs, location, keep_graphs, timed)
    }
}

/// One call of `f` through `cache`: trace it, reuse or compile each graph, run them; inside
/// another compiled function's trace, `f` is inlined into that trace. Also returns the breaks met,
/// with `keep_graphs` a copy of each graph run, and with `timed` where the host time went.
pub(super) fn call_traced<I: Inputs, O: Outputs>(
    f: &dyn Fn(I) -> Result<O>,
    options: &Arc<Options>,
    cache: &Arc<Cache>,
    inputs: I::Ref<'_>,
    location: SourceLocation,
    keep_graphs: bool,
    timed: bool,
) -> Result<(O, CallRecord)> {
    let start = timed.then(Instant::now);
    let mut arguments = I::to_vec(inputs);
    if is_tracing() {
        return Ok((f(I::from_vec(arguments))?, CallRecord::default()));
    }
    let capture = Rc::new(Capture::new(options.clone(), cache.clone(), location, keep_graphs, timed));
    let tracer = Tracer::capture(capture.clone());
    // Each argument is replaced by the symbolic tensor standing for it (the tracer keeps its own
    // clone of the concrete one).
    for argument in &mut arguments {
        *argument = tracer.input(argument)?;
    }
    let traced = f(I::from_vec(arguments)).and_then(|outputs| {
        let outputs = outputs.into_vec();
        if outputs.is_empty() {
            return Err(Error::Capture {
                message: "the compiled function returned no tensor; return the tensors it computes".into(),
                location,
            });
        }
        Ok(outputs)
    });
    // Gradients a traced backward left in leaves are outputs too, handed to the leaves after.
    let grads = tracer.traced_grads();
    let results = traced.and_then(|mut outputs| {
        let returned = outputs.len();
        outputs.extend(grads.iter().map(|(_, g)| g.clone()));
        let mut results = capture.run_graph(tracer.finish(&outputs)?)?;
        for ((leaf, _), grad) in grads.iter().zip(results.drain(returned..)) {
            leaf.set(Some(grad));
        }
        Ok(results)
    });
    if results.is_err() {
        // No symbolic gradient may outlive its trace.
        grads.iter().for_each(|(leaf, _)| leaf.set(None));
    }
    let outputs = O::from_vec(results?);
    if let Some(start) = start {
        capture.finish_timing(start.elapsed());
    }
    Ok((outputs, capture.take_record()))
}
