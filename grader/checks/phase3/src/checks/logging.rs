//! Checks of `logging`: no break when compiled, the same log lines when eager, the same outputs.

use engine::Tensor;
use grader_harness::{CheckResult, Context, Tolerance, ensure, record, record_tensor};

use super::support::{matches_original, one_graph};
use crate::subject::models::normalized_original;
use crate::subject::{Logger, example_input, normalized};

/// Compiled, `normalized` makes one graph and logs nothing.
pub fn normalized_is_one_graph(ctx: &Context) -> CheckResult {
    let logger = Logger::new();
    one_graph("normalized", |x: Tensor| normalized(&x, &logger), &example_input(3, ctx.seed))?;
    Ok("one graph, no break".into())
}

/// Run eagerly, `normalized` still logs what the original logs: the side effect was moved out
/// of the graph, not deleted.
pub fn still_logs_when_eager(ctx: &Context) -> CheckResult {
    let x = example_input(1 + (ctx.seed % 6) as usize, ctx.seed);
    let (yours, original) = (Logger::new(), Logger::new());
    let output = normalized(&x, &yours)?;
    record_tensor("the output, run eagerly", &output, Tolerance::F32);
    normalized_original(&x, &original)?;
    record("the lines logged eagerly", format!("{:?}", yours.lines()));
    ensure(yours.lines() == original.lines(), || {
        format!("run eagerly, normalized logged {:?}; the original logs {:?}", yours.lines(), original.lines())
    })?;
    Ok(format!("run eagerly it logs the original's {} lines", original.lines().len()))
}

/// Compiled with `fullgraph(true)`, the original's outputs, to float32 rounding: not bit for bit,
/// because the compiled kernel calls the C library's `tanhf` and `expf` while eager calls the
/// engine's own, and those agree bit for bit on some machines and not others (on the H100 host, 48
/// of 64 elements differed in the last bits, for the reference solution).
pub fn normalized_matches_the_original(ctx: &Context) -> CheckResult {
    let logger = Logger::new();
    for rows in [1, 4] {
        let x = example_input(rows, ctx.seed + rows as u64);
        matches_original(
            "normalized",
            |x: Tensor| normalized(&x, &logger),
            |x| normalized_original(x, &Logger::new()),
            &x,
            Tolerance::F32,
        )?;
    }
    Ok("the original's outputs, to float32 rounding, in one graph".into())
}
