//! A phase declared once. Each check crate (`grader/checks/phaseN/`) holds:
//!
//! - `src/phase.rs`, the declaration: `pub const PHASE: Phase` with its exercises, hints, book
//!   sections and [mutants](crate::Mutant). A check is named by its function,
//!   `crate::checks![timer::quantile_matches_the_engine, timer::times_known_work.timed()]`, so
//!   its id is the function's name, typed once where the function is written; a mutant names the
//!   checks it must fail the same way, `crate::check_ids![timer::times_known_work]`.
//! - `src/lib.rs`, [`phase_data!()`](crate::phase_data): the library the grader links. It compiles
//!   the declaration with the ids only and no check code, so it builds even when the learner's
//!   crate does not.
//! - `src/exercises.rs` and `src/solutions.rs`, [`runner!(exercise)`](crate::runner) and
//!   `runner!(solution)`: the two runner binaries. Each compiles the checks in `src/checks/`
//!   against its subject and the same declaration with every check's function linked, so a name
//!   that is not a check function is a compile error there.
//!
//! The check functions are `pub` in their modules of `src/checks/` (`pub mod timer;` in
//! `src/checks/mod.rs`) and refer to the crate under test as `crate::subject`.

/// The library of a check crate: its `src/phase.rs` as module `phase`, compiled with the check
/// ids only, and its `PHASE`.
#[macro_export]
macro_rules! phase_data {
    () => {
        mod phase;
        pub use phase::PHASE;
        use $crate::__check_ids as check_ids;
        use $crate::__check_specs as checks;
    };
}

/// A runner binary of a check crate, for the crate under test `$subject` (the `exercise` or
/// `solution` dependency): the checks of `src/checks/` compiled against it, the declaration of
/// `src/phase.rs` with every check's function linked, and a `main` running one check per process
/// ([`runner::main_of`](crate::runner::main_of)).
#[macro_export]
macro_rules! runner {
    ($subject:ident) => {
        use $subject as subject;
        mod checks;
        mod phase;
        use $crate::__linked_check_ids as check_ids;
        use $crate::__linked_check_specs as checks;

        fn main() -> ::std::process::ExitCode {
            $crate::runner::main_of(&phase::PHASE)
        }
    };
}

/// `crate::checks![module::check, ...]` in a phase's library: a [`CheckSpec`](crate::CheckSpec)
/// per check, its id the function's name, with the modifiers written after it
/// (`.timed()`, `.with_timeout(300)`).
#[doc(hidden)]
#[macro_export]
macro_rules! __check_specs {
    ($($module:ident :: $check:ident $(. $modifier:ident ( $($arg:expr),* ))*),* $(,)?) => {
        &[$($crate::CheckSpec::new(stringify!($check)) $(. $modifier($($arg),*))*),*]
    };
}

/// `crate::checks![...]` in a runner: as [`__check_specs`], each spec with its function.
#[doc(hidden)]
#[macro_export]
#[allow(clippy::crate_in_macro_def, reason = "the check functions are the calling runner's own")]
macro_rules! __linked_check_specs {
    ($($module:ident :: $check:ident $(. $modifier:ident ( $($arg:expr),* ))*),* $(,)?) => {
        &[$(
            $crate::CheckSpec::new(stringify!($check)) $(. $modifier($($arg),*))*
                .runs(crate::checks::$module::$check)
        ),*]
    };
}

/// `crate::check_ids![module::check, ...]` in a phase's library: the checks' ids.
#[doc(hidden)]
#[macro_export]
macro_rules! __check_ids {
    ($($module:ident :: $check:ident),* $(,)?) => {
        &[$(stringify!($check)),*]
    };
}

/// `crate::check_ids![...]` in a runner: the ids, each proven to name a check function.
#[doc(hidden)]
#[macro_export]
#[allow(clippy::crate_in_macro_def, reason = "the check functions are the calling runner's own")]
macro_rules! __linked_check_ids {
    ($($module:ident :: $check:ident),* $(,)?) => {
        &[$({
            let _: fn(&$crate::Context) -> $crate::CheckResult = crate::checks::$module::$check;
            stringify!($check)
        }),*]
    };
}
