//! Exercise `timer`: a timer in the spirit of `triton.testing.do_bench`.

use engine::bench::{CacheFlush, Stamp};
use engine::{Device, Result};

/// How [`do_bench`] samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimerConfig {
    /// Untimed calls first: the first call compiles, the next ones fill caches and pools.
    pub warmup: usize,
    /// Samples are taken in rounds of this many; stability is judged after each round.
    pub round: usize,
    /// No more samples than this, stable or not.
    pub max_samples: usize,
    /// Stable: the median moved by at most this fraction of itself over the last round.
    pub stable_within: f64,
    /// Evict the caches before each sample.
    pub flush_cache: bool,
}

impl Default for TimerConfig {
    /// 3 warm-up calls, rounds of 10, at most 100 samples, stable within 1%, caches flushed.
    fn default() -> TimerConfig {
        TimerConfig { warmup: 3, round: 10, max_samples: 100, stable_within: 0.01, flush_cache: true }
    }
}

/// What [`do_bench`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// Every sample in seconds, in the order taken.
    pub samples: Vec<f64>,
}

impl Measurement {
    /// The median sample in seconds: the number to report.
    pub fn median(&self) -> f64 {
        quantile(&self.samples, 0.5)
    }

    /// The 20% and 80% quantiles in seconds, as `do_bench(quantiles=[0.2, 0.8])` gives them: how
    /// far typical samples stray from the median.
    pub fn p20_p80(&self) -> (f64, f64) {
        (quantile(&self.samples, 0.2), quantile(&self.samples, 0.8))
    }
}

// ANCHOR: quantile
/// **Exercise `timer`, part 1.** The `q` quantile of `samples` (`q` clamped to `0.0..=1.0`):
/// sort a copy, then read position `q * (len - 1)`, interpolating linearly between the two
/// samples around it when it falls between them (numpy's and `torch.quantile`'s default). So
/// `q = 0.0` is the fastest sample, `1.0` the slowest, `0.5` the median. NaN for no samples.
///
/// Book: `book/src/phase5/exercises.md`, section "timer". Check: `cargo grader check phase5`.
pub fn quantile(samples: &[f64], q: f64) -> f64 {
    // ANCHOR: solution
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    let fraction = position - low as f64;
    sorted[low] + (sorted[high] - sorted[low]) * fraction
    // ANCHOR_END: solution
}
// ANCHOR_END: quantile

// ANCHOR: is_stable
/// **Exercise `timer`, part 2.** Whether [`do_bench`] may stop after taking `samples`: when it
/// has `config.max_samples` or more; or when it has at least two rounds (`2 * config.round`
/// samples) and the median of all of them differs from the median of all but the last round
/// (`config.round` samples) by at most `config.stable_within` times the median of all.
///
/// Book: `book/src/phase5/exercises.md`, section "timer". Check: `cargo grader check phase5`.
pub fn is_stable(samples: &[f64], config: &TimerConfig) -> bool {
    // ANCHOR: solution
    let n = samples.len();
    if n >= config.max_samples {
        return true;
    }
    if n < 2 * config.round {
        return false;
    }
    let all = quantile(samples, 0.5);
    let before = quantile(&samples[..n - config.round], 0.5);
    (all - before).abs() <= config.stable_within * all
    // ANCHOR_END: solution
}
// ANCHOR_END: is_stable

// ANCHOR: do_bench
/// **Exercise `timer`, part 3.** Time `f` on `device`: call it `config.warmup` times untimed,
/// wait for the device, then take samples in rounds of `config.round` (fewer in a last round
/// that reaches `config.max_samples`) until [`is_stable`] says to stop. One sample is one call
/// of `f`, bracketed by two [`Stamp`]s recorded just before and just after it, after a
/// [`CacheFlush`] when `config.flush_cache` is set. Create a round's stamps before the round (a
/// CUDA event costs host time to create), and read the time between them once the round is
/// done. On a GPU `f` returns before its kernels finish; the stamps are on the device's clock,
/// so they measure the kernels, not the launches.
///
/// Book: `book/src/phase5/exercises.md`, section "timer". Check: `cargo grader check phase5`.
pub fn do_bench(device: Device, config: &TimerConfig, mut f: impl FnMut() -> Result<()>) -> Result<Measurement> {
    // ANCHOR: solution
    for _ in 0..config.warmup {
        f()?;
    }
    device.synchronize()?;
    let mut flush = CacheFlush::new(device);
    let mut samples = Vec::new();
    while !is_stable(&samples, config) {
        let count = config.round.max(1).min(config.max_samples - samples.len());
        let mut stamps =
            (0..count).map(|_| Ok((Stamp::new(device)?, Stamp::new(device)?))).collect::<Result<Vec<_>>>()?;
        for (start, end) in &mut stamps {
            if config.flush_cache {
                flush.run()?;
            }
            start.record()?;
            f()?;
            end.record()?;
        }
        for (start, end) in &stamps {
            samples.push(end.seconds_since(start)?);
        }
    }
    Ok(Measurement { samples })
    // ANCHOR_END: solution
}
// ANCHOR_END: do_bench
