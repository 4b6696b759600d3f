//! Checks of `break_even`. The count is compared with the grader's on random costs; the measured
//! costs of the naive layer norm are recorded as `log2` of milliseconds and compared by the judge
//! with the reference solution's, measured in the judge's own process. Both processes compile
//! into a fresh, empty kernel cache, so that both first calls pay the whole compile.

use engine::Device;
use grader_harness::{CheckResult, Context, Failure, Tolerance, ensure, for_all, record, record_floats};
use proptest::prelude::*;

use super::support::{Timed, cold_kernel_cache, log2_ms, timed, wake_the_gpu};
use crate::subject::break_even::{Costs, break_even, measure_costs};

/// The grader's count: the first `n` at which `n` eager calls cost at least the compiled ones,
/// searched for from just below where the algebra puts it (the division may round either way).
pub(super) fn reference_break_even(costs: &Costs) -> Option<u64> {
    let c = *costs;
    let repays = |n: u64| c.first_call + (n - 1) as f64 * c.compiled <= n as f64 * c.eager;
    if repays(1) {
        return Some(1);
    }
    if c.compiled >= c.eager {
        return None;
    }
    let estimate = ((c.first_call - c.compiled) / (c.eager - c.compiled)).ceil() as u64;
    (estimate.saturating_sub(1).max(1)..).find(|&n| repays(n))
}

/// Costs from 1 µs to 1 s, compiled faster or slower than eager.
fn costs() -> impl Strategy<Value = Costs> {
    (1e-6f64..1.0, 1e-6f64..1e-2, 0.2f64..4.0).prop_map(|(first_call, eager, speedup)| Costs {
        first_call,
        compiled: eager / speedup,
        eager,
    })
}

/// `break_even` agrees with the grader's count on random costs.
pub fn break_even_is_counted(ctx: &Context) -> CheckResult {
    let cases = 400;
    for_all(ctx, cases, costs(), |costs| {
        let (got, expected) = (break_even(&costs), reference_break_even(&costs));
        record("break_even", format!("{got:?}"));
        ensure(got == expected, || format!("break_even({costs:?}) returned {got:?}, expected {expected:?}"))
    })?;
    Ok(format!("break_even agrees with the grader's count on {cases} random costs"))
}

/// `measure_costs` measures a cold first call and both steady states of the naive layer norm:
/// the first call costs more than a compiled call, and the judge finds the same costs and the same
/// break-even count, within a factor of 2, in its own process.
pub fn costs_are_measured(_ctx: &Context) -> CheckResult {
    let device = Device::cuda_if_available();
    let _cache = cold_kernel_cache(device)?;
    let Timed { costs: config, steady, first_call: first_call_tolerance, .. } = timed(device);
    // On a CPU, large enough that an eager call is not lost in tens of microseconds of noise,
    // which can differ 4x between two processes.
    let (rows, cols) = if device == Device::Cpu { (256, 512) } else { (8192, 1024) };
    // The first call is measured cold, compile included: all of it holds the GPU's lock, in one
    // hold with the clock's wake-up (each hold waits for the runners already on the GPU).
    let costs = grader_harness::timed(|| {
        wake_the_gpu(device)?;
        Ok::<_, Failure>(measure_costs(device, rows, cols, &config)?)
    })?;
    judge_costs(&format!("measure_costs({device}, {rows}, {cols}, ..)"), "call", &costs, steady, first_call_tolerance)
}

/// Costs a `measure_...` function returned, judged alike for one call of a compiled function and
/// one training step (`unit`, "call" or "step"): every time positive, the first dearer than a
/// steady compiled one, and the first call's excess over a compiled one, the two steady times and
/// the break-even count recorded for the judge, who measures them again. `call` names the call in messages.
pub(super) fn judge_costs(
    call: &str,
    unit: &str,
    costs: &Costs,
    steady: Tolerance,
    first_call_tolerance: Tolerance,
) -> CheckResult {
    let Costs { first_call, compiled, eager } = *costs;
    ensure([first_call, compiled, eager].iter().all(|t| t.is_finite() && *t > 0.0), || {
        format!("{call} returned {costs:?}: every cost is a positive number of seconds")
    })?;
    ensure(first_call > compiled, || {
        format!(
            "{call} returned a first {unit} of {:.3} ms, no more than a steady compiled {unit} ({:.3} ms): the first \
             {unit} traces and compiles, so time it alone, before any other",
            first_call * 1e3,
            compiled * 1e3
        )
    })?;
    // What the first call costs beyond a compiled one (tracing and compiling), not the first call
    // itself: where a step takes a good part of the compile's time (the training step on a CPU),
    // a first call timed after a warm-up is within the tolerance of a cold one, but its excess is
    // a few milliseconds of noise against hundreds.
    record_floats(
        format!("log2 of the first {unit}'s ms beyond a compiled {unit}'s"),
        &[log2_ms(first_call - compiled)],
        first_call_tolerance,
    );
    record_floats(format!("log2 of a compiled {unit}'s ms"), &[log2_ms(compiled)], steady);
    record_floats(format!("log2 of an eager {unit}'s ms"), &[log2_ms(eager)], steady);
    let count = reference_break_even(costs);
    record("repaid at all", count.is_some());
    if let Some(n) = count {
        // The count is about the first call over the steady saving: as uncertain as the first call.
        record_floats("log2 of the break-even count", &[(n as f32).log2()], first_call_tolerance);
    }
    Ok(format!(
        "first {unit} {:.1} ms, then {:.3} ms compiled against {:.3} ms eager: repaid after {} {unit}s",
        first_call * 1e3,
        compiled * 1e3,
        eager * 1e3,
        count.map_or("no number of".to_string(), |n| n.to_string())
    ))
}
