//! Checks of `train_break_even`: `measure_training_costs` times a compiled training step of the
//! MLP (forward, loss, backward and SGD in one graph) against the eager step; its times, and the
//! break-even count they give, are compared by the judge with the reference solution's, measured
//! in the judge's own process with its own empty kernel cache.

use engine::Device;
use grader_harness::{CheckResult, Context, Failure};

use super::break_even::judge_costs;
use super::support::{Timed, cold_kernel_cache, timed, wake_the_gpu};
use crate::subject::train::measure_training_costs;

/// `measure_training_costs` measures a cold first call and both steady states of a training step,
/// at a batch drawn from the run's seed: 8 to 32 on the CPU, 32 to 128 on a GPU (where the step is
/// bound by its launches, which one graph saves).
pub fn training_costs_are_measured(ctx: &Context) -> CheckResult {
    let device = Device::cuda_if_available();
    let _cache = cold_kernel_cache(device)?;
    let Timed { sweep: config, steady, first_call: first_call_tolerance, .. } = timed(device);
    let batches: [usize; 4] = if device == Device::Cpu { [8, 16, 24, 32] } else { [32, 64, 96, 128] };
    let batch = batches[(ctx.seed % 4) as usize];
    // The first step is measured cold, compile included: all of it holds the GPU's lock, in one
    // hold with the clock's wake-up.
    let costs = grader_harness::timed(|| {
        wake_the_gpu(device)?;
        Ok::<_, Failure>(measure_training_costs(device, batch, &config)?)
    })?;
    judge_costs(&format!("measure_training_costs({device}, {batch}, ..)"), "step", &costs, steady, first_call_tolerance)
}
