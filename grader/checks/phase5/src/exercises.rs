//! The phase 5 check runner for the learner's crate, `exercises/phase5-benchmarking`.

use exercise as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase5::PHASE, checks::CHECKS)
}
