//! Checks of `train_break_even`: `measure_training_costs` times a compiled training step of the
//! MLP (forward, loss, backward and SGD in one graph) against the eager step; its times, and the
//! break-even count they give, are compared by the judge with the reference solution's, measured
//! in the judge's own process with its own empty kernel cache.

use engine::Device;
use grader_harness::{CheckResult, Context, ensure, record, record_floats};

use super::break_even::reference_break_even;
use super::support::{Timed, cold_kernel_cache, log2_ms, timed};
use crate::subject::break_even::Costs;
use crate::subject::train::measure_training_costs;

/// `measure_training_costs` measures a cold first call and both steady states of a training step:
/// at batch 16 on the CPU, 64 on a GPU (where the step is bound by its launches, which one graph
/// saves).
pub fn training_costs_are_measured(_ctx: &Context) -> CheckResult {
    let device = Device::cuda_if_available();
    let _cache = cold_kernel_cache(device)?;
    let Timed { sweep: config, steady, first_call: first_call_tolerance, .. } = timed(device);
    let batch = if device == Device::Cpu { 16 } else { 64 };
    let costs = measure_training_costs(device, batch, &config)?;
    let Costs { first_call, compiled, eager } = costs;
    let call = format!("measure_training_costs({device}, {batch}, ..)");
    ensure([first_call, compiled, eager].iter().all(|t| t.is_finite() && *t > 0.0), || {
        format!("{call} returned {costs:?}: every cost is a positive number of seconds")
    })?;
    ensure(first_call > compiled, || {
        format!(
            "{call} returned a first call of {:.3} ms, no more than a steady compiled step ({:.3} ms): the first call \
             traces the step and compiles its forward, backward and update, so time it alone, before any other call",
            first_call * 1e3,
            compiled * 1e3
        )
    })?;
    record_floats("log2 of the first step's ms", &[log2_ms(first_call)], first_call_tolerance);
    record_floats("log2 of a compiled step's ms", &[log2_ms(compiled)], steady);
    record_floats("log2 of an eager step's ms", &[log2_ms(eager)], steady);
    let count = reference_break_even(&costs);
    record("repaid at all", count.is_some());
    if let Some(n) = count {
        record_floats("log2 of the break-even count", &[(n as f32).log2()], first_call_tolerance);
    }
    Ok(format!(
        "first step {:.1} ms, then {:.3} ms compiled against {:.3} ms eager: repaid after {} steps",
        first_call * 1e3,
        compiled * 1e3,
        eager * 1e3,
        count.map_or("no number of".to_string(), |n| n.to_string())
    ))
}
