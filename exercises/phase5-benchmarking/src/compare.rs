//! Exercise `compare` (deep): whether one function is faster than another, and by how much,
//! decided within a time budget. `torch.utils.benchmark` gives the parts:
//! `Timer.adaptive_autorange` samples until the spread is small or the time is spent, and `Compare`
//! shows measurements side by side; what neither does is decide whether a difference is real or
//! noise, which is this exercise. The judge hands you functions whose cost it knows in secret, as
//! noisy as real code on a real machine.

use std::time::Duration;

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
    todo!()
}
// ANCHOR_END: compare
