//! Seeded property tests: draw inputs with proptest from the run's seed, and on failure report
//! the shrunk (smallest) failing input, so a learner sees a case small enough to reason about.

use std::fmt::Debug;
use std::time::Duration;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::check::{Context, Failure};

/// Runs `test` on `cases` inputs drawn from `strategy` with the run's seed. The first failure is
/// shrunk, and the failure message names the smallest input that still fails; in a judge, it is
/// reported as drawn (see [`shrink_limit`]).
pub fn for_all<S>(
    ctx: &Context,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), Failure>,
) -> Result<(), Failure>
where
    S: Strategy,
    S::Value: Debug,
{
    // No regression files: the learner's tree is theirs, and the seed already makes runs repeatable.
    let judging = crate::transcript::is_judging();
    let config =
        Config { cases, failure_persistence: None, max_shrink_iters: shrink_limit(judging), ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(ctx.seed)));
    let setup = std::cell::RefCell::new(None);
    let result = runner.run(&strategy, |value| {
        // A panic is a failure with the panic's `file:line`, shrunk like any other.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(value)))
            .unwrap_or_else(|_| Err(Failure::Fail(crate::runner::described_panic().0)));
        outcome.map_err(|failure| match failure {
            Failure::Fail(message) => TestCaseError::fail(message),
            Failure::Skip(reason) => TestCaseError::reject(reason),
            Failure::Setup(problem) => {
                setup.replace(Some(problem.clone()));
                TestCaseError::fail(problem)
            }
        })
    });
    // A machine that is not set up fails every case alike: say so, not "smallest failing input".
    if let Some(problem) = setup.take() {
        return Err(Failure::Setup(problem));
    }
    match result {
        Ok(()) => Ok(()),
        Err(TestError::Fail(reason, input)) => {
            let seed = ctx.seed;
            let shown = if judging {
                format!("failing input (seed {seed}; judged as drawn, not shrunk)")
            } else {
                format!("smallest failing input (seed {seed}, shrunk by proptest)")
            };
            Err(Failure::Fail(format!("{}\n\n{shown}:\n{input:#?}", reason.message())))
        }
        Err(TestError::Abort(reason)) => Err(Failure::Fail(format!("the property test gave up: {}", reason.message()))),
    }
}

/// How many times proptest may shrink a failing input. Not at all in a judge: it holds the
/// learner's answers for the inputs the subject's run drew, and for no smaller ones, so every
/// shrunk input would be answered by the reference itself and pass; shrinking there only spends
/// time (up to half a minute a check, in a debug build) and ends where it began.
fn shrink_limit(judging: bool) -> u32 {
    if judging { 0 } else { 512 }
}

/// One value drawn from `strategy` with the run's seed (and `salt`, to draw several): for a check
/// that needs a random model or program rather than a property over many.
pub fn draw<S: Strategy>(ctx: &Context, salt: u64, strategy: S) -> S::Value {
    use proptest::strategy::ValueTree as _;
    let seed = seed_bytes(ctx.seed ^ salt.wrapping_mul(0xA076_1D64_78BD_642F));
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    strategy.new_tree(&mut runner).expect("the grader's strategies always draw").current()
}

/// How long the `k`-th use of `role` lasts in this run (a sleep, a kernel that spins): a duration
/// between `min` and `max`, spread evenly on a log scale, drawn from the run's seed. The learner's
/// process is not given the seed ([`crate::seal`]), so its code can know the duration only by
/// measuring it: a timing check compares what the learner measured with this.
pub fn secret_duration(ctx: &Context, role: &str, k: u64, min: Duration, max: Duration) -> Duration {
    let role = role.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3));
    let bits = u64::from_le_bytes(
        seed_bytes(ctx.seed ^ role ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15))[..8].try_into().unwrap(),
    );
    let unit = (bits >> 11) as f64 / (1u64 << 53) as f64;
    let (lo, hi) = (min.as_secs_f64().ln(), max.as_secs_f64().ln());
    Duration::from_secs_f64((lo + unit * (hi - lo)).exp())
}

/// Spreads a 64-bit seed over the 32 bytes ChaCha wants (SplitMix64, so nearby seeds differ).
fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut state = seed;
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_judge_does_not_shrink_and_the_learner_s_run_does() {
        assert_eq!(shrink_limit(true), 0);
        assert!(shrink_limit(false) > 0);
    }

    #[test]
    fn a_failing_property_reports_the_shrunk_input() {
        let ctx = Context { seed: 3 };
        let failure = for_all(&ctx, 64, 0u32..1000, |n| {
            if n >= 10 { Err(Failure::fail(format!("{n} is too large"))) } else { Ok(()) }
        })
        .unwrap_err();
        let Failure::Fail(message) = failure else { panic!("expected a failure") };
        assert!(message.contains("10 is too large"), "{message}");
        assert!(message.contains("seed 3"), "{message}");
    }

    #[test]
    fn secret_durations_stay_in_range_and_vary() {
        let (min, max) = (Duration::from_millis(10), Duration::from_millis(160));
        let draws: Vec<Duration> =
            (0..200).map(|k| secret_duration(&Context { seed: 5 }, "run", k, min, max)).collect();
        assert!(draws.iter().all(|&d| d >= min && d <= max));
        let short = draws.iter().filter(|&&d| d < Duration::from_millis(40)).count();
        assert!((70..130).contains(&short), "{short} of 200 below the geometric middle");
        let other = secret_duration(&Context { seed: 6 }, "run", 0, min, max);
        assert_ne!(draws[0], other);
        assert_eq!(draws[3], secret_duration(&Context { seed: 5 }, "run", 3, min, max));
    }

    #[test]
    fn the_same_seed_draws_the_same_cases() {
        let draw = |seed| {
            let seen = std::cell::RefCell::new(Vec::new());
            for_all(&Context { seed }, 8, any::<u64>(), |v| {
                seen.borrow_mut().push(v);
                Ok(())
            })
            .unwrap();
            seen.into_inner()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }
}
