//! Check of `compare`: pairs of functions whose steady cost per call the judge knows in secret,
//! drawn from the run's seed, each call queueing that much work on the device
//! (`engine::bench::spin`), made as noisy as real code on a real machine: a few percent of jitter
//! on every call, now and then a call several times as long, slow first calls, and a machine that
//! gets faster or slower during the run, alike for both functions. The verdict and the ratio are
//! compared with the secret costs, and the time `compare` took is measured around the call, so
//! nothing `compare` says about time is taken on trust.

use std::cell::Cell;
use std::ops::{Range, RangeInclusive};
use std::time::{Duration, Instant};

use engine::Device;
use engine::bench::{Stamp, spin};
use grader_harness::transcript::is_judging;
use grader_harness::{CheckResult, Context, Failure, Tolerance, draw, record, record_floats};
use proptest::prelude::*;

use super::support::wake_the_gpu;
use crate::subject::compare::{Verdict, compare};

// ANCHOR: judged
/// Pairs of each kind (equal, close, far) judged in one run.
const PAIRS_PER_KIND: usize = 4;
/// How many times as long the slower function of a close pair takes as the faster.
const CLOSE: Range<f64> = 1.06..1.10;
/// How many times as long the slower function of a far pair takes as the faster.
const FAR: Range<f64> = 1.5..2.5;
/// The faster function's steady cost per call, in milliseconds, on a CPU and on a GPU. A GPU's
/// event timing is exact to microseconds, so its calls are shorter: the check holds a shared GPU
/// (see the instructor guide's lab section) a quarter as long.
const STEADY_MS: Range<f64> = 2.0..4.0;
const STEADY_MS_ON_A_GPU: Range<f64> = 0.5..1.0;
/// A pair's budget, in pairs of steady calls (one call of each function).
const BUDGET_PAIRS: RangeInclusive<u32> = 100..=160;
/// How far the machine drifts over a pair's budget, either way, on a log scale (0.7: twice as
/// slow, or as fast, by the end of the budget; no further after it).
const DRIFT: Range<f64> = 0.4..0.7;
/// Every call's jitter: up to this fraction either way.
const JITTER: f64 = 0.03;
/// The share of a function's calls that take several times as long, and how many times.
const ODD_CALLS: Range<f64> = 0.03..0.08;
const ODD_BY: Range<f64> = 3.0..8.0;
/// How many first calls of a function are slow, and how many times as long they take.
const SLOW_CALLS: RangeInclusive<usize> = 0..=3;
const SLOW_BY: Range<f64> = 3.0..6.0;
/// How far a reported ratio may be from the true one, as a fraction of it.
const RATIO_WITHIN: f64 = 0.15;
/// How far past its budget `compare` may return, as a fraction of it.
const OVERRUN: f64 = 0.10;
/// A run of `compare` that takes longer than this many times the work it queued was on a machine
/// too busy to judge it (other processes kept it from running): the pair is run again, twice at
/// most.
const BUSY: f64 = 1.5;
const RETRIES: usize = 2;
/// A far pair must be decided within this many calls of each function, warm-up included.
const FAR_CALLS: usize = 40;
// ANCHOR_END: judged

/// What a pair of functions is, as the stub describes the judged pairs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Exactly the same steady cost.
    Equal,
    /// 6 to 10% apart.
    Close,
    /// 1.5 to 2.5 fold apart.
    Far,
}

/// The noise on one call: a jitter factor, and a factor for the odd call that takes several
/// times as long (1 for the others).
type Noise = (f64, f64);

/// How long each call of one function takes, in the judge's secret.
#[derive(Clone, Debug)]
struct Function {
    /// Seconds per call, once warm, before noise and drift.
    steady: f64,
    /// How many first calls are slow, and by what factor.
    slow_calls: usize,
    slow_by: f64,
    /// The noise of its calls in turn (repeated past the end).
    noise: Vec<Noise>,
}

impl Function {
    /// Seconds of work the `i`-th call queues, `elapsed` seconds after the pair's first call of
    /// either function, on a machine that has drifted by `drift` (on a log scale) at the end of the
    /// `budget` seconds.
    fn cost(&self, i: usize, elapsed: f64, drift: f64, budget: f64) -> f64 {
        let (jitter, outlier) = self.noise[i % self.noise.len()];
        let slow = if i < self.slow_calls { self.slow_by } else { 1.0 };
        self.steady * jitter * outlier * slow * (drift * (elapsed / budget).min(1.0)).exp()
    }
}

/// One judged pair.
#[derive(Clone, Debug)]
struct Pair {
    kind: Kind,
    a: Function,
    b: Function,
    /// The machine's drift over the budget, on a log scale (both functions alike).
    drift: f64,
    budget: Duration,
}

impl Pair {
    /// `a`'s steady time over `b`'s: what `compare` should report.
    fn ratio(&self) -> f64 {
        self.a.steady / self.b.steady
    }

    /// `a`'s time over `b`'s as a timer on this machine sees them: each with `latency`, the time
    /// the device takes to report work done (see [`latency`]).
    fn ratio_seen(&self, latency: f64) -> f64 {
        (self.a.steady + latency) / (self.b.steady + latency)
    }

    fn verdict(&self) -> Verdict {
        match self.kind {
            Kind::Equal => Verdict::Same,
            _ if self.ratio() < 1.0 => Verdict::Faster,
            _ => Verdict::Slower,
        }
    }

    fn describe(&self) -> String {
        format!(
            "a takes {:.3} ms a call once warm, b {:.3} ms (a/b = {:.3}), budget {:.0} ms",
            self.a.steady * 1e3,
            self.b.steady * 1e3,
            self.ratio(),
            self.budget.as_secs_f64() * 1e3
        )
    }
}

/// One function's first calls and noise, as [`SLOW_CALLS`], [`JITTER`] and [`ODD_CALLS`] say.
fn function(steady: f64) -> impl Strategy<Value = Function> {
    (SLOW_CALLS, SLOW_BY, ODD_CALLS).prop_flat_map(move |(slow_calls, slow_by, chance)| {
        let noise = (1.0 - JITTER..1.0 + JITTER, prop::bool::weighted(chance), ODD_BY)
            .prop_map(|(jitter, odd, by)| (jitter, if odd { by } else { 1.0 }));
        prop::collection::vec(noise, 512).prop_map(move |noise| Function { steady, slow_calls, slow_by, noise })
    })
}

/// A pair of `kind` on `device`: the cheaper function [`STEADY_MS`] a call ([`STEADY_MS_ON_A_GPU`]
/// on a GPU), the other as `kind` says, either way round; a [`DRIFT`] either way; a budget of
/// [`BUDGET_PAIRS`] pairs of steady calls.
fn pair(kind: Kind, device: Device) -> impl Strategy<Value = Pair> {
    let factor = match kind {
        Kind::Equal => Just(1.0).boxed(),
        Kind::Close => CLOSE.boxed(),
        Kind::Far => FAR.boxed(),
    };
    let steady_ms = if device == Device::Cpu { STEADY_MS } else { STEADY_MS_ON_A_GPU };
    let cheaper = (steady_ms.start * 1e-3)..(steady_ms.end * 1e-3);
    (cheaper, factor, any::<bool>(), DRIFT, any::<bool>(), BUDGET_PAIRS).prop_flat_map(
        move |(cheaper, factor, a_slower, drift, faster_machine, pairs)| {
            let (a, b) = if a_slower { (cheaper * factor, cheaper) } else { (cheaper, cheaper * factor) };
            let drift = if faster_machine { -drift } else { drift };
            let budget = Duration::from_secs_f64(f64::from(pairs) * (a + b));
            (function(a), function(b)).prop_map(move |(a, b)| Pair { kind, a, b, drift, budget })
        },
    )
}

/// The judged pairs on `device`, [`PAIRS_PER_KIND`] of each kind, in an order drawn from the seed.
fn pairs(ctx: &Context, device: Device) -> Vec<Pair> {
    let kinds = [Kind::Equal, Kind::Close, Kind::Far].repeat(PAIRS_PER_KIND);
    let order = draw(ctx, 0, Just(kinds).prop_shuffle());
    order.into_iter().enumerate().map(|(k, kind)| draw(ctx, 1 + k as u64, pair(kind, device))).collect()
}

/// What `compare` answered for one pair, and what the judge saw of it.
struct Answer {
    verdict: Verdict,
    ratio: f64,
    took: Duration,
    calls: (usize, usize),
    /// The work its calls queued, in the judge's secret.
    work: Duration,
    /// The device's latency in reporting work done, measured by the judge around the run.
    latency: f64,
}

/// Pushes to `extra` the time, for each of a few calls of `spin` of `seconds`, that the device
/// takes beyond the work itself to report it done: on the CPU a sleeping thread's wake-up (a tenth of a millisecond
/// on a quiet machine, a millisecond or more on a loaded one), on a GPU an event's few
/// microseconds. Every sample of a call includes it, so a ratio of two costs is seen through it.
fn latency(device: Device, seconds: f64, extra: &mut Vec<f64>) -> Result<(), Failure> {
    for _ in 0..11 {
        let (mut start, mut end) = (Stamp::new(device)?, Stamp::new(device)?);
        start.record()?;
        spin(device, Duration::from_secs_f64(seconds))?;
        end.record()?;
        extra.push(end.seconds_since(&start)? - seconds);
    }
    Ok(())
}

/// Runs the subject's `compare` on `pair`, the work of every call queued from the judge's secret.
fn run(device: Device, pair: &Pair) -> Result<Answer, Failure> {
    let first_call: Cell<Option<Instant>> = Cell::new(None);
    let calls = (Cell::new(0usize), Cell::new(0usize));
    let work = Cell::new(0.0);
    let call = |function: &Function, count: &Cell<usize>| {
        let i = count.get();
        count.set(i + 1);
        let since = first_call.get().unwrap_or_else(|| {
            let now = Instant::now();
            first_call.set(Some(now));
            now
        });
        let cost = function.cost(i, since.elapsed().as_secs_f64(), pair.drift, pair.budget.as_secs_f64());
        work.set(work.get() + cost);
        spin(device, Duration::from_secs_f64(cost))
    };
    let (answer, took) = grader_harness::timed(|| {
        let started = Instant::now();
        let answer = compare(device, pair.budget, || call(&pair.a, &calls.0), || call(&pair.b, &calls.1));
        // The work still queued is part of the time `compare` took.
        let waited = device.synchronize();
        (answer.and_then(|a| waited.map(|()| a)), started.elapsed())
    });
    let answer = answer?;
    Ok(Answer {
        verdict: answer.verdict,
        ratio: answer.ratio,
        took,
        calls: (calls.0.get(), calls.1.get()),
        work: Duration::from_secs_f64(work.get()),
        latency: 0.0,
    })
}

/// [`run`], again while the machine is too busy to judge it (see [`BUSY`]).
fn run_on_a_quiet_machine(device: Device, k: usize, pair: &Pair) -> Result<Answer, Failure> {
    let mut tries = Vec::new();
    for _ in 0..=RETRIES {
        // The device's latency, probed before and after the run (the median of both), all while
        // the grader holds the GPU's lock.
        let (mut extra, probe) = (Vec::new(), pair.a.steady.min(pair.b.steady));
        let mut answer = grader_harness::timed(|| {
            latency(device, probe, &mut extra)?;
            let answer = run(device, pair)?;
            latency(device, probe, &mut extra)?;
            Ok::<_, Failure>(answer)
        })?;
        extra.sort_by(f64::total_cmp);
        answer.latency = extra[extra.len() / 2].max(0.0);
        // A few milliseconds for a run that queues hardly any work.
        if answer.took.as_secs_f64() <= BUSY * answer.work.as_secs_f64() + 5e-3 {
            return Ok(answer);
        }
        tries.push(format!("{:.0} ms for {:.0} ms", answer.took.as_secs_f64() * 1e3, answer.work.as_secs_f64() * 1e3));
    }
    Err(Failure::Setup(format!(
        "pair {k}: compare took {} of work queued by its calls: more than {BUSY} times as long, {} times. Either the \
         machine is too busy to time calls of a few milliseconds (run the check again when it is quieter), or your \
         compare spends much of its time outside the calls it times",
        tries.join(", then "),
        RETRIES + 1
    )))
}

/// What the judge records for each pair instead of running the reference's `compare`: the true
/// verdict, the true ratio as this machine shows it (each cost plus the latency it measures), and
/// the budget and the early decision kept. So a learner's answers are judged against the secret
/// costs themselves, not against another noisy measurement, and the judge holds a shared GPU only
/// for its latency probes. The ratio is recorded within the allowed error, which the judge
/// doubles, as it did between two runs of `compare`: the subject's own run has held its ratio to
/// the allowed error already, against the latency it measured itself.
fn record_the_truth(device: Device, pairs: &[Pair]) -> CheckResult {
    for (k, pair) in pairs.iter().enumerate() {
        let mut extra = Vec::new();
        let probe = pair.a.steady.min(pair.b.steady);
        latency(device, probe, &mut extra)?;
        extra.sort_by(f64::total_cmp);
        let seen = pair.ratio_seen(extra[extra.len() / 2].max(0.0));
        record(format!("pair {k}: the verdict"), format!("{:?}", pair.verdict()));
        let within = (1.0 + RATIO_WITHIN).log2() as f32;
        record_floats(format!("pair {k}: log2 of the ratio"), &[seen.log2() as f32], Tolerance { abs: within, rel: 0.0 });
        record(format!("pair {k}: within the budget"), true);
        if pair.kind == Kind::Far {
            record(format!("pair {k}: decided early"), true);
        }
    }
    Ok(format!("the true verdicts and ratios of {} pairs", pairs.len()))
}

/// `compare` on pairs of functions of secret cost, drawn from the seed: its verdict is right on
/// every pair, its ratio within [`RATIO_WITHIN`] of the true one, it returns within its budget
/// (and [`OVERRUN`]), and it decides a far pair within [`FAR_CALLS`] calls of each function. The
/// judge compares these answers with the truth ([`record_the_truth`]).
pub fn verdicts_match_secret_costs(ctx: &Context) -> CheckResult {
    let device = Device::cuda_if_available();
    // The spin kernel is compiled before anything is timed.
    spin(device, Duration::from_micros(1))?;
    let pairs = pairs(ctx, device);
    // One hold of the GPU's lock for every pair, the clock's wake-up first: each hold waits for the
    // runners already on the GPU, so one is cheaper for a lab than one per pair.
    grader_harness::timed(|| {
        wake_the_gpu(device)?;
        if is_judging() { record_the_truth(device, &pairs) } else { judge_pairs(device, &pairs) }
    })
}

/// Runs the subject's `compare` on every pair and judges each answer against the secret costs.
fn judge_pairs(device: Device, pairs: &[Pair]) -> CheckResult {
    let mut total = Duration::ZERO;
    for (k, pair) in pairs.iter().enumerate() {
        let answer = run_on_a_quiet_machine(device, k, pair)?;
        total += answer.took;
        let on = format!("pair {k} ({})", pair.describe());
        let said = format!(
            "you said {:?} with a ratio of {:.3}, after {} calls of a and {} of b in {:.0} ms",
            answer.verdict,
            answer.ratio,
            answer.calls.0,
            answer.calls.1,
            answer.took.as_secs_f64() * 1e3
        );
        record(format!("pair {k}: the verdict"), format!("{:?}", answer.verdict));
        if answer.verdict != pair.verdict() {
            let expected = match pair.kind {
                Kind::Equal => "they take the same time: Same".to_string(),
                _ => format!(
                    "they differ by {:.0}%: {:?}",
                    (pair.ratio().max(1.0 / pair.ratio()) - 1.0) * 100.0,
                    pair.verdict()
                ),
            };
            return Err(Failure::fail(format!("{on}: {said}, but {expected}")));
        }
        if !(answer.ratio.is_finite() && answer.ratio > 0.0) {
            record(format!("pair {k}: log2 of the ratio"), "not a positive number");
            return Err(Failure::fail(format!("{on}: {said}; a ratio of times is a positive number")));
        }
        // Recorded as a `log2`, within the log of the allowed factor: the judge allows twice that
        // between yours and the reference's.
        let (log2, within) = (answer.ratio.log2() as f32, (1.0 + RATIO_WITHIN).log2() as f32);
        record_floats(format!("pair {k}: log2 of the ratio"), &[log2], Tolerance { abs: within, rel: 0.0 });
        let seen = pair.ratio_seen(answer.latency);
        if (log2 - seen.log2() as f32).abs() > within {
            return Err(Failure::fail(format!(
                "{on}: {said}, but the true ratio (a's time over b's once warm, each with the {:.3} ms this machine \
                 takes to report work done) is {seen:.3}: yours must be within {:.0}% of it",
                answer.latency * 1e3,
                RATIO_WITHIN * 100.0
            )));
        }
        let allowed = pair.budget.mul_f64(1.0 + OVERRUN);
        let within = answer.took <= allowed;
        record(format!("pair {k}: within the budget"), within);
        if !within {
            return Err(Failure::fail(format!(
                "{on}: {said}; that is over the budget (the judge allows {:.0} ms)",
                allowed.as_secs_f64() * 1e3
            )));
        }
        if pair.kind == Kind::Far {
            // Counted, not timed, so that a loaded machine's slow calls do not count against you.
            let early = answer.calls.0 <= FAR_CALLS && answer.calls.1 <= FAR_CALLS;
            record(format!("pair {k}: decided early"), early);
            if !early {
                return Err(Failure::fail(format!(
                    "{on}: {said}; a difference of {} fold or more should be plain long before the budget is spent: \
                     decide it within {FAR_CALLS} calls of each function, warm-up included",
                    FAR.start
                )));
            }
        }
    }
    Ok(format!(
        "compare decided {} pairs of secret cost on {device} rightly, each within its budget ({:.1} s in all)",
        pairs.len(),
        total.as_secs_f64()
    ))
}
