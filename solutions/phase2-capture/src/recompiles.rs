//! Exercise `recompiles` (deep): what a compiled function's cache does on a sequence of calls,
//! predicted without running it. TorchDynamo keeps every graph it compiled for a function with
//! its guards, recompiles when none fits, turns a size that changed into a symbol (automatic
//! dynamic shapes), and runs eagerly past `recompile_limit`; the engine's cache
//! (`engine::dynamo`) does the same, and is the judge.

use engine::DType;

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
    /// these dims of the input symbolic, in increasing order (empty: every size static).
    Compiled {
        /// The input's dims whose sizes are symbols in the new graph.
        dynamic: Vec<usize>,
    },
    /// No cached graph fitted, and the function already had `recompile_limit` graphs: the call
    /// ran eagerly, and nothing was compiled or cached.
    Eager,
}

// ANCHOR: predict
/// **Exercise `recompiles` (deep).** What a function compiled with
/// `dynamo::compile(|x: Tensor| x.relu()?.sum(-1, false)).recompile_limit(limit)` (the default
/// options otherwise: automatic dynamic shapes) does on each of `calls`, in order, predicted
/// without compiling or running anything: one [`Outcome`] per call.
///
/// The rules are the engine's, and PyTorch's (book: phase 2's engine page, "Guards and
/// recompiles"): each compiled graph keeps guards on its input (dtype, then sizes), a call runs a
/// cached graph whose guards pass, and a call that no graph fits compiles a new one, or runs
/// eagerly once the function has `limit` graphs. Which sizes become symbols, and when, is yours
/// to work out (experiment in the scratch example with `ENGINE_LOGS=recompiles,guards`).
///
/// Judged on call sequences drawn from the run's seed (2 or 3 dims of sizes 2 to 9, no two dims
/// of one call ever the same size; float32 and now and then bfloat16; limits from 2 to 8): the
/// grader runs the engine's own cache on the same calls and compares call by call.
///
/// Book: `book/src/phase2/exercises.md`, section "recompiles".
/// Check: `cargo grader check phase2`.
pub fn predict(calls: &[Call], limit: usize) -> Vec<Outcome> {
    // ANCHOR: solution
    use std::collections::BTreeSet;
    // Each cached graph: its input's dtype, its sizes, and which of them are symbols.
    struct Graph {
        dtype: DType,
        shape: Vec<usize>,
        dynamic: BTreeSet<usize>,
    }
    let mut graphs: Vec<Graph> = Vec::new();
    // The dims that have changed size once: automatic dynamic shapes keeps them per function.
    let mut marked: BTreeSet<usize> = BTreeSet::new();
    let mut outcomes = Vec::with_capacity(calls.len());
    for call in calls {
        // Why each graph does not fit: `None` for a dtype, `Some(dim)` for the first size that
        // differs. A graph with no reason fits.
        let mut sizes_failed = Vec::new();
        let mut fits = false;
        for graph in graphs.iter().rev() {
            if graph.dtype != call.dtype {
                continue;
            }
            let differs =
                (0..call.shape.len()).find(|d| !graph.dynamic.contains(d) && graph.shape[*d] != call.shape[*d]);
            match differs {
                Some(dim) => sizes_failed.push(dim),
                None => {
                    fits = true;
                    break;
                }
            }
        }
        if fits {
            outcomes.push(Outcome::Hit);
        } else if graphs.len() >= limit {
            outcomes.push(Outcome::Eager);
        } else {
            marked.extend(sizes_failed);
            graphs.push(Graph { dtype: call.dtype, shape: call.shape.clone(), dynamic: marked.clone() });
            outcomes.push(Outcome::Compiled { dynamic: marked.iter().copied().collect() });
        }
    }
    outcomes
    // ANCHOR_END: solution
}
// ANCHOR_END: predict
