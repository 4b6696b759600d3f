//! The phase 2 checks, written once against `crate::subject`: the learner's crate in the
//! `phase2-exercises` runner, the reference crate in `phase2-solutions`.
//!
//! Each check compares the learner's answer with the grader's own reading of the same graph
//! (the engine's `explain`, the recorded shapes, its own liveness), and every graph pass is run
//! against the original on the same inputs.

mod cse;
mod dead_code;
mod explain_report;
mod line_table;
mod shape_prop;
mod support;

use grader_harness::Check;

/// Every check of the phase, with the id the phase data gives it.
pub const CHECKS: &[Check] = &[
    Check { id: "summarizes_one_graph", run: explain_report::summarizes_one_graph },
    Check { id: "summarizes_graphs_and_breaks", run: explain_report::summarizes_graphs_and_breaks },
    Check { id: "groups_the_captured_graph", run: line_table::groups_the_captured_graph },
    Check { id: "groups_the_decomposed_graph", run: line_table::groups_the_decomposed_graph },
    Check { id: "groups_random_graphs", run: line_table::groups_random_graphs },
    Check { id: "broadcast_follows_the_rules", run: shape_prop::broadcast_follows_the_rules },
    Check { id: "propagates_every_node", run: shape_prop::propagates_every_node },
    Check { id: "propagates_new_input_shapes", run: shape_prop::propagates_new_input_shapes },
    Check { id: "rejects_bad_input_shapes", run: shape_prop::rejects_bad_input_shapes },
    Check { id: "removes_unused_nodes", run: dead_code::removes_unused_nodes },
    Check { id: "dead_code_keeps_outputs_on_random_graphs", run: dead_code::keeps_outputs_on_random_graphs },
    Check { id: "merges_repeated_expressions", run: cse::merges_repeated_expressions },
    Check { id: "cse_keeps_outputs_on_random_graphs", run: cse::keeps_outputs_on_random_graphs },
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_check_in_the_phase_data_has_one_function() {
        grader_harness::runner::validate(&checks_phase2::PHASE, super::CHECKS).unwrap();
    }
}
