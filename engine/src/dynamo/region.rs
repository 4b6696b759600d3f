//! Regional compilation: one compiled artifact for every instance of a repeated layer, the
//! analogue of compiling a transformer's block class instead of the whole model
//! (`for layer in model.layers: layer.compile()` in PyTorch, whose Dynamo then traces the layers'
//! shared `forward` once, its parameters lifted to graph inputs, and reuses the result for every
//! layer; `torch.compiler.nested_compile_region` marks such a region inside a compiled model).
//!
//! A [`Region`] is a function of a module and its inputs, `|block: &Block, x: Tensor| ...`,
//! compiled with one cache for all modules. Each call traces it for the module it is given; the
//! module's weights are tensors the trace captures, so they become graph inputs, and the guards
//! check their shapes, dtypes and devices, never which tensors they are. A second block with the
//! same structure and different weights therefore passes the first block's guards: a model of 12
//! identical blocks compiles once and hits the cache 11 times, where compiling the whole model
//! compiles one graph twelve times the size (and a new sequence length recompiles all of it).
//! What regional compilation gives up is fusion across the region's edges: the residual add that
//! ends one block and the layer norm that starts the next run as separate kernels.

use std::marker::PhantomData;
use std::sync::Arc;

use super::cache::Cache;
use super::compiled::call_traced;
use super::options::{Options, options_builder};
use super::signature::{Inputs, Outputs};
use super::stats::CompileStats;
use crate::backends::Backend;
use crate::compile_mode::Mode;
use crate::error::{Result, SourceLocation};

/// A repeated layer, compiled once for all its instances: see [`compile_region`].
pub struct Region<M: ?Sized, I, O, F> {
    f: F,
    options: Arc<Options>,
    cache: Arc<Cache>,
    _io: PhantomData<fn(&M, I) -> O>,
}

/// Wraps `f`, a function of a module (a layer with its weights) and its inputs, so that calls
/// with any module of the same structure share one compiled artifact, as
/// `torch.compile`'s regional compilation of repeated blocks.
///
/// ```
/// use engine::{dynamo, Tensor};
/// // Two "layers": same structure, different weights.
/// let layers = [Tensor::randn(&[4, 4], 1), Tensor::randn(&[4, 4], 2)];
/// let layer = dynamo::compile_region(|w: &Tensor, x: Tensor| x.matmul(w)?.relu());
/// let mut x = Tensor::randn(&[2, 4], 3);
/// for w in &layers {
///     x = layer.call(w, &x)?;
/// }
/// assert_eq!((layer.stats().compiles, layer.stats().cache_hits), (1, 1));
/// # Ok::<(), engine::Error>(())
/// ```
#[track_caller]
pub fn compile_region<M, I, O, F>(f: F) -> Region<M, I, O, F>
where
    M: ?Sized,
    I: Inputs,
    O: Outputs,
    F: Fn(&M, I) -> Result<O>,
{
    crate::wires::trip(crate::wires::Wire::CompileRegion);
    let mut options = Options::new(SourceLocation::caller());
    options.name = format!("region at {}", SourceLocation::caller().short()).into();
    Region { f, options: Arc::new(options), cache: Cache::registered(), _io: PhantomData }
}

impl<M, I, O, F> Region<M, I, O, F>
where
    M: ?Sized,
    I: Inputs,
    O: Outputs,
    F: Fn(&M, I) -> Result<O>,
{
    options_builder!();

    /// What the region has done so far, over all modules: one compile per structure and shape,
    /// a cache hit for each other call.
    pub fn stats(&self) -> CompileStats {
        self.cache.stats()
    }

    /// Calls the region on `module`: trace it, reuse the compiled graph whose guards pass (any
    /// module of the same structure's), or compile one. Inside a compiled function's trace it is
    /// inlined, as a nested `compile` is.
    #[track_caller]
    pub fn call(&self, module: &M, inputs: I::Ref<'_>) -> Result<O> {
        let f = |inputs: I| (self.f)(module, inputs);
        call_traced(&f, &self.options, &self.cache, inputs, SourceLocation::caller(), false, false)
            .map(|(outputs, _)| outputs)
    }
}
