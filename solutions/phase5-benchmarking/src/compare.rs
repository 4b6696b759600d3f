//! Exercise `compare` (deep): whether one function is faster than another, and by how much,
//! decided within a time budget. `torch.utils.benchmark` gives the parts:
//! `Timer.adaptive_autorange` samples until the spread is small or the time is spent, and `Compare`
//! shows measurements side by side; what neither does is decide whether a difference is real or
//! noise, which is this exercise. The judge hands you functions whose cost it knows in secret, as
//! noisy as real code on a real machine.

use std::time::Duration;
// ANCHOR: solution-only
use std::time::Instant;

use engine::bench::Stamp;

use crate::timer::quantile;
// ANCHOR_END: solution-only

use engine::{Device, Result};

/// What [`compare`] decided about `a` against `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `a` takes less time per call than `b`.
    Faster,
    /// `a` takes more time per call than `b`.
    Slower,
    /// No difference as large as the resolution (5%) between them.
    Same,
}

/// The answer of [`compare`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Which of the two is faster, if either.
    pub verdict: Verdict,
    /// `a`'s time per call over `b`'s, once both are warm: 0.5 when `a` takes half as long as `b`,
    /// 1.0 when they take the same time.
    pub ratio: f64,
}

// ANCHOR: solution-only
/// Interleaved pairs of calls timed per round, between two looks at the evidence.
const ROUND: usize = 8;

/// How many standard errors an interval reaches either side of the median: beyond it by
/// chance about once in 15 000 (for normal noise), so that many looks at the evidence are safe.
const Z: f64 = 4.0;

/// The smallest difference that counts, as a ratio's logarithm.
fn resolution() -> f64 {
    1.05f64.ln()
}

/// Seconds `f` keeps the device busy: one call between two stamps, read at once.
fn time_call(device: Device, f: &mut impl FnMut() -> Result<()>) -> Result<f64> {
    let (mut start, mut end) = (Stamp::new(device)?, Stamp::new(device)?);
    start.record()?;
    f()?;
    end.record()?;
    end.seconds_since(&start)
}

/// Whether a function whose calls took `times` runs at its steady speed: its last two calls within
/// a quarter of its fastest, after three calls at least.
fn settled(times: &[f64]) -> bool {
    let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
    times.len() >= 3 && times[times.len() - 2..].iter().all(|&t| t <= 1.25 * fastest)
}

/// Calls `a` and `b` in turns, each until it has [`settled`], or until `until`.
fn warm_up(
    device: Device,
    a: &mut impl FnMut() -> Result<()>,
    b: &mut impl FnMut() -> Result<()>,
    until: Instant,
) -> Result<()> {
    let (mut times_a, mut times_b) = (Vec::new(), Vec::new());
    while Instant::now() < until && !(settled(&times_a) && settled(&times_b)) {
        if !settled(&times_a) {
            times_a.push(time_call(device, a)?);
        }
        if !settled(&times_b) {
            times_b.push(time_call(device, b)?);
        }
    }
    Ok(())
}

/// The median of `logs` (log-ratios), and an interval around it: `Z` standard errors either
/// side, the standard error estimated from the median absolute deviation (which one slow call
/// barely moves, where it would inflate a standard deviation): `1.4826 * MAD` estimates the
/// spread of normal noise, and the median of `n` samples wanders by `1.2533` times that over the
/// square root of `n`.
fn median_and_interval(logs: &[f64]) -> (f64, (f64, f64)) {
    let median = quantile(logs, 0.5);
    let deviations: Vec<f64> = logs.iter().map(|x| (x - median).abs()).collect();
    let error = 1.2533 * 1.4826 * quantile(&deviations, 0.5) / (logs.len() as f64).sqrt();
    (median, (median - Z * error, median + Z * error))
}

/// Whether the evidence in `logs` decides: two rounds of it at least, and the interval around
/// their median wholly beyond half the resolution on one side, or wholly within it.
fn decided(logs: &[f64]) -> bool {
    // Two rounds at least: a burst of load can spoil a whole round.
    if logs.len() < 2 * ROUND {
        return false;
    }
    let (_, (low, high)) = median_and_interval(logs);
    let line = resolution() / 2.0;
    low > line || high < -line || (low > -line && high < line)
}

/// The verdict that `centre` (a log-ratio) gives: beyond half the resolution either way, a
/// difference.
fn verdict_of(centre: f64) -> Verdict {
    let line = resolution() / 2.0;
    if centre > line {
        Verdict::Slower
    } else if centre < -line {
        Verdict::Faster
    } else {
        Verdict::Same
    }
}
// ANCHOR_END: solution-only

// ANCHOR: compare
/// **Exercise `compare` (deep).** Whether `a` is faster than `b`, slower, or the same, and the
/// ratio of their times per call, decided on `device` within `budget`. Call each function as
/// often as you like: each call queues work on `device` (as `engine::bench::spin` does), so time
/// a call between two stamps recorded on `device` (`engine::bench::Stamp`, as `do_bench` does),
/// with no cache flush: the budget is for calls.
///
/// The resolution is 5%: two functions whose steady times differ by 5% or more are different
/// (`Faster` or `Slower`), and two whose times are equal are the `Same`. The two functions are
/// noisy, as real code on a real machine is, and how to see through the noise is yours to work
/// out (experiment in the scratch example, and read the book's section): every call's time varies
/// by a few percent; now and then a call takes several times as long; a function's first few
/// calls may take several times as long too (a compile, a cold cache); and the machine may get
/// faster or slower during the run, by as much as twice by the end of the budget, alike for both
/// functions.
///
/// Judged on 12 pairs drawn from the run's seed, each with its own budget (enough for 100 to 160
/// pairs of calls, one of each, at their steady speed: 0.4 to 2.3 s on a CPU), timed by the judge
/// from outside: 4 pairs of equal cost, 4 that differ by 6 to 10%, 4 that differ 1.5 to 2.5 fold,
/// either way round, the faster function of each pair taking 2 to 4 ms a call once warm (0.5 to
/// 1 ms on a GPU, whose events time exactly). The
/// verdict must be right on every pair; the ratio within 15% of the true one (steady time against
/// steady time, each with the wake-up time the judge measures on this machine); `compare` must
/// return within its budget (10% more is tolerated); and a pair that differs 1.5 fold or more must
/// be decided within 40 calls of each function, warm-up included (when the answer is plain, stop
/// early). Spend the time in the calls: a run that takes more than 1.5 times the work its calls
/// queued is taken for a run on a busy machine, and the pair is run again (twice at most).
///
/// Book: `book/src/phase5/exercises.md`, section "compare". Check: `cargo grader check phase5`.
pub fn compare(
    device: Device,
    budget: Duration,
    mut a: impl FnMut() -> Result<()>,
    mut b: impl FnMut() -> Result<()>,
) -> Result<Comparison> {
    // ANCHOR: solution
    let started = Instant::now();
    let deadline = started + budget;
    // Warm up both, in a quarter of the budget at most.
    warm_up(device, &mut a, &mut b, started + budget / 4)?;
    // Pairs of calls, in turn a-then-b and b-then-a, so that a machine getting slower or faster
    // affects both alike; each pair gives the logarithm of a ratio, and their median resists
    // the odd slow call as a mean does not.
    let mut logs = Vec::new();
    let mut last_round = Duration::ZERO;
    while !decided(&logs) && Instant::now() + last_round.mul_f64(1.5) <= deadline {
        let round_started = Instant::now();
        for _ in 0..ROUND {
            let (ta, tb) = if logs.len() % 2 == 0 {
                let ta = time_call(device, &mut a)?;
                (ta, time_call(device, &mut b)?)
            } else {
                let tb = time_call(device, &mut b)?;
                (time_call(device, &mut a)?, tb)
            };
            logs.push((ta / tb).ln());
        }
        last_round = round_started.elapsed();
    }
    let (centre, _) = median_and_interval(&logs);
    Ok(Comparison { verdict: verdict_of(centre), ratio: centre.exp() })
    // ANCHOR_END: solution
}
// ANCHOR_END: compare
