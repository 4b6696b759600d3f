//! Exercise `modes`: the three compile modes against eager, and what each one's compile costs.

use std::time::Instant;

use engine::dynamo::{self, Mode};
use engine::{Device, Result, Tensor};

use crate::break_even::Costs;
use crate::models::{MLP_FEATURES, Mlp};
use crate::sweep::SEED;
use crate::timer::{TimerConfig, do_bench};

/// What compiling the MLP in one mode costs, against running it eagerly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModeCosts {
    /// The mode.
    pub mode: Mode,
    /// Its first call, its steady-state call and the eager call, in seconds.
    pub costs: Costs,
}

// ANCHOR: measure_modes
/// **Exercise `modes`, part 1.** Measure the MLP (`Mlp::new(SEED, device)`) on an input
/// `Tensor::randn(&[batch, MLP_FEATURES], batch as u64)` on `device`: first its eager median with
/// your `do_bench` and `config`, then for each mode of [`Mode::ALL`], in order, a fresh
/// `dynamo::compile(..).mode(mode)` whose first call you time alone (as in `measure_costs`) and
/// whose steady state you time with `do_bench`. One [`ModeCosts`] per mode, each holding the same
/// eager median.
///
/// Book: `book/src/phase5/exercises.md`, section "modes". Check: `cargo grader check phase5`.
pub fn measure_modes(device: Device, batch: usize, config: &TimerConfig) -> Result<Vec<ModeCosts>> {
    // ANCHOR: solution
    let mlp = Mlp::new(SEED, device)?;
    let x = Tensor::randn(&[batch, MLP_FEATURES], batch as u64).to(device)?;
    let eager = do_bench(device, config, || mlp.forward(&x).map(drop))?.median();
    let mut rows = Vec::with_capacity(Mode::ALL.len());
    for mode in Mode::ALL {
        let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).mode(mode);
        device.synchronize()?;
        let start = Instant::now();
        compiled.call(&x)?;
        device.synchronize()?;
        let first_call = start.elapsed().as_secs_f64();
        let steady = do_bench(device, config, || compiled.call(&x).map(drop))?.median();
        rows.push(ModeCosts { mode, costs: Costs { first_call, compiled: steady, eager } });
    }
    Ok(rows)
    // ANCHOR_END: solution
}
// ANCHOR_END: measure_modes

// ANCHOR: fastest
/// **Exercise `modes`, part 2.** The mode whose steady-state call is fastest (the smallest
/// `costs.compiled`); the earlier one in `rows` on a tie; `None` for no rows.
///
/// Book: `book/src/phase5/exercises.md`, section "modes". Check: `cargo grader check phase5`.
pub fn fastest(rows: &[ModeCosts]) -> Option<Mode> {
    // ANCHOR: solution
    rows.iter().reduce(|best, row| if row.costs.compiled < best.costs.compiled { row } else { best }).map(|r| r.mode)
    // ANCHOR_END: solution
}
// ANCHOR_END: fastest
