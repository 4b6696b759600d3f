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

/// What each `model` kind computes, for a failing case's description.
const MODELS: [&str; 7] = [
    "softmax over the last dim",
    "log_softmax over the last dim",
    "layer_norm over the last dim",
    "sum over the last dim of x * w",
    "exp(x - amax over the last dim)",
    "mean over dim 0 of exp(x), plus w",
    "sqrt of the sum over dim 0 of x * x, times w",
];

/// One random case: which model, over a `[rows, cols]` input (and `w: [cols]`).
#[derive(Clone, Debug)]
#[allow(dead_code)] // `model` is read through Debug, in a failure's shrunk case.
struct Case {
    model: &'static str,
    kind: u8,
    rows: usize,
    cols: usize,
}

/// Random reduction models compiled with `reduction_c` match eager.
pub fn reduction_c_matches_eager(ctx: &Context) -> CheckResult {
    let cases = 21;
    // Rows of at least 33 elements: GCC 12 at -O3 miscompiles some fully unrolled short rows
    // (see the book); the engine's own printer guards against it, the exercise need not.
    let strategy = (any::<u8>(), 1usize..12, 33usize..160).prop_map(|(kind, rows, cols)| Case {
        model: MODELS[usize::from(kind) % 7],
        kind,
        rows: if kind % 7 >= 5 { rows + 33 } else { rows },
        cols,
    });
    for_all(ctx, cases, strategy, |Case { kind, rows, cols, .. }| {
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
