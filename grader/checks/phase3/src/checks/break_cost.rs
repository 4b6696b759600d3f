//! Checks of `break_cost`. The grader never trusts reported speed: it hands the learner's
//! function versions whose cost it knows (a host sleep at the break) and whose calls it counts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use engine::{Result, Tensor, dynamo};
use grader_harness::{CheckResult, Context, ensure, record};

use crate::subject::{example_input, layered, measure_break_cost};

/// The graph counts are those `explain` finds.
pub fn counts_the_graphs(ctx: &Context) -> CheckResult {
    let x = example_input(2, ctx.seed);
    let cost = measure_break_cost(|x| layered(&x, 8, 0), |x| layered(&x, 8, 3), &x, 3)?;
    record("graphs whole and split", format!("{} {}", cost.graphs_whole, cost.graphs_split));
    ensure(cost.graphs_whole == 1 && cost.graphs_split == 4, || {
        format!(
            "for 8 layers with 0 and 3 breaks you counted {} and {} graphs; expected 1 and 4",
            cost.graphs_whole, cost.graphs_split
        )
    })?;
    Ok("1 graph whole, 4 graphs with 3 breaks".into())
}

/// With a split version that sleeps 5 ms at its break, the split median is at least 5 ms and the
/// whole one is not; each version runs about `calls` times.
pub fn times_are_medians_of_real_calls(ctx: &Context) -> CheckResult {
    let delay = Duration::from_millis(5);
    let calls = 9;
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
    let cost = measure_break_cost(whole, split, &example_input(2, ctx.seed), calls)?;
    let (w, s) = (whole_calls.load(Ordering::SeqCst), split_calls.load(Ordering::SeqCst));
    record(
        "calls counted, and whether each median covers what it should",
        format!(
            "{} {} {} {}",
            w > calls && w <= calls + 4,
            s > calls && s <= calls + 4,
            cost.split >= delay,
            cost.whole < delay
        ),
    );
    ensure(w > calls && s > calls && w <= calls + 4 && s <= calls + 4, || {
        format!(
            "with calls = {calls}, the whole version ran {w} times and the split one {s}: expected {calls} timed \
             calls plus a warm-up (and the explain run) each"
        )
    })?;
    ensure(cost.split >= delay, || {
        format!("the split version sleeps {delay:?} on every call, but you measured a median of {:?}", cost.split)
    })?;
    ensure(cost.whole < delay, || {
        format!("the whole version does not sleep, but you measured a median of {:?}", cost.whole)
    })?;
    Ok(format!(
        "whole {:.1?}, split {:.1?} (it sleeps {delay:?}): ratio {:.1}, medians of calls through Inductor, each \
         timed until its output was read back",
        cost.whole,
        cost.split,
        cost.ratio()
    ))
}
