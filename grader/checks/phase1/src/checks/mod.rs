//! The phase 1 checks, written once against `crate::subject`: the learner's crate in the
//! `phase1-exercises` runner, the reference crate in `phase1-solutions`.
//!
//! Checks never trust what the learner's code says about itself: they hand it instrumented
//! backends ([`support::Probe`]) whose behaviour the grader knows, and compare against the
//! engine's own capture and interpreter.

mod compare;
mod deny_ops;
mod interpreter;
mod latency;
mod recording;
mod support;

use grader_harness::Check;

/// Every check of the phase, with the id the phase data gives it.
pub const CHECKS: &[Check] = &[
    Check { id: "reports_every_backend", run: compare::reports_every_backend },
    Check { id: "differences_are_measured", run: compare::differences_are_measured },
    Check { id: "median_is_the_middle", run: latency::median_is_the_middle },
    Check { id: "one_compile_then_cache_hits", run: latency::one_compile_then_cache_hits },
    Check { id: "timings_are_real", run: latency::timings_are_real },
    Check { id: "waits_for_the_gpu", run: latency::waits_for_the_gpu },
    Check { id: "runs_the_mlp_graph", run: interpreter::runs_the_mlp_graph },
    Check { id: "matches_fx_interpreter_on_random_graphs", run: interpreter::matches_fx_interpreter_on_random_graphs },
    Check { id: "rejects_a_wrong_input_count", run: interpreter::rejects_a_wrong_input_count },
    Check { id: "backend_runs_compiled_functions", run: interpreter::backend_runs_compiled_functions },
    Check { id: "keeps_one_graph_per_compile", run: recording::keeps_one_graph_per_compile },
    Check { id: "graphs_print_as_captured", run: recording::graphs_print_as_captured },
    Check { id: "separate_backends_do_not_share", run: recording::separate_backends_do_not_share },
    Check { id: "refuses_a_denied_op", run: deny_ops::refuses_a_denied_op },
    Check { id: "allows_graphs_without_denied_ops", run: deny_ops::allows_graphs_without_denied_ops },
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_check_in_the_phase_data_has_one_function() {
        grader_harness::runner::validate(&checks_phase1::PHASE, super::CHECKS).unwrap();
    }
}
