//! The phase 4 check runner for the reference crate, `solutions/phase4-codegen`.

use solution as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase4::PHASE, checks::CHECKS)
}
