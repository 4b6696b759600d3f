//! The phase 4 check runner for the learner's crate, `exercises/phase4-codegen`.

use exercise as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase4::PHASE, checks::CHECKS)
}
