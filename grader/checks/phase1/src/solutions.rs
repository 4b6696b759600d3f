//! The phase 1 check runner for the reference crate, `solutions/phase1-backends`.

use solution as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase1::PHASE, checks::CHECKS)
}
