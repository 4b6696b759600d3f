//! Checks of `reduction_c`: softmax, layer norm and plain reductions, compiled with the printed
//! C inside a real Inductor compilation, compute what eager execution computes.

use engine::backends::Inductor;
use engine::inductor::{Config, Printers};
use engine::{Result, Tensor};
use grader_harness::{CheckResult, Context, for_all};
use proptest::prelude::*;

use super::support::matches_eager;
use crate::subject::reduction_c;

/// A reduction model over `[rows, cols]` and a `[cols]` parameter.
fn model(kind: u8, t: Vec<Tensor>) -> Result<Tensor> {
    let (x, w) = (&t[0], &t[1]);
    match kind % 7 {
        0 => x.softmax(-1),
        1 => x.log_softmax(-1),
        2 => x.layer_norm(w, &w.mul(0.5)?, 1e-5),
        3 => x.mul(w)?.sum(-1, true),
        4 => x.sub(&x.amax(-1, true)?)?.exp(),
        5 => x.exp()?.mean(0, false)?.add(w),
        _ => x.mul(x)?.sum(0, true)?.sqrt()?.mul(w),
    }
}

/// Random reduction models compiled with `reduction_c` match eager.
pub fn reduction_c_matches_eager(ctx: &Context) -> CheckResult {
    let cases = 21;
    // Rows of at least 33 elements: GCC 12 at -O3 miscompiles some fully unrolled short rows
    // (see the book); the engine's own printer guards against it, the exercise need not.
    let strategy = (any::<u8>(), 1usize..12, 33usize..160);
    for_all(ctx, cases, strategy, |(kind, rows, cols)| {
        let rows = if kind % 7 >= 5 { rows + 33 } else { rows };
        let inputs =
            [Tensor::uniform(&[rows, cols], -2.0, 2.0, ctx.seed), Tensor::uniform(&[cols], 0.5, 1.5, ctx.seed + 1)];
        let inductor = Inductor::with_config(Config {
            printers: Printers { reduction_c: Some(reduction_c), ..Printers::default() },
            ..Config::default()
        });
        matches_eager("the compiled model's output", inductor, &|t| model(kind, t), &inputs).map(|_| ())
    })?;
    Ok(format!("{cases} random reduction models compiled with your C match eager"))
}
