//! What the timed checks share: how they time on each device, and how they record a time so that
//! the judge compares it as a ratio.

use engine::Device;
use grader_harness::Tolerance;

use crate::subject::timer::TimerConfig;

/// How the timed checks time on one kind of device.
pub struct Timed {
    /// The timer settings handed to the learner's functions.
    pub config: TimerConfig,
    /// The MLP batch sizes of the sweep.
    pub batches: &'static [usize],
    /// How far a steady-state time may be from the judge's, recorded with [`log2_ms`].
    pub steady: Tolerance,
    /// How far a first call (a cold compile) may be from the judge's, recorded with [`log2_ms`].
    pub first_call: Tolerance,
}

/// The settings of the timed checks on `device`. On the CPU the checks run in the grader's debug
/// build, next to other checks that load the machine, where one MLP call takes a large fraction
/// of a second: few samples, small batches, and times agreeing with the judge's within a factor of
/// 4. On a GPU the kernels run at full speed and the grader holds the GPU alone: the course's batch
/// sizes, more samples, steady times within a factor of 1.5 and first calls within 2.
pub fn timed(device: Device) -> Timed {
    match device {
        Device::Cpu => Timed {
            config: TimerConfig { warmup: 1, round: 3, max_samples: 6, stable_within: 0.05, flush_cache: true },
            batches: &[1, 4, 16],
            steady: Tolerance { abs: 1.0, rel: 0.0 },
            first_call: Tolerance { abs: 1.0, rel: 0.0 },
        },
        Device::Cuda(_) => Timed {
            config: TimerConfig { warmup: 3, round: 10, max_samples: 50, stable_within: 0.02, flush_cache: true },
            batches: &crate::subject::models::MLP_BATCHES,
            steady: Tolerance { abs: 0.3, rel: 0.0 },
            first_call: Tolerance { abs: 0.5, rel: 0.0 },
        },
    }
}

/// `log2` of `seconds` in milliseconds. Recorded with an absolute tolerance `t` (which the judge
/// doubles), two times agree when their ratio is within `2^(2t)`.
pub fn log2_ms(seconds: f64) -> f32 {
    (seconds * 1e3).log2() as f32
}
