//! Exercise `recompiles` (deep): what a compiled function's cache does on a sequence of calls,
//! predicted without running it, for a function drawn from a small family. TorchDynamo keeps
//! every graph it compiled for a function with its guards, recompiles when none fits, turns the
//! sizes that changed into symbols (automatic dynamic shapes), lets the ops of the function decide
//! what becomes of each symbol, and runs eagerly past `recompile_limit`; the engine's cache
//! (`engine::dynamo`) does the same, and is the judge.

use engine::{DType, Result, Tensor};

// ANCHOR: body
/// The size of the bias that [`Body::AddBias`] adds.
pub const BIAS: usize = 4;

/// The functions `predict` is asked about: one line of tensor code each, on the one input `x`.
/// The grader compiles its own copy of each; [`Body::run`] is the same code, for your experiments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// `x.relu()?.sum(-1, false)`.
    SumLast,
    /// `x.matmul(&x.transpose(-2, -1)?)`: each matrix of `x` times its own transpose.
    Gram,
    /// `x.add(&bias)`, where `bias` is `Tensor::ones(&[BIAS])`, made once outside the function and
    /// captured by it. The calls' last size is [`BIAS`] or 1.
    AddBias,
    /// `x.add(&x.transpose(-2, -1)?)`: each matrix of `x` plus its own transpose. The calls' last
    /// two sizes are equal, or one of them is 1 (it broadcasts).
    AddTranspose,
}

impl Body {
    /// The function's code run on `x` (`bias` is the captured `[BIAS]` tensor of ones; only
    /// [`Body::AddBias`] reads it).
    pub fn run(self, x: &Tensor, bias: &Tensor) -> Result<Tensor> {
        match self {
            Body::SumLast => x.relu()?.sum(-1, false),
            Body::Gram => x.matmul(&x.transpose(-2, -1)?),
            Body::AddBias => x.add(bias),
            Body::AddTranspose => x.add(&x.transpose(-2, -1)?),
        }
    }
}
// ANCHOR_END: body

/// One call of the compiled function: its one input's dtype and sizes (contiguous).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The input's element type.
    pub dtype: DType,
    /// The input's sizes; every call of a sequence has the same number of dims.
    pub shape: Vec<usize>,
}

/// What the compiled function did on one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A cached graph's guards all passed: it ran, and nothing was compiled.
    Hit,
    /// No cached graph fitted, and a new one was compiled (the first call's is one too), with
    /// these dims of the input symbolic in it, in increasing order (empty: every size of the input
    /// is a constant in the new graph).
    Compiled {
        /// The input's dims whose sizes are symbols in the new graph.
        dynamic: Vec<usize>,
    },
    /// No cached graph fitted, and the function already had `recompile_limit` graphs: the call
    /// ran eagerly, and nothing was compiled or cached.
    Eager,
}

// ANCHOR: predict
/// **Exercise `recompiles` (deep).** What the function `body`, compiled with
/// `dynamo::compile(...).recompile_limit(limit)` (the default options otherwise: automatic dynamic
/// shapes), does on each of `calls`, in order, predicted without compiling or running anything:
/// one [`Outcome`] per call.
///
/// The rules are the engine's, and PyTorch's (book: phase 2's engine page, "Guards and
/// recompiles" and "Symbolic sizes"): each compiled graph keeps guards on its input (dtype, then
/// sizes), a call runs a cached graph whose guards pass, and a call that no graph fits compiles a
/// new one, or runs eagerly once the function has `limit` graphs. Which sizes are symbols in a new
/// graph, and what the guards of a graph then accept, is yours to work out: it depends on the
/// calls so far and on what each op of `body` does to a symbolic size (experiment in the scratch
/// example with `ENGINE_LOGS=recompiles,guards`).
///
/// Judged on bodies and call sequences drawn from the run's seed (2 or 3 dims of sizes 1 to 5, as
/// each [`Body`] allows; float32 and now and then bfloat16; limits from 2 to 8): the grader
/// compiles its own copy of the body, runs the engine's cache on the same calls (after your
/// `predict` has answered) and compares call by call.
///
/// Off limits: the cache itself (`dynamo::compile`, which `dynamo::explain` runs), and the
/// symbolic sizes it decides with (`Graph::with_dynamic_dims`, `Tracer::dynamic_placeholder`,
/// `Graph::add_dynamic_placeholder`, `Graph::bind_symbols`). Named in this file, they are refused
/// before the crate builds; reached any other way while the check runs, they end it. The scratch
/// example may use them all.
///
/// Book: `book/src/phase2/exercises.md`, section "recompiles".
/// Check: `cargo grader check phase2`.
pub fn predict(body: Body, calls: &[Call], limit: usize) -> Vec<Outcome> {
    todo!()
}
// ANCHOR_END: predict
