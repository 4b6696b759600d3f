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

/// One case: which model, over a `[rows, cols]` input (and `w: [cols]`), with values in
/// `-2..2`, or with no positive value at all (`negative`: a maximum then starts below 0); the
/// input a transposed view of a `[cols, rows]` tensor where `transposed` (its rows strided).
#[derive(Clone, Debug)]
#[allow(dead_code)] // `model` is read through Debug, in a failure's shrunk case.
struct Case {
    model: &'static str,
    kind: u8,
    rows: usize,
    cols: usize,
    negative: bool,
    transposed: bool,
}

/// Compiles model `kind` with `reduction_c` (its buffers guarded) and compares it with eager.
fn matches(seed: u64, Case { kind, rows, cols, negative, transposed, .. }: Case) -> Result<(), grader_harness::Failure> {
    let (low, high) = if negative { (-3.0, -0.5) } else { (-2.0, 2.0) };
    let x = if transposed {
        Tensor::uniform(&[cols, rows], low, high, seed).t()?
    } else {
        Tensor::uniform(&[rows, cols], low, high, seed)
    };
    let inputs = [x, Tensor::uniform(&[cols], 0.5, 1.5, seed + 1)];
    let inductor = Inductor::with_config(Config {
        printers: Printers { reduction_c: Some(reduction_c), ..Printers::default() },
        guard_buffers: true,
        ..Config::default()
    });
    matches_eager("the compiled model's output", inductor, &|t| model(kind, t), &inputs).map(|_| ())
}

/// Every reduction model on the edge cases a correct kernel must handle (rows with no positive
/// value, a single row, strided rows, a width drawn from the seed that is no multiple of a
/// vector), then random models, compiled with `reduction_c` (its buffers guarded), match eager.
pub fn reduction_c_matches_eager(ctx: &Context) -> CheckResult {
    // Rows of at least 33 elements: GCC 12 at -O3 miscompiles some fully unrolled short rows
    // (see the book); the engine's own printer guards against it, the exercise need not.
    let cols = 33 + 2 * (ctx.seed % 40) as usize;
    for kind in 0..7u8 {
        let model = MODELS[usize::from(kind)];
        // The models reducing over dim 0 need rows as long as the others' rows.
        let rows = |r: usize| if kind >= 5 { r + 33 } else { r };
        for (rows, negative, transposed) in [(rows(3), true, false), (rows(1), false, false), (rows(5), false, true)] {
            matches(ctx.seed + u64::from(kind), Case { model, kind, rows, cols, negative, transposed })?;
        }
    }
    let cases = 21;
    let strategy = (any::<u8>(), 1usize..12, 33usize..160, any::<bool>(), any::<bool>()).prop_map(
        |(kind, rows, cols, negative, transposed)| Case {
            model: MODELS[usize::from(kind) % 7],
            kind,
            rows: if kind % 7 >= 5 { rows + 33 } else { rows },
            cols,
            negative,
            transposed,
        },
    );
    for_all(ctx, cases, strategy, |case| matches(ctx.seed, case))?;
    Ok(format!(
        "every model on rows with no positive value, a single row and strided rows ({cols} wide), then {cases} \
         random models, compiled with your C, match eager"
    ))
}
