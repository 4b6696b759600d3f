//! Checks of `round_trip`: one graph, the original's outputs up to rounding, and no recompile
//! when only the input's values change (statistics baked in as constants would recompile).

use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Tolerance, ensure, for_all, record, record_tensor};

use super::support::{Input, matches_original, one_graph};
use crate::subject::models::standardized_original;
use crate::subject::{example_input, standardized};

/// `standardized` captures into one graph.
pub fn standardized_is_one_graph(ctx: &Context) -> CheckResult {
    one_graph("standardized", |x: Tensor| standardized(&x), &example_input(3, ctx.seed))?;
    Ok("one graph, no break".into())
}

/// Compiled with `fullgraph(true)`, the original's outputs (up to float rounding: the sums run
/// in another order) on random inputs.
pub fn standardized_matches_the_original(ctx: &Context) -> CheckResult {
    let cases = 24;
    for_all(ctx, cases, Input::strategy(), |Input { seed, rows }| {
        let x = example_input(rows, seed);
        matches_original("standardized", |x: Tensor| standardized(&x), standardized_original, &x, Tolerance::F32)
    })?;
    Ok(format!("{cases} random inputs: the original's outputs, in one graph"))
}

/// Five calls with new values of the same shape compile one graph: the statistics are computed
/// in the graph, not baked into it.
pub fn no_recompile_for_new_values(ctx: &Context) -> CheckResult {
    let compiled = dynamo::compile(|x: Tensor| standardized(&x));
    let calls = 3 + ctx.seed % 5;
    for i in 0..calls {
        let output = compiled.call(&example_input(4, ctx.seed + i))?;
        record_tensor(format!("output of call {i}"), &output, Tolerance::F32);
    }
    let stats = compiled.stats();
    record(format!("compiles over {calls} calls"), stats.compiles);
    ensure(stats.compiles == 1, || {
        format!(
            "{calls} calls with new values compiled {} graphs: a value computed on the host is baked into the graph as \
             a constant, and a new constant is a new graph (set ENGINE_LOGS=recompiles to see the guard that fails)",
            stats.compiles
        )
    })?;
    Ok(format!("{calls} calls with new values: 1 compile, {} cache hits", calls - 1))
}
