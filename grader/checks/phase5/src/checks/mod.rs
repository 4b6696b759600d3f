//! The phase 5 checks, written once against `crate::subject`: the learner's crate in the
//! `phase5-exercises` runner, the reference crate in `phase5-solutions`.
//!
//! Nothing the learner's code measures is taken on trust: the timer is checked against work of a
//! known duration and the engine's own timer, and every time the sweep and the break-even
//! measure is measured again by the judge, in a process that runs no learner code.

mod break_even;
mod challenge;
mod modes;
mod profile;
mod support;
mod sweep;
mod timer;

use grader_harness::Check;

/// Every check of the phase, with the id the phase data gives it.
pub const CHECKS: &[Check] = &[
    Check { id: "quantile_matches_the_engine", run: timer::quantile_matches_the_engine },
    Check { id: "stopping_rule_is_followed", run: timer::stopping_rule_is_followed },
    Check { id: "times_known_work", run: timer::times_known_work },
    Check { id: "crossover_is_found", run: sweep::crossover_is_found },
    Check { id: "plot_shows_both_series", run: sweep::plot_shows_both_series },
    Check { id: "sweep_times_the_mlp", run: sweep::sweep_times_the_mlp },
    Check { id: "break_even_is_counted", run: break_even::break_even_is_counted },
    Check { id: "costs_are_measured", run: break_even::costs_are_measured },
    Check { id: "fastest_is_picked", run: modes::fastest_is_picked },
    Check { id: "modes_are_measured", run: modes::modes_are_measured },
    Check { id: "challenge_matches_block", run: challenge::challenge_matches_block },
    Check { id: "challenge_is_faster", run: challenge::challenge_is_faster },
    Check { id: "top_kernels_are_named", run: profile::top_kernels_are_named },
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_check_in_the_phase_data_has_one_function() {
        grader_harness::runner::validate(&checks_phase5::PHASE, super::CHECKS).unwrap();
    }
}
