//! The phase 4 checks, written once against `crate::subject`: the learner's crate in the
//! `phase4-exercises` runner, the reference crate in `phase4-solutions`.
//!
//! Checks never trust what the learner's code says about itself: summaries are compared with the
//! engine's own output code, fusion decisions are plugged into the real scheduler (which rejects
//! an illegal fusion), and printed kernels are compiled and run against eager execution.

mod fusion;
mod inspect;
mod pointwise;
mod reduction;
mod support;

use grader_harness::Check;

/// Every check of the phase, with the id the phase data gives it.
pub const CHECKS: &[Check] = &[
    Check { id: "names_are_read", run: inspect::names_are_read },
    Check { id: "kernels_are_summarised", run: inspect::kernels_are_summarised },
    Check { id: "decides_known_cases", run: fusion::decides_known_cases },
    Check { id: "refusals_give_reasons", run: fusion::refusals_give_reasons },
    Check { id: "fuses_as_much_as_inductor", run: fusion::fuses_as_much_as_inductor },
    Check { id: "pointwise_c_matches_eager", run: pointwise::pointwise_c_matches_eager },
    Check { id: "pointwise_cuda_matches_eager", run: pointwise::pointwise_cuda_matches_eager },
    Check { id: "pointwise_cuda_bandwidth", run: pointwise::pointwise_cuda_bandwidth },
    Check { id: "reduction_c_matches_eager", run: reduction::reduction_c_matches_eager },
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_check_in_the_phase_data_has_one_function() {
        grader_harness::runner::validate(&checks_phase4::PHASE, super::CHECKS).unwrap();
    }
}
