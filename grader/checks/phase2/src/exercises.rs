//! The phase 2 check runner for the learner's crate, `exercises/phase2-capture`.

use exercise as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase2::PHASE, checks::CHECKS)
}
