//! The phase 3 check runner for the reference crate, `solutions/phase3-graph-breaks`.

use solution as subject;

#[path = "checks/mod.rs"]
mod checks;

fn main() -> std::process::ExitCode {
    grader_harness::runner::main(&checks_phase3::PHASE, checks::CHECKS)
}
