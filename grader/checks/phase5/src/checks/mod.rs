//! The phase 5 checks, written once against `crate::subject`: the learner's crate in the
//! `phase5-exercises` runner, the reference crate in `phase5-solutions`.
//!
//! Nothing the learner's code measures is taken on trust: timers are checked against work of a
//! known duration, and every timing that decides a verdict is taken again by the judge, in a
//! process that runs no learner code.

mod challenge;

use grader_harness::Check;

/// Every check of the phase, with the id the phase data gives it.
pub const CHECKS: &[Check] = &[
    Check { id: "challenge_matches_block", run: challenge::challenge_matches_block },
    Check { id: "challenge_is_faster", run: challenge::challenge_is_faster },
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_check_in_the_phase_data_has_one_function() {
        grader_harness::runner::validate(&checks_phase5::PHASE, super::CHECKS).unwrap();
    }
}
