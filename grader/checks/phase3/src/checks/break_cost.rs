//! Checks of `break_cost`. The grader never trusts reported speed: it hands the learner's
//! function versions whose cost it knows (device work at the break, of a duration drawn in secret
//! from the run's seed, which the learner's process is not given) and whose calls it counts and
//! orders.

use std::cell::RefCell;
use std::time::Duration;

use engine::bench::spin;
use engine::{Device, Result, Tensor, dynamo};
use grader_harness::{CheckResult, Context, Tolerance, ensure, record, record_floats, secret_duration};

use crate::subject::{example_input, layered, measure_break_cost};

/// The graph counts are those `explain` finds, for numbers of layers and breaks drawn from the
/// seed.
pub fn counts_the_graphs(ctx: &Context) -> CheckResult {
    let x = example_input(2, ctx.seed);
    let (layers, breaks) = (6 + (ctx.seed % 11) as usize, 1 + ((ctx.seed / 11) % 4) as usize);
    let cost = measure_break_cost(|x| layered(&x, layers, 0), |x| layered(&x, layers, breaks), &x, 3)?;
    let expected = dynamo::explain(|x: Tensor| layered(&x, layers, breaks)).call(&x)?.graph_count();
    record(
        format!("graphs whole and split ({layers} layers, {breaks} breaks asked)"),
        format!("{} {}", cost.graphs_whole, cost.graphs_split),
    );
    ensure(cost.graphs_whole == 1 && cost.graphs_split == expected, || {
        format!(
            "for {layers} layers with 0 and {breaks} breaks you counted {} and {} graphs; expected 1 and {expected}",
            cost.graphs_whole, cost.graphs_split
        )
    })?;
    Ok(format!("1 graph whole, {expected} graphs with {layers} layers and {breaks} breaks asked"))
}

/// How far a median may run past the sleep in each call it timed: tracing, guards, the compiled
/// kernels and the graph break itself, in the grader's debug build on a busy machine.
const SLACK_FACTOR: f64 = 2.0;
const SLACK: Duration = Duration::from_millis(60);

/// Calls timed of each version.
const CALLS: usize = 9;

// ANCHOR: secret_times
/// The range the split version's wait at its break is drawn from, in secret, for each round.
const BREAK_WAIT: (Duration, Duration) = (Duration::from_millis(40), Duration::from_millis(640));
/// The range the whole version's own busy time is drawn from, in secret, for each round.
const WHOLE_WORK: (Duration, Duration) = (Duration::from_millis(4), Duration::from_millis(16));
// ANCHOR_END: secret_times

/// With a split version that keeps the device busy at its break for a duration drawn in secret
/// from the seed ([`BREAK_WAIT`], twice over; `engine::bench::spin`, which on the CPU queues that
/// busy time as a GPU kernel would run it, so only a read of the output waits for it), the split
/// median covers that time and exceeds it by no more than a call's own cost. The whole version
/// keeps the device busy for a shorter secret time ([`WHOLE_WORK`]), so its median covers that time
/// and stays below the split one's wait; it is also compared with the judge's own measurement of
/// the same work, which that known busy time keeps steady on a loaded machine (a median of a few
/// microseconds of work alone differed eightfold between two processes in CI). The check watches
/// the calls from outside: each version is called `calls + 2` times (under `explain`, to warm up,
/// then timed), and once both are warm their calls alternate.
pub fn times_are_medians_of_real_calls(ctx: &Context) -> CheckResult {
    let mut summary = Vec::new();
    for round in 0..2 {
        let delay = secret_duration(ctx, "break", round, BREAK_WAIT.0, BREAK_WAIT.1);
        let whole_work = secret_duration(ctx, "whole", round, WHOLE_WORK.0, WHOLE_WORK.1);
        summary.push(one_round(ctx, round, delay, whole_work)?);
    }
    Ok(summary.join("; "))
}

/// Whether the last `2 * (calls + 1)` calls of `order` (the warm-up calls and the timed ones)
/// alternate between the two versions.
fn interleaved(order: &[char], calls: usize) -> bool {
    let tail = &order[order.len().saturating_sub(2 * (calls + 1))..];
    tail.len() == 2 * (calls + 1) && tail.windows(2).all(|w| w[0] != w[1])
}

fn one_round(ctx: &Context, round: u64, delay: Duration, whole_work: Duration) -> Result<String, grader_harness::Failure> {
    // Every call of either version, in order: `w` for the whole one, `s` for the split one.
    let order = RefCell::new(Vec::new());
    let whole = |x: Tensor| -> Result<Tensor> {
        order.borrow_mut().push('w');
        spin(Device::Cpu, whole_work)?;
        x.tanh()?.mul(2.0)
    };
    let split = |x: Tensor| -> Result<Tensor> {
        order.borrow_mut().push('s');
        let h = x.tanh()?;
        dynamo::graph_break()?;
        spin(Device::Cpu, delay)?;
        h.mul(2.0)
    };
    let cost = measure_break_cost(whole, split, &example_input(2, ctx.seed + round), CALLS)?;
    let order = order.into_inner();
    let count = |c: char| order.iter().filter(|&&o| o == c).count();
    let (w, s) = (count('w'), count('s'));
    let counted = w == CALLS + 2 && s == CALLS + 2;
    let alternating = interleaved(&order, CALLS);
    let split_ok = cost.split >= delay && cost.split <= delay.mul_f64(SLACK_FACTOR) + SLACK;
    let whole_ok = cost.whole >= whole_work && cost.whole < delay;
    record(
        format!("round {round}: calls counted and interleaved, and the medians against waits of {whole_work:.1?} and {delay:.1?}"),
        format!("{counted} {alternating} {split_ok} {whole_ok}"),
    );
    // The judge measures the same whole version itself; the two medians agree within a factor of 8.
    record_floats(
        format!("round {round}: log2 of the whole version's median in ms"),
        &[(cost.whole.as_secs_f64() * 1e3).log2() as f32],
        Tolerance { abs: 1.5, rel: 0.0 },
    );
    ensure(counted, || {
        format!(
            "with calls = {CALLS}, the whole version ran {w} times and the split one {s}: expected {} each, once \
             under `explain`, once to warm up (the call that compiles, never timed), then {CALLS} timed calls",
            CALLS + 2
        )
    })?;
    let shown: String = order.iter().collect();
    ensure(alternating, || {
        format!(
            "the versions ran in the order {shown} (w: whole, s: split): after `explain`, call them in turns, one of \
             each per round (warm-up included), so that a machine getting busier slows both alike"
        )
    })?;
    ensure(split_ok, || {
        format!(
            "the split version keeps the device busy {delay:.1?} on every call, so its median is {delay:.1?} to \
             {:.1?}; you measured {:.1?}. A call returns before the device's work is done: stop the clock after \
             reading the output with `.to_vec()`",
            delay.mul_f64(SLACK_FACTOR) + SLACK,
            cost.split
        )
    })?;
    ensure(whole_ok, || {
        format!(
            "the whole version keeps the device busy {whole_work:.1?} on every call and has no break, so its median \
             is at least that and below the split version's {delay:.1?} wait; you measured {:.1?}",
            cost.whole
        )
    })?;
    Ok(format!("whole {:.1?}, split {:.1?} (it waits {delay:.1?}): ratio {:.1}", cost.whole, cost.split, cost.ratio()))
}
