//! The phase 3 checks, written once against `crate::subject`: the learner's crate in the
//! `phase3-exercises` runner, the reference crate in `phase3-solutions`.
//!
//! Every fixed model is checked three ways: `explain` finds one graph and no break, the model
//! compiles with `fullgraph(true)`, and its outputs equal the original's (run eagerly) on random
//! inputs, including inputs that take each side of every branch.

mod branch;
mod break_cost;
mod custom_op;
mod logging;
mod round_trip;
mod support;

use grader_harness::Check;

/// Every check of the phase, with the id the phase data gives it.
pub const CHECKS: &[Check] = &[
    Check { id: "gated_is_one_graph", run: branch::gated_is_one_graph },
    Check { id: "gated_matches_the_original", run: branch::gated_matches_the_original },
    Check { id: "normalized_is_one_graph", run: logging::normalized_is_one_graph },
    Check { id: "still_logs_when_eager", run: logging::still_logs_when_eager },
    Check { id: "normalized_matches_the_original", run: logging::normalized_matches_the_original },
    Check { id: "standardized_is_one_graph", run: round_trip::standardized_is_one_graph },
    Check { id: "standardized_matches_the_original", run: round_trip::standardized_matches_the_original },
    Check { id: "no_recompile_for_new_values", run: round_trip::no_recompile_for_new_values },
    Check { id: "the_kernel_computes_log_clip", run: custom_op::the_kernel_computes_log_clip },
    Check { id: "clipped_is_one_graph_with_the_op", run: custom_op::clipped_is_one_graph_with_the_op },
    Check { id: "clipped_matches_the_original", run: custom_op::clipped_matches_the_original },
    Check { id: "counts_the_graphs", run: break_cost::counts_the_graphs },
    Check { id: "times_are_medians_of_real_calls", run: break_cost::times_are_medians_of_real_calls },
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_check_in_the_phase_data_has_one_function() {
        grader_harness::runner::validate(&checks_phase3::PHASE, super::CHECKS).unwrap();
    }
}
