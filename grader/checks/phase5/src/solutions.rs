//! The phase 5 check runner for the reference crate, `solutions/phase5-benchmarking`.

use solution as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase5::PHASE, checks::CHECKS)
}
