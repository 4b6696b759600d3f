//! Check of `recompiles`: on bodies and call sequences drawn from the run's seed, the subject's
//! prediction against what the engine's own cache does with the check's own copy of the body,
//! observed from outside it: the compiled function's counters before and after each call (a
//! compile, a cache hit or an eager fallback), and the `guards` log of each new graph (which
//! sizes of the input are symbols in it). The subject's process may not reach the cache while it
//! predicts (the `dynamo::compile` wire), nor the symbolic sizes the cache decides with (the wires
//! of `with_dynamic_dims`, `dynamic_placeholder`, `add_dynamic_placeholder` and `bind_symbols`);
//! and it predicts each sequence before the check observes it, so that what an observation leaves
//! in the process (the process-wide `dynamo::counters()`, a structured trace the subject turned
//! on) is never about the sequence being predicted.

use engine::backends::Eager;
use engine::logs::{self, Artifact};
use engine::{DType, Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record, wires};
use proptest::prelude::*;

use crate::subject::{BIAS, Body, Call, Outcome, predict};

/// The body's code, the check's own copy (the subject's [`Body::run`] is never run here).
fn reference(body: Body, x: &Tensor, bias: &Tensor) -> engine::Result<Tensor> {
    match body {
        Body::SumLast => x.relu()?.sum(-1, false),
        Body::Gram => x.matmul(&x.transpose(-2, -1)?),
        Body::AddBias => x.add(bias),
        Body::AddTranspose => x.add(&x.transpose(-2, -1)?),
    }
}

/// The dims of input 0 that are symbols in a graph, read from its `guards` log: the line
/// ``input 0 `arg0` (argument 0): f32[s0, 4] on cpu, contiguous``.
fn symbolic_dims(guards_log: &str) -> Option<Vec<usize>> {
    let line = guards_log.lines().find(|line| line.contains("input 0 `"))?;
    let (_, rest) = line.split_once("): ")?;
    let sizes = rest.split_once('[')?.1.split_once(']')?.0;
    Some(sizes.split(", ").enumerate().filter(|(_, size)| size.parse::<usize>().is_err()).map(|(d, _)| d).collect())
}

/// What the engine's cache did on each of `calls` of `body`, with `limit` graphs at most: the
/// check's own observation, with the eager backend (the cache is the same whatever compiles its
/// graphs).
fn observed(body: Body, calls: &[Call], limit: usize) -> Result<Vec<Outcome>, Failure> {
    wires::exempt(|| {
        let bias = Tensor::ones(&[BIAS]);
        let compiled = dynamo::compile(|x: Tensor| reference(body, &x, &bias)).backend(Eager).recompile_limit(limit);
        let mut outcomes = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let x = Tensor::randn(&call.shape, i as u64).to_dtype(call.dtype)?;
            let before = compiled.stats();
            let (result, log) = logs::capture(&[Artifact::Guards], || compiled.call(&x));
            result?;
            let after = compiled.stats();
            outcomes.push(if after.compiles > before.compiles {
                let dynamic = symbolic_dims(&log)
                    .ok_or_else(|| Failure::Setup(format!("call {i} compiled, but its guards log names no input 0:\n{log}")))?;
                Outcome::Compiled { dynamic }
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

/// The body, its calls' dtypes and shapes, and a limit: a body of the family; 2 or 3 dims, the
/// free ones of size 1, 2, 3 or 5, the last [`BIAS`] or 1 for `AddBias`, the last two equal or one
/// of them 1 for `AddTranspose`; a fifth of the calls bfloat16. Each sequence of 3 to 14 calls is
/// drawn from 2 to 5 distinct calls, so that calls repeat; the limit is from 2 to 8.
fn sequences() -> impl Strategy<Value = (Body, Vec<Call>, usize)> {
    let bodies = prop::sample::select(vec![Body::SumLast, Body::Gram, Body::AddBias, Body::AddTranspose]);
    (bodies, 2usize..=3).prop_flat_map(|(body, rank)| {
        let free = || prop::sample::select(vec![1usize, 2, 3, 5]);
        let tail = match body {
            Body::SumLast | Body::Gram => prop::collection::vec(free(), 1).boxed(),
            Body::AddBias => prop::sample::select(vec![BIAS, 1]).prop_map(|n| vec![n]).boxed(),
            Body::AddTranspose => (free(), 0..4usize)
                .prop_map(|(n, form)| match form {
                    0 => vec![1, n],
                    1 => vec![n, 1],
                    _ => vec![n, n],
                })
                .boxed(),
        };
        let lead = rank - if body == Body::AddTranspose { 2 } else { 1 };
        let call = (prop::collection::vec(free(), lead), tail, prop::bool::weighted(0.2)).prop_map(
            |(mut shape, tail, bf16)| {
                shape.extend(tail);
                Call { dtype: if bf16 { DType::BF16 } else { DType::F32 }, shape }
            },
        );
        let palette = prop::collection::vec(call, 2..=5);
        let picks = prop::collection::vec(any::<prop::sample::Index>(), 3..=14);
        (palette, picks, 2usize..=8).prop_map(move |(palette, picks, limit)| {
            (body, picks.iter().map(|pick| pick.get(&palette).clone()).collect(), limit)
        })
    })
}

/// Sequences that random ones meet rarely, each deciding one question: every size that changed
/// becomes a symbol, not only the first guard's (and two tied sizes then share one); a symbol
/// meeting a constant is specialized, also when a dtype change is what recompiled; `x @ x^T` ties
/// nothing; a compile for a new dtype marks the sizes that changed too; a marked size of 1 is a
/// constant; a hit past the limit is still a hit.
fn telling_sequences() -> Vec<(Body, Vec<Call>, usize)> {
    let call = |dtype: DType, shape: &[usize]| Call { dtype, shape: shape.to_vec() };
    let (f32, bf16) = (DType::F32, DType::BF16);
    vec![
        (Body::AddTranspose, vec![call(f32, &[5, 5]), call(f32, &[3, 3]), call(f32, &[2, 2]), call(f32, &[1, 2])], 8),
        (
            Body::AddTranspose,
            vec![
                call(f32, &[2, 5, 5]),
                call(f32, &[2, 1, 5]),
                call(f32, &[2, 5, 5]),
                call(bf16, &[2, 5, 5]),
                call(bf16, &[2, 3, 3]),
            ],
            8,
        ),
        (Body::Gram, vec![call(f32, &[3, 5]), call(f32, &[2, 3]), call(f32, &[5, 2])], 8),
        (
            Body::AddBias,
            vec![call(f32, &[3, 4]), call(f32, &[5, 4]), call(f32, &[5, 1]), call(f32, &[2, 4]), call(f32, &[1, 4])],
            8,
        ),
        (Body::SumLast, vec![call(f32, &[2, 5]), call(bf16, &[3, 5]), call(bf16, &[5, 5]), call(f32, &[3, 5])], 8),
        (Body::SumLast, vec![call(f32, &[2, 5]), call(bf16, &[2, 5]), call(f32, &[3, 5]), call(f32, &[2, 5])], 2),
    ]
}

/// Whether `got`, predicted for `calls` of `body`, is what the engine did (`expected`); the
/// message names the first call where they differ, with the calls that led to it.
fn compare(body: Body, calls: &[Call], limit: usize, got: &[Outcome], expected: &[Outcome]) -> Result<(), Failure> {
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
        "for Body::{body:?} with recompile_limit({limit}), you predicted {:?} for call {first}, but the engine's \
         cache did {:?}. The calls so far and what the engine did:\n{}",
        got[first],
        expected[first],
        shown.join("\n")
    )))
}

/// `predict` says what the engine's cache does on each call of a few telling sequences, then of
/// random ones: a hit, a compile (with which sizes of the input are symbols) or an eager run past
/// the recompile limit. Each sequence is predicted before it is observed.
pub fn predictions_match_the_engine(ctx: &Context) -> CheckResult {
    for (body, calls, limit) in telling_sequences() {
        let got = predict(body, &calls, limit);
        record("outcomes", format!("{got:?}"));
        compare(body, &calls, limit, &got, &observed(body, &calls, limit)?)?;
    }
    let cases = 60;
    for_all(ctx, cases, sequences(), |(body, calls, limit)| {
        let got = predict(body, &calls, limit);
        record("outcomes", format!("{got:?}"));
        compare(body, &calls, limit, &got, &observed(body, &calls, limit)?)
    })?;
    Ok(format!(
        "predict agrees with the engine's cache, call by call, on {} telling and {cases} random call sequences \
         over the four bodies",
        telling_sequences().len()
    ))
}
