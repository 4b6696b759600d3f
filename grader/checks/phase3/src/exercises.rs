//! The phase 3 check runner for the learner's crate, `exercises/phase3-graph-breaks`.

use exercise as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase3::PHASE, checks::CHECKS)
}
