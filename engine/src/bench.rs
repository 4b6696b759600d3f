//! Timing, the analogue of `triton.testing.do_bench`: the one timer that the grader's speed checks
//! and the benchmark commands use.
//!
//! A [`Bench`] runs a closure a few times to warm up (module loads, compilation, allocator pools),
//! then times it `samples` times and keeps every sample, so that a result is a median with its
//! spread rather than one lucky number. On a GPU each sample is bracketed by CUDA events recorded
//! on the device's stream (the GPU's own clock, free of launch jitter), and a read of twice the L2
//! cache before each sample keeps one sample's inputs from warming the next. On the CPU the
//! same API reads a monotonic clock.
//!
//! ```
//! use engine::{bench::Bench, Device, Tensor};
//! let x = Tensor::randn(&[1 << 12], 0);
//! let timing = Bench::new(Device::Cpu).samples(5).run(|| x.exp().map(drop))?;
//! assert!(timing.median() > 0.0 && timing.min() <= timing.median());
//! # Ok::<(), engine::Error>(())
//! ```

pub mod baseline;
mod clock;
mod spin;
mod wake;

pub use clock::{CacheFlush, Stamp};
pub use spin::spin;
pub use wake::{Wake, wake};

use std::time::{Duration, Instant};

use crate::device::Device;
use crate::error::Result;

/// How to time: device, warm-up runs, timed samples, cache flushing.
#[derive(Clone, Copy, Debug)]
pub struct Bench {
    device: Device,
    warmup: usize,
    samples: usize,
    flush_cache: bool,
}

impl Bench {
    /// 3 warm-up runs and 25 samples on `device`, flushing the cache before each sample.
    pub fn new(device: Device) -> Bench {
        Bench { device, warmup: 3, samples: 25, flush_cache: true }
    }

    /// Runs before timing starts.
    pub fn warmup(mut self, runs: usize) -> Bench {
        self.warmup = runs;
        self
    }

    /// Timed runs (at least 1).
    pub fn samples(mut self, samples: usize) -> Bench {
        self.samples = samples.max(1);
        self
    }

    /// Whether to evict the last-level cache before each sample (on by default). Turn it off to
    /// time a working set that really stays cached between calls.
    pub fn flush_cache(mut self, flush: bool) -> Bench {
        self.flush_cache = flush;
        self
    }

    /// Times `f`, which queues the work to time (for a GPU it need not wait for it).
    pub fn run(&self, mut f: impl FnMut() -> Result<()>) -> Result<Timing> {
        let mut timings = self.run_interleaved(&mut [&mut f])?;
        Ok(timings.pop().expect("one closure, one timing"))
    }

    /// Times several closures taking turns (`a b c a b c ...`), so that clock changes and
    /// background load during the run affect all of them alike: the fair way to compare two
    /// versions of the same work. Returns one timing per closure, in order.
    pub fn run_interleaved(&self, fs: &mut [&mut dyn FnMut() -> Result<()>]) -> Result<Vec<Timing>> {
        crate::wires::trip(crate::wires::Wire::Bench);
        for _ in 0..self.warmup {
            for f in fs.iter_mut() {
                f()?;
            }
        }
        self.device.synchronize()?;
        // Every stamp is created before timing starts: creating a CUDA event costs host time.
        let mut stamps: Vec<Vec<(Stamp, Stamp)>> = Vec::with_capacity(fs.len());
        for _ in 0..fs.len() {
            stamps.push(
                (0..self.samples)
                    .map(|_| Ok((Stamp::new(self.device)?, Stamp::new(self.device)?)))
                    .collect::<Result<_>>()?,
            );
        }
        let mut flush = CacheFlush::new(self.device);
        for sample in 0..self.samples {
            for (f, stamps) in fs.iter_mut().zip(&mut stamps) {
                if self.flush_cache {
                    flush.run()?;
                }
                let (start, end) = &mut stamps[sample];
                start.record()?;
                f()?;
                end.record()?;
            }
        }
        self.device.synchronize()?;
        stamps
            .iter()
            .map(|pairs| {
                Ok(Timing::new(pairs.iter().map(|(start, end)| end.seconds_since(start)).collect::<Result<_>>()?))
            })
            .collect()
    }
}

/// The samples of one timed closure, in seconds, sorted.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    samples: Vec<f64>,
}

impl Timing {
    /// A timing from samples in seconds (at least one).
    pub fn new(mut samples: Vec<f64>) -> Timing {
        crate::wires::trip(crate::wires::Wire::Timing);
        assert!(!samples.is_empty(), "a timing needs at least one sample");
        samples.sort_by(f64::total_cmp);
        Timing { samples }
    }

    /// Every sample in seconds, fastest first.
    pub fn samples(&self) -> &[f64] {
        &self.samples
    }

    /// The `q` quantile (0.0 = fastest, 1.0 = slowest), interpolating between samples.
    pub fn quantile(&self, q: f64) -> f64 {
        let position = q.clamp(0.0, 1.0) * (self.samples.len() - 1) as f64;
        let (low, high) = (position.floor() as usize, position.ceil() as usize);
        let fraction = position - low as f64;
        self.samples[low] * (1.0 - fraction) + self.samples[high] * fraction
    }

    /// The median in seconds: the number to report.
    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }

    /// The fastest sample in seconds.
    pub fn min(&self) -> f64 {
        self.samples[0]
    }

    /// The slowest sample in seconds.
    pub fn max(&self) -> f64 {
        self.samples[self.samples.len() - 1]
    }

    /// The interquartile range over the median: how far apart typical samples are, as a
    /// fraction. Two versions whose medians differ by less than this are not distinguishable.
    pub fn spread(&self) -> f64 {
        (self.quantile(0.75) - self.quantile(0.25)) / self.median()
    }
}

/// Runs `f` once and returns its result with the wall-clock time it took, waiting for `device`
/// before starting and before stopping the clock: the measure of a first call, whose cost is
/// mostly on the host (tracing, compiling, loading), where events would miss it.
#[track_caller]
pub fn time_once<T>(device: Device, f: impl FnOnce() -> Result<T>) -> Result<(T, Duration)> {
    crate::wires::trip(crate::wires::Wire::TimeOnce);
    device.synchronize()?;
    let start = Instant::now();
    let value = f()?;
    device.synchronize()?;
    Ok((value, start.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_sorted_samples() {
        let t = Timing::new(vec![4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!((t.min(), t.median(), t.max()), (1.0, 3.0, 5.0));
        assert_eq!(t.quantile(0.25), 2.0);
        assert!((t.spread() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(Timing::new(vec![1.0, 2.0]).median(), 1.5);
    }

    #[test]
    fn a_timing_covers_the_work_it_times() {
        // On a GPU the spin is a kernel, so this proves the events bracket the device's work.
        let device = Device::cuda_if_available();
        let bench = Bench::new(device).warmup(1).samples(3).flush_cache(false);
        let timing = bench.run(|| spin(device, Duration::from_millis(2))).unwrap();
        assert!(timing.min() >= 0.002, "{device}: {:?}", timing.samples());
        let ((), once) = time_once(device, || spin(device, Duration::from_millis(2))).unwrap();
        assert!(once >= Duration::from_millis(2), "{device}: {once:?}");
    }

    #[test]
    fn the_cpu_has_no_clock_to_wake() {
        assert_eq!(wake(Device::Cpu, Duration::from_millis(300)).unwrap(), None);
    }

    #[test]
    fn interleaved_runs_time_each_closure() {
        let (mut a_runs, mut b_runs) = (0, 0);
        let mut a = || {
            a_runs += 1;
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        };
        let mut b = || {
            b_runs += 1;
            Ok(())
        };
        let bench = Bench::new(Device::Cpu).warmup(1).samples(3).flush_cache(false);
        let timings = bench.run_interleaved(&mut [&mut a, &mut b]).unwrap();
        assert_eq!((a_runs, b_runs), (4, 4));
        assert!(timings[0].min() >= 0.002 && timings[1].median() < timings[0].median());
    }
}
