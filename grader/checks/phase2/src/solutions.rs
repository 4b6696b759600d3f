//! The phase 2 check runner for the reference crate, `solutions/phase2-capture`.

use solution as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase2::PHASE, checks::CHECKS)
}
