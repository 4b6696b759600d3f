//! Checks of `latency`. The grader never trusts reported speed: it hands `measure_latency` a
//! probe backend whose compile and runs take times it drew in secret and counts what happens, so
//! the timings are checked against facts the learner's code can only learn by measuring.

use std::time::Duration;

use engine::Device;
use engine::backends::Eager;
use grader_harness::{CheckResult, Context, ensure, for_all, gpu, record, secret_duration};
use proptest::prelude::*;

use super::support::Probe;
use crate::subject::{measure_latency, median};

/// The grader's median, to compare with the learner's.
fn reference_median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

/// Whether two durations agree up to rounding of the last nanosecond.
fn same_duration(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= Duration::from_nanos(1)
}

/// `median` on unsorted samples of odd and even length, and on none.
pub fn median_is_the_middle(ctx: &Context) -> CheckResult {
    let samples = prop::collection::vec(0u64..1_000_000, 0..25);
    for_all(ctx, 200, samples, |micros| {
        let samples: Vec<Duration> = micros.iter().map(|&m| Duration::from_micros(m)).collect();
        let (got, expected) = (median(&samples), reference_median(&samples));
        record("median", format!("{got:?}"));
        ensure(same_duration(got, expected), || format!("median({samples:?}) returned {got:?}, expected {expected:?}"))
    })?;
    Ok("median agrees with the grader's on 200 random sample sets".into())
}

/// The first call compiles once; every later call is a cache hit; the stats say so.
pub fn one_compile_then_cache_hits(ctx: &Context) -> CheckResult {
    let probe = Probe::new();
    let counts = probe.counts.clone();
    let steady_calls = 3 + (ctx.seed % 6) as usize;
    let latency = measure_latency(Box::new(probe), Device::Cpu, steady_calls)?;
    let (compiles, runs) = counts.get();
    let stats = latency.stats;
    record(
        "compiles, runs, steady samples, stats and backend name",
        format!(
            "{compiles} {runs} {} {} {} {} {}",
            latency.steady.len(),
            stats.calls,
            stats.compiles,
            stats.cache_hits,
            latency.backend
        ),
    );
    let call = format!("measure_latency(probe, Device::Cpu, {steady_calls})");
    ensure(compiles == 1 && runs == steady_calls + 1, || {
        format!(
            "{call} made the backend compile {compiles} graph(s) and run {runs} time(s); expected 1 compile and {} runs (the first call plus {steady_calls})",
            steady_calls + 1
        )
    })?;
    ensure(latency.steady.len() == steady_calls, || {
        format!("{call} returned {} steady samples, expected {steady_calls}", latency.steady.len())
    })?;
    ensure(stats.calls == steady_calls + 1 && stats.compiles == 1 && stats.cache_hits == steady_calls, || {
        format!(
            "{call} returned stats with calls {}, compiles {}, cache_hits {}; expected {}, 1, {steady_calls} (take them from `compiled.stats()` after the last call)",
            stats.calls,
            stats.compiles,
            stats.cache_hits,
            steady_calls + 1
        )
    })?;
    ensure(latency.backend == "probe", || format!("{call} named the backend `{}`, expected `probe`", latency.backend))?;
    Ok(format!("1 compile, then {steady_calls} cache hits; the stats agree"))
}

/// How far a timing may run past the work it timed: what tracing, the cache lookup and the
/// eager kernels add to a call in the grader's debug build on a busy machine. A measurement
/// must lie between the work's duration and `SLACK_FACTOR` times it plus `SLACK`.
const SLACK_FACTOR: f64 = 2.0;
const SLACK: Duration = Duration::from_millis(60);

/// The steady calls `timings_are_real` asks for.
const TIMED_STEADY_CALLS: usize = 4;

/// Whether `measured` can be a measurement of work that lasted `work`.
fn covers(measured: Duration, work: Duration) -> bool {
    measured >= work && measured <= work.mul_f64(SLACK_FACTOR) + SLACK
}

/// The first call and each steady call are measured, not made up: the probe backend's compile and
/// each of its runs sleep for secret durations, drawn from the run's seed (which the learner's
/// process is not given), between 80 and 640 ms and between 40 and 640 ms. Each timing must cover
/// the sleeps of the calls it times, and exceed them by no more than a call's own cost; the median
/// must be the samples' median.
pub fn timings_are_real(ctx: &Context) -> CheckResult {
    let secret =
        |role, k, min, max| secret_duration(ctx, role, k, Duration::from_millis(min), Duration::from_millis(max));
    let compile = secret("compile", 0, 80, 640);
    let runs: Vec<Duration> = (0..=TIMED_STEADY_CALLS as u64).map(|k| secret("run", k, 40, 640)).collect();
    let probe = Probe::new().compile_delay(compile).run_delays(runs.clone());
    let latency = measure_latency(Box::new(probe), Device::Cpu, TIMED_STEADY_CALLS)?;
    ensure(latency.steady.len() == TIMED_STEADY_CALLS, || {
        format!("asked for {TIMED_STEADY_CALLS} steady calls, you returned {} samples", latency.steady.len())
    })?;
    let first_work = compile + runs[0];
    let allowed = |work: Duration| format!("{work:.1?} to {:.1?}", work.mul_f64(SLACK_FACTOR) + SLACK);
    let first_ok = covers(latency.first_call, first_work);
    record(format!("the first call (compile and run slept {first_work:.1?}) covered"), first_ok);
    ensure(first_ok, || {
        format!(
            "the probe backend's compile and first run slept {first_work:.1?} in all, so the first call takes {}; you \
             measured {:.1?}. Time the first call alone, from just before it to just after its output is read.",
            allowed(first_work),
            latency.first_call
        )
    })?;
    for (k, (&sample, &work)) in latency.steady.iter().zip(&runs[1..]).enumerate() {
        let ok = covers(sample, work);
        record(format!("steady call {k} (its run slept {work:.1?}) covered"), ok);
        ensure(ok, || {
            format!(
                "steady call {k}'s run slept {work:.1?}, so it takes {}; you measured {sample:.1?} (all your \
                 samples: {:.1?}). Time each call alone, from just before it to just after its output is read.",
                allowed(work),
                latency.steady
            )
        })?;
    }
    let expected_median = reference_median(&latency.steady);
    let median_ok = same_duration(latency.steady_median, expected_median);
    record("steady_median is the samples' median", median_ok);
    ensure(median_ok, || {
        format!(
            "steady_median is {:?}, but the median of your samples {:?} is {expected_median:?}",
            latency.steady_median, latency.steady
        )
    })?;
    Ok(format!(
        "first call {:.1?} covers the {compile:.1?} compile; each steady call covers its run; steady median {:.1?}",
        latency.first_call, latency.steady_median
    ))
}

/// On a GPU a call returns before its kernels finish, so each clock must stop only once the
/// output's values are read. A backend that keeps the GPU busy for a known time after every run
/// shows whether it did; then the real comparison, `Eager` on the GPU, is reported.
pub fn waits_for_the_gpu(ctx: &Context) -> CheckResult {
    let device = gpu()?;
    let busy = secret_duration(ctx, "busy", 0, Duration::from_millis(20), Duration::from_millis(80));
    let latency = measure_latency(Box::new(Probe::new().device_work(device, busy)), device, 3)?;
    let waited = latency.first_call >= busy && latency.steady.iter().all(|&s| s >= busy);
    record(
        format!("steady samples, and whether every call waited the {busy:.1?} the GPU was busy"),
        format!("{} {waited}", latency.steady.len()),
    );
    let call = format!("with a backend whose every run keeps {device} busy for at least {busy:?},");
    ensure(waited, || {
        format!(
            "{call} you measured a first call of {:?} and steady calls of {:?}: a GPU call returns before its \
             kernels finish, so stop each clock only after the output's `.to_vec()`",
            latency.first_call, latency.steady
        )
    })?;
    let eager = measure_latency(Box::new(Eager), device, 10)?;
    Ok(format!(
        "every call waited for the GPU; eager on {device}: first call {:.1?}, steady median {:.1?}",
        eager.first_call, eager.steady_median
    ))
}
