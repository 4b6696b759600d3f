//! Check of `recompiles`: on call sequences drawn from the run's seed, the subject's prediction
//! against what the engine's own cache does, observed from outside it: the compiled function's
//! counters before and after each call (a compile, a cache hit or an eager fallback), and the
//! `recompiles` log's automatic-dynamic lines (which dims are symbols in each new graph). The
//! subject's process may not reach the cache while it predicts (the `dynamo::compile` wire).

use std::collections::BTreeSet;

use engine::backends::Eager;
use engine::logs::{self, Artifact};
use engine::{DType, Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record, wires};
use proptest::prelude::*;

use crate::subject::{Call, Outcome, predict};

/// What the engine's cache did on each of `calls` of the function `predict` is told of, with
/// `limit` graphs at most: the check's own observation, with the eager backend (the cache is the
/// same whatever compiles its graphs).
fn observed(calls: &[Call], limit: usize) -> Result<Vec<Outcome>, Failure> {
    wires::exempt(|| {
        let traced = |x: Tensor| x.relu()?.sum(-1, false);
        let compiled = dynamo::compile(traced).backend(Eager).recompile_limit(limit);
        let mut dynamic = BTreeSet::new();
        let mut outcomes = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let x = Tensor::randn(&call.shape, i as u64).to_dtype(call.dtype)?;
            let before = compiled.stats();
            let (result, log) = logs::capture(&[Artifact::Recompiles], || compiled.call(&x));
            result?;
            let after = compiled.stats();
            // "automatic dynamic shapes: input 0 dim 1 is dynamic from now on"
            dynamic.extend(log.lines().filter_map(|line| {
                let (_, rest) = line.split_once("automatic dynamic shapes: input 0 dim ")?;
                rest.split_whitespace().next()?.parse::<usize>().ok()
            }));
            outcomes.push(if after.compiles > before.compiles {
                Outcome::Compiled { dynamic: dynamic.iter().copied().collect() }
            } else if after.eager_fallbacks > before.eager_fallbacks {
                Outcome::Eager
            } else if after.cache_hits > before.cache_hits {
                Outcome::Hit
            } else {
                return Err(Failure::Setup(format!("call {i} neither compiled, hit the cache nor ran eagerly")));
            });
        }
        Ok(outcomes)
    })
}

/// Sequences of 3 to 14 calls of 2 or 3 dims: dim 0 of size 2 to 4, dim 1 of 5 to 7, dim 2 of 8
/// or 9 (so no two dims of a call are ever the same size), a fifth of them bfloat16; and a
/// recompile limit from 2 to 8.
fn sequences() -> impl Strategy<Value = (Vec<Call>, usize)> {
    let sizes: [&[usize]; 3] = [&[2, 3, 4], &[5, 6, 7], &[8, 9]];
    (2usize..=3).prop_flat_map(move |rank| {
        let call = (prop::collection::vec(any::<prop::sample::Index>(), rank), prop::bool::weighted(0.2)).prop_map(
            move |(picks, bf16)| Call {
                dtype: if bf16 { DType::BF16 } else { DType::F32 },
                shape: picks.iter().zip(sizes).map(|(pick, sizes)| *pick.get(sizes)).collect(),
            },
        );
        (prop::collection::vec(call, 3..=14), 2usize..=8)
    })
}

/// Sequences that random ones meet rarely, each deciding one question: the size failures of every
/// graph that missed count, not the newest's only (the third call); a dim once dynamic is so for
/// every later graph, of any dtype (the third and fourth); a hit past the limit is still a hit.
fn telling_sequences() -> Vec<(Vec<Call>, usize)> {
    let call = |dtype: DType, shape: &[usize]| Call { dtype, shape: shape.to_vec() };
    let (f32, bf16) = (DType::F32, DType::BF16);
    vec![
        (vec![call(f32, &[2, 5, 8]), call(f32, &[3, 6, 8]), call(f32, &[2, 6, 9]), call(f32, &[4, 7, 9])], 8),
        (vec![call(f32, &[2, 5]), call(f32, &[3, 5]), call(bf16, &[2, 6]), call(bf16, &[4, 5]), call(bf16, &[3, 7])], 8),
        (vec![call(f32, &[2, 5]), call(bf16, &[2, 5]), call(f32, &[3, 5]), call(bf16, &[2, 5]), call(f32, &[2, 5])], 2),
    ]
}

/// Whether `got`, predicted for `calls`, is what the engine did (`expected`); the message names the
/// first call where they differ, with the calls that led to it.
fn compare(calls: &[Call], limit: usize, got: &[Outcome], expected: &[Outcome]) -> Result<(), Failure> {
    ensure(got.len() == calls.len(), || {
        format!("predict returned {} outcomes for {} calls: one per call, please", got.len(), calls.len())
    })?;
    let Some(first) = got.iter().zip(expected).position(|(g, e)| g != e) else { return Ok(()) };
    let shown: Vec<String> = calls
        .iter()
        .zip(expected)
        .take(first + 1)
        .enumerate()
        .map(|(i, (c, e))| format!("    call {i}: {} {:?} -> {e:?}", c.dtype, c.shape))
        .collect();
    Err(Failure::fail(format!(
        "with recompile_limit({limit}), you predicted {:?} for call {first}, but the engine's cache did {:?}. \
         The calls so far and what the engine did:\n{}",
        got[first],
        expected[first],
        shown.join("\n")
    )))
}

/// `predict` says what the engine's cache does on each call of a few telling sequences, then of
/// random ones: a hit, a compile (with which dims symbolic) or an eager run past the recompile
/// limit.
pub fn predictions_match_the_engine(ctx: &Context) -> CheckResult {
    for (calls, limit) in telling_sequences() {
        let expected = observed(&calls, limit)?;
        let got = predict(&calls, limit);
        record("outcomes", format!("{got:?}"));
        compare(&calls, limit, &got, &expected)?;
    }
    let cases = 40;
    for_all(ctx, cases, sequences(), |(calls, limit)| {
        let expected = observed(&calls, limit)?;
        let got = predict(&calls, limit);
        record("outcomes", format!("{got:?}"));
        compare(&calls, limit, &got, &expected)
    })?;
    Ok(format!(
        "predict agrees with the engine's cache, call by call, on {} telling and {cases} random call sequences",
        telling_sequences().len()
    ))
}
