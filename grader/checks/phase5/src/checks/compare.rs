//! Check of `compare`: pairs of functions whose steady cost per call the judge knows in secret,
//! drawn from the run's seed, each call queueing that much work on the device
//! (`engine::bench::spin`), made as noisy as real code on a real machine: a few percent of jitter
//! on every call, now and then a call several times as long, slow first calls, and a machine that
//! gets faster or slower during the run, alike for both functions. The verdict and the ratio are
//! compared with the secret costs, and the time `compare` took is measured around the call, so
//! nothing `compare` says about time is taken on trust.

use std::cell::Cell;
use std::time::{Duration, Instant};

use engine::Device;
use engine::bench::spin;
use grader_harness::{CheckResult, Context, Failure, Tolerance, draw, record, record_floats};
use proptest::prelude::*;

use super::support::wake_the_gpu;
use crate::subject::compare::{Verdict, compare};

/// How far a reported ratio may be from the true one (10%), as a `log2`: the judge allows twice
/// this between the learner's and the reference's.
const RATIO_WITHIN: f32 = 0.1375;

/// `compare` may overrun its budget by this fraction (a last call, a slow wake-up).
const OVERRUN: f64 = 0.1;

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
    /// either function, on a machine drifting by `drift` (a rate per second, on a log scale).
    fn cost(&self, i: usize, elapsed: f64, drift: f64) -> f64 {
        let (jitter, outlier) = self.noise[i % self.noise.len()];
        let slow = if i < self.slow_calls { self.slow_by } else { 1.0 };
        self.steady * jitter * outlier * slow * (drift * elapsed).exp()
    }
}

/// One judged pair.
#[derive(Clone, Debug)]
struct Pair {
    kind: Kind,
    a: Function,
    b: Function,
    /// The machine's drift, a rate per second on a log scale (both functions alike).
    drift: f64,
    budget: Duration,
}

impl Pair {
    /// `a`'s steady time over `b`'s: what `compare` should report.
    fn ratio(&self) -> f64 {
        self.a.steady / self.b.steady
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

/// One function's first calls and noise: 0 to 3 slow first calls, 3 to 6 times as long; a jitter
/// of up to 3% either way on every call; 3 to 8% of its calls 3 to 8 times as long.
fn function(steady: f64) -> impl Strategy<Value = Function> {
    (0usize..=3, 3.0f64..6.0, 0.03f64..0.08).prop_flat_map(move |(slow_calls, slow_by, chance)| {
        let noise = (0.97f64..1.03, prop::bool::weighted(chance), 3.0f64..8.0)
            .prop_map(|(jitter, odd, by)| (jitter, if odd { by } else { 1.0 }));
        prop::collection::vec(noise, 512).prop_map(move |noise| Function { steady, slow_calls, slow_by, noise })
    })
}

/// A pair of `kind`: the cheaper function 1 to 2 ms a call, the other as `kind` says, either way
/// round; a drift of 0.5 to 0.9 per second either way; a budget of 100 to 160 pairs of steady
/// calls.
fn pair(kind: Kind) -> impl Strategy<Value = Pair> {
    let factor = match kind {
        Kind::Equal => Just(1.0).boxed(),
        Kind::Close => (1.06f64..1.10).boxed(),
        Kind::Far => (1.5f64..2.5).boxed(),
    };
    (1e-3f64..2e-3, factor, any::<bool>(), 0.5f64..0.9, any::<bool>(), 100u32..=160).prop_flat_map(
        move |(cheaper, factor, a_slower, drift, faster_machine, pairs)| {
            let (a, b) = if a_slower { (cheaper * factor, cheaper) } else { (cheaper, cheaper * factor) };
            let drift = if faster_machine { -drift } else { drift };
            let budget = Duration::from_secs_f64(f64::from(pairs) * (a + b));
            (function(a), function(b)).prop_map(move |(a, b)| Pair { kind, a, b, drift, budget })
        },
    )
}

/// The 12 judged pairs, 4 of each kind, in an order drawn from the seed.
fn pairs(ctx: &Context) -> Vec<Pair> {
    let kinds = [Kind::Equal, Kind::Close, Kind::Far].repeat(4);
    let order = draw(ctx, 0, Just(kinds).prop_shuffle());
    order.into_iter().enumerate().map(|(k, kind)| draw(ctx, 1 + k as u64, pair(kind))).collect()
}

/// What `compare` answered for one pair, and what the judge saw of it.
struct Answer {
    verdict: Verdict,
    ratio: f64,
    took: Duration,
    calls: (usize, usize),
}

/// Runs the subject's `compare` on `pair`, the work of every call queued from the judge's secret.
fn run(device: Device, pair: &Pair) -> Result<Answer, Failure> {
    let first_call: Cell<Option<Instant>> = Cell::new(None);
    let calls = (Cell::new(0usize), Cell::new(0usize));
    let call = |function: &Function, count: &Cell<usize>| {
        let i = count.get();
        count.set(i + 1);
        let since = first_call.get().unwrap_or_else(|| {
            let now = Instant::now();
            first_call.set(Some(now));
            now
        });
        let elapsed = since.elapsed().as_secs_f64();
        spin(device, Duration::from_secs_f64(function.cost(i, elapsed, pair.drift)))
    };
    let (answer, took) = grader_harness::timed(|| {
        let started = Instant::now();
        let answer = compare(device, pair.budget, || call(&pair.a, &calls.0), || call(&pair.b, &calls.1));
        // The work still queued is part of the time `compare` took.
        let waited = device.synchronize();
        (answer.and_then(|a| waited.map(|()| a)), started.elapsed())
    });
    let answer = answer?;
    Ok(Answer { verdict: answer.verdict, ratio: answer.ratio, took, calls: (calls.0.get(), calls.1.get()) })
}

/// `compare` on 12 pairs of functions of secret cost, drawn from the seed: its verdict is right on
/// every pair, its ratio within 10% of the true one, it returns within its budget, and it decides
/// a pair 1.5 fold apart or more within half its budget.
pub fn verdicts_match_secret_costs(ctx: &Context) -> CheckResult {
    let device = Device::cuda_if_available();
    // The spin kernel is compiled and the GPU's clock raised before anything is timed.
    spin(device, Duration::from_micros(1))?;
    wake_the_gpu(device)?;
    let pairs = pairs(ctx);
    let mut total = Duration::ZERO;
    for (k, pair) in pairs.iter().enumerate() {
        let answer = run(device, pair)?;
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
        let log2 = answer.ratio.log2() as f32;
        record_floats(format!("pair {k}: log2 of the ratio"), &[log2], Tolerance { abs: RATIO_WITHIN, rel: 0.0 });
        if (log2 - pair.ratio().log2() as f32).abs() > RATIO_WITHIN {
            return Err(Failure::fail(format!(
                "{on}: {said}, but the true ratio (a's time over b's, once warm) is {:.3}: yours must be within 10% of it",
                pair.ratio()
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
            let early = answer.took <= pair.budget / 2;
            record(format!("pair {k}: decided within half the budget"), early);
            if !early {
                return Err(Failure::fail(format!(
                    "{on}: {said}; a difference of 1.5 fold or more should be plain long before the budget is spent: \
                     decide it within half the budget"
                )));
            }
        }
    }
    Ok(format!(
        "compare decided 12 pairs of secret cost on {device} rightly, each within its budget ({:.1} s in all)",
        total.as_secs_f64()
    ))
}
