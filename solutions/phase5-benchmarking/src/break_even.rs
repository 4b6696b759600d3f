//! Exercise `break_even`: how many calls repay the compile time.

use std::time::Instant;

use engine::{Device, Result, Tensor, dynamo};

use crate::models::naive_layer_norm;
use crate::timer::{TimerConfig, do_bench};

/// What one compiled function costs against running eagerly, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// The first compiled call: tracing, compiling, loading and one run.
    pub first_call: f64,
    /// A compiled call in the steady state (median).
    pub compiled: f64,
    /// An eager call (median).
    pub eager: f64,
}

// ANCHOR: break_even
/// **Exercise `break_even`, part 1.** How many calls it takes for the compiled function to have
/// cost no more in total than running eagerly: the smallest `n >= 1` with
/// `first_call + (n - 1) * compiled <= n * eager`. `None` when no number of calls repays it,
/// because a compiled call is no faster than an eager one (and the first call is not either).
///
/// Book: `book/src/phase5/exercises.md`, section "break_even". Check: `cargo grader check phase5`.
pub fn break_even(costs: &Costs) -> Option<u64> {
    // ANCHOR: solution
    let Costs { first_call, compiled, eager } = *costs;
    if first_call <= eager {
        return Some(1);
    }
    if compiled >= eager {
        return None;
    }
    // first_call + (n - 1) c <= n e  <=>  n >= (first_call - c) / (e - c)
    Some(((first_call - compiled) / (eager - compiled)).ceil().max(1.0) as u64)
    // ANCHOR_END: solution
}
// ANCHOR_END: break_even

// ANCHOR: measure_costs
/// **Exercise `break_even`, part 2.** Measure the [`Costs`] of the naive layer norm
/// ([`naive_layer_norm`], nine primitive ops that Inductor fuses into one kernel) over an input
/// `Tensor::randn(&[rows, cols], 1)` with weight `Tensor::randn(&[cols], 2)` and bias
/// `Tensor::randn(&[cols], 3)`, all on `device`. Compile it with `dynamo::compile` and time its
/// first call alone with [`Instant`], waiting for the device before starting the clock and
/// before stopping it (`device.synchronize()`): the first call's cost is on the host, where
/// device events would miss it. Then time the steady state of the compiled and the eager
/// function with your `do_bench` and `config`.
///
/// Book: `book/src/phase5/exercises.md`, section "break_even". Check: `cargo grader check phase5`.
pub fn measure_costs(device: Device, rows: usize, cols: usize, config: &TimerConfig) -> Result<Costs> {
    // ANCHOR: solution
    let x = Tensor::randn(&[rows, cols], 1).to(device)?;
    let (weight, bias) = (Tensor::randn(&[cols], 2).to(device)?, Tensor::randn(&[cols], 3).to(device)?);
    let eager = |x: Tensor| naive_layer_norm(&x, &weight, &bias);
    let compiled = dynamo::compile(eager);
    device.synchronize()?;
    let start = Instant::now();
    compiled.call(&x)?;
    device.synchronize()?;
    let first_call = start.elapsed().as_secs_f64();
    let steady = do_bench(device, config, || compiled.call(&x).map(drop))?;
    let eager = do_bench(device, config, || eager(x.clone()).map(drop))?;
    Ok(Costs { first_call, compiled: steady.median(), eager: eager.median() })
    // ANCHOR_END: solution
}
// ANCHOR_END: measure_costs
