//! Exercise `compare_backends`: compile one model with several backends and measure how far each
//! result is from plain eager execution.

use engine::backends::Backend;
use engine::{Result, Tensor, dynamo};

use crate::model::Mlp;

/// How far one backend's output is from plain eager execution.
#[derive(Clone, Debug, PartialEq)]
pub struct BackendDiff {
    /// The backend's name, as [`Backend::name`] gives it.
    pub backend: String,
    /// The largest `|compiled - eager|` over every element of the output.
    pub max_abs_diff: f32,
}

// ANCHOR: compare_backends
/// **Exercise `compare_backends`.** For each backend in `backends`, in order: compile
/// `mlp.forward` with it (`dynamo::compile(...).backend(backend)`), call it on `x`, and compare
/// the output with `mlp.forward(x)` run eagerly, without compiling. Return one [`BackendDiff`]
/// per backend, in the same order.
///
/// Book: `book/src/phase1/exercises.md`, section "compare_backends".
/// Check: `cargo grader check phase1`.
pub fn compare_backends(mlp: &Mlp, x: &Tensor, backends: Vec<Box<dyn Backend>>) -> Result<Vec<BackendDiff>> {
    // ANCHOR: solution
    let expected = mlp.forward(x)?.to_vec()?;
    backends
        .into_iter()
        .map(|backend| {
            let name = backend.name().to_string();
            let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(backend);
            let actual = compiled.call(x)?.to_vec()?;
            let max_abs_diff = actual.iter().zip(&expected).map(|(a, e)| (a - e).abs()).fold(0.0, f32::max);
            Ok(BackendDiff { backend: name, max_abs_diff })
        })
        .collect()
    // ANCHOR_END: solution
}
// ANCHOR_END: compare_backends
