//! Checks of `break_cost`. The grader never trusts reported speed: it hands the learner's
//! function versions whose cost it knows (a host sleep at the break, of a duration drawn in secret
//! from the run's seed, which the learner's process is not given) and whose calls it counts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use engine::{Result, Tensor, dynamo};
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

/// With a split version that sleeps at its break for a duration drawn in secret from the seed
/// (40 to 640 ms, twice over), the split median covers that sleep and exceeds it by no more than
/// a call's own cost, and the whole one stays below it; each version runs about `calls` times.
/// The whole version's median is compared with the judge's own measurement of the same work.
pub fn times_are_medians_of_real_calls(ctx: &Context) -> CheckResult {
    let mut summary = Vec::new();
    for round in 0..2 {
        let delay = secret_duration(ctx, "break", round, Duration::from_millis(40), Duration::from_millis(640));
        summary.push(one_round(ctx, round, delay)?);
    }
    Ok(summary.join("; "))
}

fn one_round(ctx: &Context, round: u64, delay: Duration) -> Result<String, grader_harness::Failure> {
    let (whole_calls, split_calls) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let whole = |x: Tensor| -> Result<Tensor> {
        whole_calls.fetch_add(1, Ordering::SeqCst);
        x.tanh()?.mul(2.0)
    };
    let split = |x: Tensor| -> Result<Tensor> {
        split_calls.fetch_add(1, Ordering::SeqCst);
        let h = x.tanh()?;
        dynamo::graph_break()?;
        std::thread::sleep(delay);
        h.mul(2.0)
    };
    let cost = measure_break_cost(whole, split, &example_input(2, ctx.seed + round), CALLS)?;
    let (w, s) = (whole_calls.load(Ordering::SeqCst), split_calls.load(Ordering::SeqCst));
    let counted = w > CALLS && s > CALLS && w <= CALLS + 4 && s <= CALLS + 4;
    let split_ok = cost.split >= delay && cost.split <= delay.mul_f64(SLACK_FACTOR) + SLACK;
    let whole_ok = cost.whole < delay;
    record(
        format!("round {round}: calls counted, and the medians against a {delay:.1?} sleep"),
        format!("{counted} {split_ok} {whole_ok}"),
    );
    // The judge measures the same whole version itself; the two medians agree within a factor of 8.
    record_floats(
        format!("round {round}: log2 of the whole version's median in ms"),
        &[(cost.whole.as_secs_f64() * 1e3).log2() as f32],
        Tolerance { abs: 1.5, rel: 0.0 },
    );
    ensure(counted, || {
        format!(
            "with calls = {CALLS}, the whole version ran {w} times and the split one {s}: expected {CALLS} timed \
             calls plus a warm-up (and the explain run) each"
        )
    })?;
    ensure(split_ok, || {
        format!(
            "the split version sleeps {delay:.1?} on every call, so its median is {delay:.1?} to {:.1?}; you measured \
             {:.1?}",
            delay.mul_f64(SLACK_FACTOR) + SLACK,
            cost.split
        )
    })?;
    ensure(whole_ok, || format!("the whole version does not sleep, but you measured a median of {:?}", cost.whole))?;
    Ok(format!("whole {:.1?}, split {:.1?} (it sleeps {delay:.1?}): ratio {:.1}", cost.whole, cost.split, cost.ratio()))
}
