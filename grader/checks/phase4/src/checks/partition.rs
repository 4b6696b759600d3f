//! Checks of `save_or_recompute`: on forward graphs drawn from the run's seed (inputs,
//! recomputable and banned values, some read by the backward, and a price for memory), the
//! subject's costing of plans against this check's own, and the subject's plan against the least
//! cost any plan can have, which this check finds itself as a minimum cut with the `pathfinding`
//! crate's maximum flow (its tests compare that with trying every plan on small graphs). The
//! engine's partitioner is not consulted: it minimises bytes and counts recomputation as free.
//!
//! What the learner's process cannot read, it cannot return: the costing and the least cost are
//! compiled into the judge's runner only (`feature = "solutions"`), never into the runner linked
//! with the learner's crate, which records each answer for the judge. The judge, which runs no
//! learner code, reads them back and compares them with its own.

use std::ops::RangeInclusive;

use grader_harness::{CheckResult, Context, Failure, fingerprint, for_all, judged_artifact, record_artifact};
#[cfg(feature = "solutions")]
use pathfinding::directed::edmonds_karp::edmonds_karp_sparse;
use proptest::prelude::*;

use crate::subject::{Kind, SaveProblem, Value, choose_saved, plan_cost};

/// How many plans `plans_are_costed` costs.
const COSTED_PLANS: u32 = 60;

/// How many random graphs `plans_are_optimal` draws.
const RANDOM_GRAPHS: u32 = 40;

/// How many graphs of layers `telling_plans_are_optimal` builds.
const TELLING_GRAPHS: u32 = 20;

/// How many values (inputs included) the graphs `plan_cost` is judged on have.
const COSTED_VALUES: RangeInclusive<usize> = 8..=60;

/// How many values (inputs included) the graphs `choose_saved` is judged on have: past trying
/// every plan, whatever the machine.
const CHOSEN_VALUES: RangeInclusive<usize> = 40..=200;

/// How many of a random graph's values are inputs.
const INPUTS: RangeInclusive<usize> = 2..=6;

/// What keeping one byte costs, in the units of a value's recomputation cost.
const PRICE: RangeInclusive<u64> = 1..=3;

/// How many layers a telling graph has (14 to 19 values each, after one input).
const LAYERS: RangeInclusive<usize> = 3..=10;

/// The check's own costing of a plan: `None` when it does not work (in the judge's runner only).
#[cfg(feature = "solutions")]
fn cost(problem: &SaveProblem, saved: &[usize]) -> Option<u64> {
    let values = &problem.values;
    let mut kept = vec![false; values.len()];
    for &v in saved {
        kept[v] = values[v].kind != Kind::Input;
    }
    let memory: u64 = (0..values.len()).filter(|&v| kept[v]).map(|v| problem.price * values[v].bytes).sum();
    // Each value, from the last to the first: pulled in by the backward's needs or by a
    // recomputed value that reads it; recomputed when pulled in and neither kept nor an input.
    let mut pulled: Vec<bool> = values.iter().map(|v| v.needed).collect();
    let mut recomputation = 0;
    for v in (0..values.len()).rev() {
        if !pulled[v] || kept[v] || values[v].kind == Kind::Input {
            continue;
        }
        if values[v].kind == Kind::Banned {
            return None;
        }
        recomputation += values[v].cost;
        for &i in &values[v].inputs {
            pulled[i] = true;
        }
    }
    Some(memory + recomputation)
}

/// The least cost of any plan: the capacity of a minimum cut between the forward (the source's
/// side) and the backward (the sink's). Vertex `2v` stands for "the forward computes value `v`",
/// `2v + 1` for "the backward has it"; a value the backward recomputes is on the sink's side,
/// a saved one has its first vertex on the source's side and its second on the sink's. In the
/// judge's runner only.
#[cfg(feature = "solutions")]
fn least(problem: &SaveProblem) -> u64 {
    let values = &problem.values;
    let (source, sink) = (2 * values.len(), 2 * values.len() + 1);
    let finite: u64 = values.iter().map(|v| v.cost + problem.price * v.bytes).sum();
    let uncuttable = i64::try_from(finite + 1).expect("the graphs' costs are far below 2^63");
    let capacity = |c: u64| i64::try_from(c).expect("as above");
    let mut edges: Vec<((usize, usize), i64)> = Vec::new();
    for (v, value) in values.iter().enumerate() {
        if value.kind == Kind::Input {
            continue;
        }
        // Cut when the backward computes it again; never, for a banned value.
        let again = if value.kind == Kind::Banned { uncuttable } else { capacity(value.cost) };
        edges.push(((source, 2 * v), again));
        // Cut when it is saved.
        edges.push(((2 * v, 2 * v + 1), capacity(problem.price * value.bytes)));
        // Computing it again needs what it reads, in the backward.
        for &i in value.inputs.iter().filter(|&&i| values[i].kind != Kind::Input) {
            edges.push(((2 * i + 1, 2 * v), uncuttable));
        }
        if value.needed {
            edges.push(((2 * v + 1, sink), uncuttable));
        }
    }
    let vertices: Vec<usize> = (0..2 * values.len() + 2).collect();
    let (_, flow, _) = edmonds_karp_sparse(&vertices, &source, &sink, edges);
    u64::try_from(flow).expect("a flow is never negative")
}

/// An input of the forward, of `bytes` bytes (which keeping it costs nothing).
fn input(name: String, bytes: u64) -> Value {
    Value { name, kind: Kind::Input, inputs: Vec::new(), bytes, cost: 0, needed: false }
}

/// A forward graph of `sizes` values in all, a few of them inputs, then values each reading one
/// to three earlier ones, mostly among the last few (as layers do), a fifth of them banned (at any
/// cost, so that a plan recomputing one would often be cheaper); the backward reads a third of
/// them and the last.
fn random_problems(sizes: RangeInclusive<usize>) -> impl Strategy<Value = SaveProblem> {
    (sizes, INPUTS, PRICE).prop_flat_map(|(size, inputs, price)| {
        let value = (
            prop::collection::vec((prop::bool::weighted(0.75), any::<u16>()), 1..=3),
            prop::bool::weighted(0.2),
            1u64..=64,
            1u64..=60,
            prop::bool::weighted(0.35),
        );
        prop::collection::vec(value, size - inputs).prop_map(move |drawn| {
            let mut values: Vec<Value> = (0..inputs).map(|i| input(format!("in{i}"), 256)).collect();
            for (k, (reads, banned, bytes, cost, needed)) in drawn.into_iter().enumerate() {
                let earlier = values.len();
                let mut inputs: Vec<usize> = reads
                    .into_iter()
                    .map(|(near, draw)| {
                        let draw = usize::from(draw);
                        if near { earlier - 1 - draw % earlier.min(6) } else { draw % earlier }
                    })
                    .collect();
                inputs.sort_unstable();
                inputs.dedup();
                values.push(Value {
                    name: format!("v{k}"),
                    kind: if banned { Kind::Banned } else { Kind::Recomputable },
                    inputs,
                    bytes: 4 * bytes,
                    cost,
                    needed,
                });
            }
            values.last_mut().expect("more values than inputs").needed = true;
            SaveProblem { values, price }
        })
    })
}

/// A forward graph of layers built so that shortcuts lose, with sizes and costs from the seed.
/// Each layer starts from a matrix product (banned, read by the backward: always saved, so that
/// the layers' best plans add up), then:
/// - two cheap values read by the backward, large to keep: recomputing them is far cheaper than
///   saving everything the backward reads;
/// - an expensive value read by two to four cheap ones the backward reads: saving each of those
///   beats recomputing it with the expensive value, yet recomputing the expensive value once for
///   all of them beats saving them all, which deciding each value on its own misses;
/// - a second, large matrix product behind a small value the backward reads: recomputing all that
///   can be recomputed saves the product, saving the small value is cheaper;
/// - a chain of five to eight values, only its last read by the backward, with a small one third:
///   saving that one and recomputing the rest of the chain beats both saving the last and
///   recomputing all of it, and saving only what the backward reads misses it.
fn telling_problems() -> impl Strategy<Value = SaveProblem> {
    (PRICE, LAYERS).prop_flat_map(|(price, layers)| {
        prop::collection::vec(any::<[u16; 16]>(), layers).prop_map(move |dice| {
            let mut values = vec![input("x".to_string(), 1024)];
            for (layer, dice) in dice.iter().enumerate() {
                let roll = |k: usize, range: RangeInclusive<u64>| {
                    range.start() + u64::from(dice[k]) % (range.end() - range.start() + 1)
                };
                let mut push = |name: &str, kind: Kind, inputs: Vec<usize>, bytes: u64, cost: u64, needed: bool| {
                    values.push(Value { name: format!("l{layer}.{name}"), kind, inputs, bytes, cost, needed });
                    values.len() - 1
                };
                let (banned, recomputable) = (Kind::Banned, Kind::Recomputable);
                let weight = push("weight", Kind::Input, Vec::new(), 4096, 0, false);
                let previous = weight - 1;
                let product = push("mm", banned, vec![previous, weight], roll(0, 64..=512), roll(1, 50..=100), true);
                // Large and cheap: bytes at least 200 times the cost's range.
                let wide = push("wide", recomputable, vec![product], roll(2, 600..=1200), roll(3, 1..=3), true);
                push("wider", recomputable, vec![wide], roll(4, 600..=1200), roll(5, 1..=3), true);
                // Expensive, read by cheap values each dearer to keep than half its cost.
                let expensive_cost = roll(6, 40..=60);
                let shared = push("exp", recomputable, vec![product], expensive_cost + roll(7, 1..=40), expensive_cost, false);
                let keep = roll(8, expensive_cost * 2 / 3..=expensive_cost - 5).div_ceil(price);
                for reader in 0..roll(9, 2..=4) {
                    push(&format!("read{reader}"), recomputable, vec![shared], keep, roll(10, 1..=3), true);
                }
                let big = push("mm_big", banned, vec![product, weight], roll(11, 1000..=2000), roll(1, 50..=100), false);
                push("sum", recomputable, vec![big], roll(12, 1..=8), roll(13, 1..=3), true);
                // The chain: the third small, the others large, each 10 to 15 to recompute.
                let length = roll(14, 5..=8);
                let mut link = product;
                for position in 0..length {
                    let bytes = if position == 2 { roll(15, 5..=10).div_ceil(price) } else { roll(15, 200..=400) };
                    let last = position == length - 1;
                    link = push(&format!("chain{position}"), recomputable, vec![link], bytes, 10 + position % 6, last);
                }
            }
            SaveProblem { values, price }
        })
    })
}

/// `plan_cost` costs plans as the check does, `None` for those that do not work: random plans,
/// some of them saving every banned value.
pub fn plans_are_costed(ctx: &Context) -> CheckResult {
    let cases = COSTED_PLANS;
    let picks = prop::collection::vec(any::<u8>(), *COSTED_VALUES.end());
    let plans = (random_problems(COSTED_VALUES), prop::bool::ANY, any::<u8>(), picks);
    for_all(ctx, cases, plans, |(problem, all_banned, density, picks)| {
        // Each value saved when its pick is below the plan's density; every banned one, in some.
        let plan: Vec<usize> = (0..problem.values.len())
            .filter(|&v| (all_banned && problem.values[v].kind == Kind::Banned) || picks[v] < density)
            .collect();
        let label = format!("plan_cost of the plan {plan:?} on the graph {}", fingerprint(&problem));
        let got = match judged_artifact(&label) {
            Some(text) => parse_cost(&text).ok_or_else(|| Failure::fail(format!("{label} was recorded unreadably")))?,
            None => plan_cost(&problem, &plan),
        };
        record_artifact(label, format!("{got:?}"));
        judge_cost(&problem, &plan, got)
    })?;
    Ok(format!("plan_cost agrees with the grader's costing of {cases} plans"))
}

/// `plan_cost`'s answer as recorded: `Some(12)` or `None`.
fn parse_cost(text: &str) -> Option<Option<u64>> {
    match text {
        "None" => Some(None),
        _ => text.strip_prefix("Some(")?.strip_suffix(')')?.parse().ok().map(Some),
    }
}

/// Whether `plan_cost` answered `got` for `plan` on `problem` as the check costs it: in the judge's
/// runner, where no learner code runs.
#[cfg(feature = "solutions")]
fn judge_cost(problem: &SaveProblem, plan: &[usize], got: Option<u64>) -> Result<(), Failure> {
    let expected = cost(problem, plan);
    grader_harness::ensure(got == expected, || {
        format!("plan_cost(problem, {plan:?}) returned {got:?}, expected {expected:?}")
    })
}

/// In the runner linked with the learner's crate, no costing: the judge costs.
#[cfg(not(feature = "solutions"))]
fn judge_cost(_problem: &SaveProblem, _plan: &[usize], _got: Option<u64>) -> Result<(), Failure> {
    Ok(())
}

/// A plan as recorded: `[3, 7, 12]`.
fn parse_plan(text: &str) -> Option<Vec<usize>> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|v| v.trim().parse().ok()).collect()
}

/// `choose_saved`'s plan on `problem` works and costs the least possible: its values exist here,
/// and the judge costs it.
fn judge_plan(problem: &SaveProblem) -> Result<(), Failure> {
    let label = format!("the plan choose_saved made for the graph {}", fingerprint(problem));
    let plan = match judged_artifact(&label) {
        Some(text) => parse_plan(&text).ok_or_else(|| Failure::fail(format!("{label} was recorded unreadably")))?,
        None => choose_saved(problem),
    };
    record_artifact(label, format!("{plan:?}"));
    if let Some(&bad) = plan.iter().find(|&&v| v >= problem.values.len()) {
        return Err(Failure::fail(format!("choose_saved returned {plan:?}: there is no value {bad}")));
    }
    judge_chosen(problem, &plan)
}

/// Whether `plan` works on `problem` and costs the least possible: in the judge's runner, where no
/// learner code runs.
#[cfg(feature = "solutions")]
fn judge_chosen(problem: &SaveProblem, plan: &[usize]) -> Result<(), Failure> {
    let Some(got) = cost(problem, plan) else {
        return Err(Failure::fail(format!(
            "choose_saved returned {plan:?}, which does not work: the backward would have to compute a banned value \
             again"
        )));
    };
    let best = least(problem);
    grader_harness::ensure(got == best, || format!("choose_saved's plan {plan:?} costs {got}; the least possible is {best}"))
}

/// In the runner linked with the learner's crate, no costing: the judge costs.
#[cfg(not(feature = "solutions"))]
fn judge_chosen(_problem: &SaveProblem, _plan: &[usize]) -> Result<(), Failure> {
    Ok(())
}

/// `choose_saved` returns a plan of least cost on random graphs.
pub fn plans_are_optimal(ctx: &Context) -> CheckResult {
    let cases = RANDOM_GRAPHS;
    for_all(ctx, cases, random_problems(CHOSEN_VALUES), |problem| judge_plan(&problem))?;
    Ok(format!("choose_saved found a plan of least cost for {cases} random graphs"))
}

/// `choose_saved` returns a plan of least cost on graphs built so that shortcuts lose.
pub fn telling_plans_are_optimal(ctx: &Context) -> CheckResult {
    let cases = TELLING_GRAPHS;
    for_all(ctx, cases, telling_problems(), |problem| judge_plan(&problem))?;
    Ok(format!("choose_saved found a plan of least cost for {cases} graphs built to punish shortcuts"))
}

// The tests compare the judge's own answers (compiled with the solutions) with brute force.
#[cfg(all(test, feature = "solutions"))]
mod tests {
    use proptest::strategy::ValueTree;

    use super::*;

    /// The least cost of any plan, by trying every set of values that are not inputs.
    fn least_by_trying_every_plan(problem: &SaveProblem) -> u64 {
        let candidates: Vec<usize> =
            (0..problem.values.len()).filter(|&v| problem.values[v].kind != Kind::Input).collect();
        (0u32..1 << candidates.len())
            .filter_map(|mask| {
                let plan: Vec<usize> =
                    candidates.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &v)| v).collect();
                cost(problem, &plan)
            })
            .min()
            .expect("saving everything the backward reads works")
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// The minimum cut's capacity is the least cost of any plan.
        #[test]
        fn the_cut_is_the_least_cost(problem in random_problems(7..=16)) {
            prop_assert_eq!(least(&problem), least_by_trying_every_plan(&problem));
        }
    }

    /// The telling graphs are as large as the checks say, and every one has a plan that works.
    #[test]
    fn telling_graphs_have_the_sizes_promised() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        for _ in 0..50 {
            let problem = telling_problems().new_tree(&mut runner).expect("a graph").current();
            assert!(CHOSEN_VALUES.contains(&problem.values.len()), "{} values", problem.values.len());
            let needed: Vec<usize> = (0..problem.values.len()).filter(|&v| problem.values[v].needed).collect();
            assert!(cost(&problem, &needed).is_some());
        }
    }
}
