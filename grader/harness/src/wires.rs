//! The engine's trip wires ([`engine::wires`]), armed while a check runs: the engine items its
//! exercise forbids ([`Forbidden`]) end the runner's process if they run, however the learner's
//! code reached them, and the grader reports the check as failed with the reason the exercise
//! gives.
//!
//! A runner runs one check per process. Before any learner code can run, [`install`] hooks this
//! module into the engine (the engine takes the first hook only, and a learner's crate is built
//! with `-F unsafe_code`, so it has no code that runs before `main`), and [`arm`] sets the items
//! of the check's exercise. The learner's crate does not depend on this crate, so its code cannot
//! name anything here.
//!
//! The check's own code uses the same engine items to compute what the learner's answers are
//! compared with: it does so inside [`exempt`], which lets this thread pass the wires; and where
//! that code calls the learner's code in turn (a printer or a fusion policy handed to a
//! compilation the check makes), the call goes through [`learner`], which arms them again. A
//! wire tripped in the judge's process, which runs the reference solution, is a bug in the
//! workbook, and the grader says so.

use std::cell::Cell;
use std::sync::OnceLock;

use engine::wires::Wire;

use crate::phase::Forbidden;

/// The exit code of a process whose wire tripped; the grader tells it from any other exit by the
/// line starting with [`MARKER`] it prints on stderr just before.
pub const EXIT_CODE: i32 = 86;

/// How the line that reports a tripped wire starts.
pub const MARKER: &str = "grader-wire: ";

/// The items armed in this process: the forbidden items of the running check's exercise.
static ARMED: OnceLock<Vec<&'static Forbidden>> = OnceLock::new();

thread_local! {
    /// Whether this thread is running the check's own code, inside [`exempt`].
    static EXEMPT: Cell<bool> = const { Cell::new(false) };
}

/// Hooks the wires into the engine. Returns whether this hook is the one installed.
pub fn install() -> bool {
    engine::wires::install(on_trip)
}

/// Arms `forbidden` for the rest of this process's life.
pub fn arm(forbidden: Vec<&'static Forbidden>) {
    let _ = ARMED.set(forbidden);
}

/// Whether forbidden `path` (`fx::Interpreter`, `engine::bench`, `.op_count`, `Eager`; see
/// [`Forbidden::path`]) names `wire`: the wire's item, or an item in a module it names.
pub fn names(path: &str, wire: Wire) -> bool {
    let path = path.trim_start_matches("engine::").trim_start_matches('.');
    let item = wire.path();
    item == path || item.ends_with(&format!("::{path}")) || item.starts_with(&format!("{path}::"))
}

/// Runs `f`, the check's own code, past the wires (on this thread only).
pub fn exempt<T>(f: impl FnOnce() -> T) -> T {
    with_exemption(true, f)
}

/// Runs `f`, the learner's code, with the wires armed again, also when called from inside
/// [`exempt`].
pub fn learner<T>(f: impl FnOnce() -> T) -> T {
    with_exemption(false, f)
}

fn with_exemption<T>(exempt: bool, f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            EXEMPT.with(|e| e.set(self.0));
        }
    }
    let _restore = Restore(EXEMPT.with(|e| e.replace(exempt)));
    f()
}

/// The engine's hook: ends the process when an armed wire trips outside [`exempt`].
fn on_trip(wire: Wire) {
    if EXEMPT.with(Cell::get) {
        return;
    }
    let Some(item) = ARMED.get().and_then(|armed| armed.iter().find(|f| names(f.path, wire))) else { return };
    let named = item.path.trim_start_matches("engine::").trim_start_matches('.');
    let ran = if wire.path() == named || wire.path().ends_with(&format!("::{named}")) {
        format!("`{}`", item.path)
    } else {
        format!("`{}`, part of `{}`", wire.path(), item.path)
    };
    eprintln!("\n{MARKER}your code ran the engine's {ran}, which is off limits here: {}", item.why);
    std::process::exit(EXIT_CODE);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_paths_name_their_wires() {
        assert!(names("fx::Interpreter", Wire::FxInterpreter));
        assert!(names("engine::bench", Wire::Bench) && names("engine::bench", Wire::Baseline));
        assert!(names(".op_count", Wire::ExplainOpCount) && names(".op_count", Wire::GraphOpCount));
        assert!(names("Eager", Wire::EagerBackend) && !names("Eager", Wire::AotEagerBackend));
        assert!(names("c::kernel", Wire::CKernel) && !names("c::kernel", Wire::CudaKernel));
        assert!(names("Spelling", Wire::Spelling) && !names("Spelling", Wire::ScalarSpelling));
        assert!(!names("scheduler::can_fuse", Wire::CKernel));
        assert!(names("dynamo::compile", Wire::DynamoCache) && !names("dynamo::compile", Wire::CompileRegion));
        assert!(names(".with_dynamic_dims", Wire::WithDynamicDims) && names(".bind_symbols", Wire::BindSymbols));
        assert!(names(".dynamic_placeholder", Wire::DynamicPlaceholder));
        assert!(!names(".dynamic_placeholder", Wire::AddDynamicPlaceholder));
        assert!(names(".add_dynamic_placeholder", Wire::AddDynamicPlaceholder));
        assert!(!names(".add_dynamic_placeholder", Wire::DynamicPlaceholder));
    }
}
