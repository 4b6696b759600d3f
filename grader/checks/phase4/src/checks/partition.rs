//! Checks of `save_or_recompute`: on forward graphs drawn from the run's seed (inputs,
//! recomputable and banned values, some read by the backward, and a memory budget between the
//! least any working plan needs and saving everything the backward reads), the subject's costing
//! of random plans against this check's own, and the subject's plan against the least
//! recomputation, which this check finds itself by trying every plan. The engine's partitioner is
//! not consulted: it minimises bytes, not recomputation.

use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record};
use proptest::prelude::*;

use crate::subject::{Kind, SaveProblem, Value, choose_saved, recomputation};

/// The check's own costing of a plan: `None` when it does not work.
fn cost(problem: &SaveProblem, saved: &[usize]) -> Option<u64> {
    let values = &problem.values;
    let kept: u64 = saved.iter().filter(|&&v| values[v].kind != Kind::Input).map(|&v| values[v].bytes).sum();
    if kept > problem.budget {
        return None;
    }
    // Each value, in order: there (input or saved), recomputed, or neither yet; the backward's
    // needs pull values in from the last to the first.
    let mut pulled = vec![false; values.len()];
    for v in (0..values.len()).rev() {
        pulled[v] |= values[v].needed;
        let there = values[v].kind == Kind::Input || saved.contains(&v);
        if pulled[v] && !there {
            if values[v].kind == Kind::Banned {
                return None;
            }
            for &i in &values[v].inputs {
                pulled[i] = true;
            }
        }
    }
    let recomputed = |v: usize| pulled[v] && values[v].kind != Kind::Input && !saved.contains(&v);
    Some((0..values.len()).filter(|&v| recomputed(v)).map(|v| values[v].cost).sum())
}

/// The least recomputation of any plan that works, over every subset of the values that are not
/// inputs.
fn least(problem: &SaveProblem) -> Option<u64> {
    let candidates: Vec<usize> = (0..problem.values.len()).filter(|&v| problem.values[v].kind != Kind::Input).collect();
    (0u32..1 << candidates.len())
        .filter_map(|mask| {
            let plan: Vec<usize> =
                candidates.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &v)| v).collect();
            cost(problem, &plan)
        })
        .min()
}

/// A forward graph: 1 to 3 inputs, then 3 to 12 values each reading one or two earlier ones,
/// a quarter of them banned (at any cost, so that a plan recomputing one would often be cheaper); the backward reads some; the budget is `fraction` of the way from the
/// least bytes any working plan saves to the bytes of everything the backward reads.
fn problems() -> impl Strategy<Value = SaveProblem> {
    (1usize..=3, 3usize..=12).prop_flat_map(|(inputs, computed)| {
        let value = (0..computed)
            .map(|k| {
                let earlier = inputs + k;
                (
                    prop::collection::vec(0..earlier, 1..=2),
                    prop::bool::weighted(0.25),
                    1u64..=32,
                    1u64..=20,
                    prop::bool::weighted(0.45),
                )
            })
            .collect::<Vec<_>>();
        (value, 0.0f64..=1.0).prop_map(move |(drawn, fraction)| {
            let mut values: Vec<Value> = (0..inputs)
                .map(|i| Value {
                    name: format!("in{i}"),
                    kind: Kind::Input,
                    inputs: Vec::new(),
                    bytes: 64,
                    cost: 0,
                    needed: true,
                })
                .collect();
            for (k, (mut reads, banned, sixteens, cost, needed)) in drawn.into_iter().enumerate() {
                reads.sort_unstable();
                reads.dedup();
                values.push(Value {
                    name: format!("v{k}"),
                    kind: if banned { Kind::Banned } else { Kind::Recomputable },
                    inputs: reads,
                    bytes: 16 * sixteens,
                    // Banned whatever it would cost: a cheap banned value tempts a wrong plan.
                    cost,
                    needed,
                });
            }
            // The backward reads the last value at least (the output's neighbourhood).
            values.last_mut().expect("at least three values").needed = true;
            let everything: u64 =
                values.iter().filter(|v| v.needed && v.kind != Kind::Input).map(|v| v.bytes).sum();
            let unlimited = SaveProblem { values: values.clone(), budget: u64::MAX };
            let smallest = smallest_working(&unlimited);
            let budget = smallest + (fraction * (everything - smallest) as f64) as u64;
            SaveProblem { values, budget }
        })
    })
}

/// The fewest bytes of any plan that works, whatever its recomputation.
fn smallest_working(problem: &SaveProblem) -> u64 {
    let candidates: Vec<usize> = (0..problem.values.len()).filter(|&v| problem.values[v].kind != Kind::Input).collect();
    (0u32..1 << candidates.len())
        .filter_map(|mask| {
            let plan: Vec<usize> =
                candidates.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &v)| v).collect();
            cost(problem, &plan).map(|_| plan.iter().map(|&v| problem.values[v].bytes).sum())
        })
        .min()
        .expect("saving everything the backward reads works")
}

/// `recomputation` costs random plans as the check does, `None` for those that do not work.
pub fn plans_are_costed(ctx: &Context) -> CheckResult {
    let cases = 60;
    let plans = (problems(), prop::collection::vec(any::<bool>(), 16));
    for_all(ctx, cases, plans, |(problem, picks)| {
        let plan: Vec<usize> = (0..problem.values.len()).filter(|&v| picks[v]).collect();
        let (got, expected) = (recomputation(&problem, &plan), cost(&problem, &plan));
        record("recomputation", format!("{got:?}"));
        ensure(got == expected, || format!("recomputation(problem, {plan:?}) returned {got:?}, expected {expected:?}"))
    })?;
    Ok(format!("recomputation agrees with the grader's costing of {cases} random plans"))
}

/// `choose_saved` returns a plan that works and costs the least recomputation possible.
pub fn plans_are_optimal(ctx: &Context) -> CheckResult {
    let cases = 40;
    for_all(ctx, cases, problems(), |problem| {
        let plan = choose_saved(&problem);
        if let Some(&bad) = plan.iter().find(|&&v| v >= problem.values.len()) {
            return Err(Failure::fail(format!("choose_saved returned {plan:?}: there is no value {bad}")));
        }
        let best = least(&problem).expect("every drawn problem has a plan that works");
        let Some(got) = cost(&problem, &plan) else {
            return Err(Failure::fail(format!(
                "choose_saved returned {plan:?}, which does not work: over the budget of {} bytes, or a banned value \
                 the backward would have to compute again",
                problem.budget
            )));
        };
        record("least recomputation", got);
        ensure(got == best, || {
            format!("choose_saved's plan {plan:?} recomputes at a cost of {got}; the least possible is {best}")
        })
    })?;
    Ok(format!("choose_saved found a plan of least recomputation for {cases} random graphs and budgets"))
}
