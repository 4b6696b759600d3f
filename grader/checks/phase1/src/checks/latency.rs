//! Checks of `latency`. The grader never trusts reported speed: it hands `measure_latency` a
//! probe backend whose compile and run take at least a known time and counts what happens, so
//! the timings can be checked against facts rather than against this machine's speed.

use std::time::Duration;

use engine::Device;
use engine::backends::Eager;
use grader_harness::{CheckResult, Context, ensure, for_all, gpu, record};
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
pub fn one_compile_then_cache_hits(_ctx: &Context) -> CheckResult {
    let probe = Probe::new();
    let counts = probe.counts.clone();
    let steady_calls = 5;
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

/// The first call includes the compile and the steady samples do not; each sample is a real
/// measurement of one call; the median is the samples' median.
pub fn timings_are_real(_ctx: &Context) -> CheckResult {
    let (compile, run) = (Duration::from_millis(150), Duration::from_millis(3));
    let probe = Probe::new().compile_delay(compile).run_delay(run);
    let latency = measure_latency(Box::new(probe), Device::Cpu, 4)?;
    let expected_median = reference_median(&latency.steady);
    record(
        "samples, and whether each timing covers what it should",
        format!(
            "{} {} {} {} {}",
            latency.steady.len(),
            latency.first_call >= compile + run,
            latency.steady.iter().all(|&s| s >= run),
            latency.steady_median < compile,
            same_duration(latency.steady_median, expected_median)
        ),
    );
    let call = format!("with a backend whose compile takes at least {compile:?} and whose runs take at least {run:?},");
    ensure(latency.first_call >= compile + run, || {
        format!("{call} you measured a first call of {:?}: it must include the compile and one run", latency.first_call)
    })?;
    ensure(latency.steady.iter().all(|&s| s >= run), || {
        format!(
            "{call} your steady samples {:?} are shorter than one run: time each call from just before it to just after its output is read",
            latency.steady
        )
    })?;
    ensure(latency.steady_median < compile, || {
        format!(
            "{call} your steady median is {:?}: steady calls hit the cache and must not compile again",
            latency.steady_median
        )
    })?;
    ensure(same_duration(latency.steady_median, expected_median), || {
        format!(
            "steady_median is {:?}, but the median of your samples {:?} is {expected_median:?}",
            latency.steady_median, latency.steady
        )
    })?;
    Ok(format!(
        "first call {:.1?} includes the {compile:?} compile; steady median {:.1?}",
        latency.first_call, latency.steady_median
    ))
}

/// On a GPU a call returns before its kernels finish, so each clock must stop only once the
/// output's values are read. A backend that keeps the GPU busy for a known time after every run
/// shows whether it did; then the real comparison, `Eager` on the GPU, is reported.
pub fn waits_for_the_gpu(_ctx: &Context) -> CheckResult {
    let device = gpu()?;
    let busy = Duration::from_millis(20);
    let latency = measure_latency(Box::new(Probe::new().device_work(device, busy)), device, 3)?;
    let waited = latency.first_call >= busy && latency.steady.iter().all(|&s| s >= busy);
    record("steady samples, and whether every call waited for the GPU", format!("{} {waited}", latency.steady.len()));
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
