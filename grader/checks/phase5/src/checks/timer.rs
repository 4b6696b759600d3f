//! Checks of `timer`. The pure parts (`quantile`, `is_stable`) are compared with the engine's own
//! answers on random samples. `do_bench` is handed work whose every call lasts a secret duration
//! (`engine::bench::spin`: a sleep on the CPU, a kernel on a GPU, which returns before it has
//! run) and whose first calls are slow, as a first call that compiles is; each sample is checked
//! against its call's duration, which the learner's code can know only by measuring it.

use std::cell::Cell;
use std::time::Duration;

use engine::Device;
use engine::bench::{Timing, spin};
use grader_harness::{CheckResult, Context, Tolerance, ensure, for_all, record, record_floats, secret_duration, wires};
use proptest::prelude::*;

use super::support::{log2_ms, timed};
use crate::subject::timer::{TimerConfig, do_bench, is_stable, quantile};

/// The engine's quantile, the reference: NaN for no samples.
fn reference_quantile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() { f64::NAN } else { wires::exempt(|| Timing::new(samples.to_vec()).quantile(q)) }
}

/// The stopping rule of `is_stable`'s doc comment, written by the grader.
fn reference_is_stable(samples: &[f64], config: &TimerConfig) -> bool {
    let n = samples.len();
    let median = |part: &[f64]| reference_quantile(part, 0.5);
    let settled = || {
        let (all, before) = (median(samples), median(&samples[..n - config.round]));
        (all - before).abs() <= config.stable_within * all
    };
    n >= config.max_samples || (n >= 2 * config.round && settled())
}

/// `quantile` agrees with the engine's on random samples, at random `q` (some outside 0..=1).
pub fn quantile_matches_the_engine(ctx: &Context) -> CheckResult {
    let cases = 300;
    let strategy = (prop::collection::vec(1e-6f64..1e-2, 0..30), -0.25f64..1.25);
    for_all(ctx, cases, strategy, |(samples, q)| {
        let (got, expected) = (quantile(&samples, q), reference_quantile(&samples, q));
        // JSON has no NaN: the answer for no samples is recorded as text.
        if got.is_nan() {
            record("quantile", "NaN");
        } else {
            record_floats("quantile", &[got as f32], Tolerance { abs: 1e-12, rel: 1e-6 });
        }
        let same = (got.is_nan() && expected.is_nan()) || (got - expected).abs() <= 1e-12 + 1e-9 * expected.abs();
        ensure(same, || format!("quantile({samples:?}, {q}) returned {got}, expected {expected}"))
    })?;
    Ok(format!("quantile agrees with the engine's on {cases} random sample sets"))
}

/// A sample set that sometimes settles: whole rounds and a part of one, the last round close to
/// the rest or not.
fn settling_samples() -> impl Strategy<Value = (Vec<f64>, TimerConfig)> {
    let settings = (1usize..6, 0usize..5, 0usize..6, 2usize..40, 0.0f64..0.05, 0.0f64..0.1);
    settings.prop_flat_map(|(round, rounds, part, max, within, jitter)| {
        let n = round * rounds + part % round;
        let config = TimerConfig { warmup: 0, round, max_samples: max, stable_within: within, flush_cache: false };
        (prop::collection::vec(1.0 - jitter..1.0 + jitter, n), Just(config))
    })
}

/// `is_stable` follows the stopping rule on random sample sets and settings.
pub fn stopping_rule_is_followed(ctx: &Context) -> CheckResult {
    let cases = 400;
    for_all(ctx, cases, settling_samples(), |(samples, config)| {
        let (got, expected) = (is_stable(&samples, &config), reference_is_stable(&samples, &config));
        record("is_stable", got);
        ensure(got == expected, || format!("is_stable({samples:?}, {config:?}) returned {got}, expected {expected}"))
    })?;
    Ok(format!("is_stable follows the rule on {cases} random sample sets"))
}

/// Whether `samples` measure calls that lasted `works`: on a GPU, where the work is a kernel timed
/// by the GPU's own clock, each within 5% plus 20 µs; on the CPU, where it is a sleep that a busy
/// machine overshoots by milliseconds (twentyfold, once, for a 2 ms sleep on a 2-core machine at
/// load 9), none shorter than its sleep and four in five at most twice it plus 5 ms. Made-up
/// samples cannot be at least every secret sleep and close to most of them. Returns the first
/// sample that breaks the rule.
fn covered(device: Device, samples: &[f64], works: &[Duration]) -> Result<(), usize> {
    let pairs = samples.iter().zip(works).map(|(&s, w)| (s, w.as_secs_f64()));
    match device {
        Device::Cuda(_) => match pairs.clone().position(|(s, w)| (s - w).abs() > 0.05 * w + 2e-5) {
            Some(i) => Err(i),
            None => Ok(()),
        },
        Device::Cpu => {
            if let Some(i) = pairs.clone().position(|(s, w)| s < w) {
                return Err(i);
            }
            let far: Vec<usize> = pairs.enumerate().filter(|(_, (s, w))| *s > 2.0 * w + 5e-3).map(|(i, _)| i).collect();
            if far.len() * 5 > samples.len() { Err(far[0]) } else { Ok(()) }
        }
    }
}

/// How long each timed call of `times_known_work` lasts, in milliseconds: drawn between these
/// from the run's seed.
const WORK_MS: (u64, u64) = (2, 12);

/// How long its warm-up calls last, in milliseconds, on the CPU and on a GPU.
const WARM_UP_MS: (u64, u64) = (200, 50);

/// `do_bench` on work whose every call lasts its own secret duration, drawn from the run's seed
/// (which the learner's process is not given): [`WORK_MS`], `engine::bench::spin` (a sleep on the
/// CPU, a kernel on a GPU, which returns before it has run). Warm-up calls are made and never
/// timed, one call makes one sample, the samples cover their calls' durations ([`covered`]),
/// and sampling stops where the rule says. The median is compared with the judge's, whose
/// reference timer measures the same calls. On a GPU this also shows that the timer measures the
/// device's work.
pub fn times_known_work(ctx: &Context) -> CheckResult {
    let device = Device::cuda_if_available();
    let (fastest, slowest) = (Duration::from_millis(WORK_MS.0), Duration::from_millis(WORK_MS.1));
    let work_of = |call: usize| secret_duration(ctx, "work", call as u64, fastest, slowest);
    // Slow enough that no ordinary call is ever as slow: on the CPU even a 2 ms sleep on a machine
    // so loaded that it oversleeps twentyfold (seen on a 2-core machine at load 9); on a GPU, whose
    // spin kernel lasts exactly its time, four times the longest call, so that the part timed
    // alone on a shared GPU stays short.
    let slow = Duration::from_millis(if device == Device::Cpu { WARM_UP_MS.0 } else { WARM_UP_MS.1 });
    let config = TimerConfig { warmup: 2, round: 5, max_samples: 20, stable_within: 0.02, flush_cache: true };
    let calls = Cell::new(0);
    let work = || {
        let call = calls.get();
        calls.set(call + 1);
        // The first calls are slow, as a first call that compiles is: they must be warm-up calls.
        spin(device, if call < config.warmup { slow } else { work_of(call) })
    };
    // The learner's timer runs while the grader holds the GPU's lock, on a shared machine.
    let measured = grader_harness::timed(|| do_bench(device, &config, work))?;
    let samples = measured.samples.clone();
    let n = samples.len();
    let one_per_call = calls.get() == config.warmup + n;
    let warm_up_untimed = samples.iter().all(|&s| s < slow.as_secs_f64());
    // `max_samples` is a whole number of rounds here, so every round has `config.round` samples.
    let stopped_where_the_rule_says = reference_is_stable(&samples, &config)
        && n >= config.round
        && !reference_is_stable(&samples[..n - config.round], &config);
    let works: Vec<Duration> = (0..n).map(|i| work_of(config.warmup + i)).collect();
    let uncovered = covered(device, &samples, &works).err();
    let median = reference_quantile(&samples, 0.5);
    record("one sample per call after the warm-up calls", one_per_call);
    record("no warm-up call among the samples", warm_up_untimed);
    record("stopped at the first stable round", stopped_where_the_rule_says);
    // How many samples a timer takes depends on how the measurements settle, so the label names
    // the first round's work only, which every run times.
    let first_round: Vec<String> = (0..config.round).map(|i| format!("{:.2?}", work_of(config.warmup + i))).collect();
    record(
        format!("every sample covers its call's work (the first round's: {})", first_round.join(" ")),
        uncovered.is_none(),
    );
    // The judge compares this with the median its own run of the reference timer measured.
    record_floats("log2 of the median's ms", &[log2_ms(median)], timed(device).steady);
    let on = format!(
        "timing work of {} to {} ms a call on {device} (the first {} calls take {slow:?})",
        WORK_MS.0, WORK_MS.1, config.warmup
    );
    ensure(one_per_call, || {
        format!(
            "{on}: the work was called {} times for {n} samples; expected {} warm-up calls plus one call per sample",
            calls.get(),
            config.warmup
        )
    })?;
    ensure(warm_up_untimed, || format!("{on}: a warm-up call was timed; your samples: {samples:?}"))?;
    ensure(stopped_where_the_rule_says, || {
        format!("{on}: you stopped after {n} samples, but the rule says otherwise for {samples:?} and {config:?}")
    })?;
    if let Some(i) = uncovered {
        let (sample, work) = (samples[i], works[i]);
        return Err(grader_harness::Failure::fail(format!(
            "{on}: sample {i} is {:.3} ms, but the call it timed lasted {:.3} ms{}",
            sample * 1e3,
            work.as_secs_f64() * 1e3,
            if matches!(device, Device::Cuda(_)) && sample < work.as_secs_f64() / 2.0 {
                ": the GPU runs the work after the call returns; time it with `Stamp`s, which are on the GPU's clock"
            } else {
                ": time each call alone, between two stamps"
            }
        )));
    }
    Ok(format!("{on}: {n} samples, covering their calls; median {:.3} ms", median * 1e3))
}
