//! The phase 1 check runner for the learner's crate, `exercises/phase1-backends`.

use exercise as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase1::PHASE, checks::CHECKS)
}
