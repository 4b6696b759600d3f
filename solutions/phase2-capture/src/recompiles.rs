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
    // ANCHOR: solution
    use std::collections::BTreeSet;
    /// One size of a graph's input: a constant, or a symbol (named by the first dim that has it).
    #[derive(Clone, Copy, PartialEq)]
    enum Size {
        Fixed(usize),
        Symbol(usize),
    }
    /// The input's sizes in the graph traced for `shape` with the `marked` dims made symbols:
    /// sizes 0 and 1 never are, and the body's ops then specialize or unify what they must.
    fn trace(body: Body, shape: &[usize], marked: &BTreeSet<usize>) -> Vec<Size> {
        let mut sizes: Vec<Size> = (0..shape.len())
            .map(|d| if marked.contains(&d) && shape[d] >= 2 { Size::Symbol(d) } else { Size::Fixed(shape[d]) })
            .collect();
        let last = shape.len() - 1;
        match body {
            // A reduction drops a size, and `x @ x^T` multiplies a dim by itself: no constraint.
            Body::SumLast | Body::Gram => {}
            // Broadcasting `[.., a, b]` against `[.., b, a]` needs `a == b`, unless one is 1.
            Body::AddTranspose => match (sizes[last - 1], sizes[last]) {
                (Size::Fixed(1), _) | (_, Size::Fixed(1)) => {}
                (Size::Symbol(a), Size::Symbol(_)) => sizes[last] = Size::Symbol(a),
                _ => {
                    sizes[last - 1] = Size::Fixed(shape[last - 1]);
                    sizes[last] = Size::Fixed(shape[last]);
                }
            },
            // Broadcasting a symbol against the bias's constant size needs them equal.
            Body::AddBias => sizes[last] = Size::Fixed(shape[last]),
        }
        sizes
    }
    /// Whether a graph with these input sizes accepts `shape`: constants equal, symbols at least 2
    /// and equal wherever they are the same symbol.
    fn accepts(sizes: &[Size], shape: &[usize]) -> bool {
        sizes.iter().zip(shape).all(|(size, &n)| match *size {
            Size::Fixed(m) => m == n,
            Size::Symbol(first) => n >= 2 && shape[first] == n,
        })
    }
    let mut graphs: Vec<(DType, Vec<Size>)> = Vec::new();
    // The sizes of the first compile, and the dims that have differed from them at a compile
    // since: automatic dynamic shapes keeps both per function.
    let mut first: Option<&[usize]> = None;
    let mut marked: BTreeSet<usize> = BTreeSet::new();
    let mut outcomes = Vec::with_capacity(calls.len());
    for call in calls {
        if graphs.iter().any(|(dtype, sizes)| *dtype == call.dtype && accepts(sizes, &call.shape)) {
            outcomes.push(Outcome::Hit);
        } else if graphs.len() >= limit {
            outcomes.push(Outcome::Eager);
        } else {
            let first = *first.get_or_insert(&call.shape);
            marked.extend((0..call.shape.len()).filter(|&d| first[d] != call.shape[d]));
            let sizes = trace(body, &call.shape, &marked);
            let dynamic = (0..sizes.len()).filter(|&d| matches!(sizes[d], Size::Symbol(_))).collect();
            graphs.push((call.dtype, sizes));
            outcomes.push(Outcome::Compiled { dynamic });
        }
    }
    outcomes
    // ANCHOR_END: solution
}
// ANCHOR_END: predict
