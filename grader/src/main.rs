//! `grader`: checks the workbook's exercises. Run it as `cargo grader ...` from anywhere in the
//! workbook, or install it with `cargo install --path grader`. See the library docs for how it
//! works and how to add a phase.

mod commands;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Checks your exercises: builds a phase, runs every check in its own process, prints a table
/// with the next step.
#[derive(Parser)]
#[command(name = "grader", version)]
struct Cli {
    /// The workbook's root directory (default: found from the current directory upward, or
    /// $GRADER_ROOT).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

/// Options shared by the commands that run checks.
#[derive(clap::Args, Clone, Debug)]
pub struct CheckOptions {
    /// Check the reference solutions instead of your exercises.
    #[arg(long)]
    solutions: bool,
    /// Seed for random inputs; the same seed draws the same cases (default: a fresh one each run,
    /// printed so that a failure can be repeated).
    #[arg(long)]
    seed: Option<u64>,
    /// Build the checks with --release (for timing checks on a GPU).
    #[arg(long)]
    release: bool,
    /// Run runners from a directory made by `grader pack` instead of building them (no Rust
    /// needed). Used automatically when the grader itself lies in such a directory.
    #[arg(long, value_name = "DIR")]
    prebuilt: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Check a phase (`phase1`) or `all`.
    Check {
        /// `phase1`, ..., or `all`.
        phase: String,
        #[command(flatten)]
        options: CheckOptions,
        #[command(flatten)]
        output: commands::check::Output,
    },
    /// Your progress: every exercise with its status at the last check.
    List,
    /// The next hint for an exercise (one more each time).
    Hint {
        /// The exercise, as `grader list` names it.
        exercise: String,
    },
    /// Restore an exercise's stub; your version is kept as a backup in .grader/backups/.
    Reset {
        /// The exercise, as `grader list` names it.
        exercise: String,
        /// The git revision to take the stub from (default: the newest one holding a `todo!()`).
        #[arg(long, value_name = "REV")]
        from: Option<String>,
    },
    /// Re-check a phase each time you save (or press Enter).
    Watch {
        /// `phase1`, ..., or `all` (default: the first phase not finished at the last check).
        phase: Option<String>,
        #[command(flatten)]
        options: CheckOptions,
        /// Poll files for changes instead of waiting for file events (for some containers and
        /// network file systems).
        #[arg(long)]
        poll: bool,
    },
    /// Is this machine ready? Rust, a C compiler, mdbook, ...
    Doctor,
    /// Grading that counts: re-grade learners' checkouts in a clean copy of this workbook (its last
    /// commit, only their exercises/*/src, a fresh target directory), writing one results file per
    /// learner into DIR for `grader rollup`.
    Regrade {
        /// The learners' workbook checkouts.
        #[arg(required = true)]
        learners: Vec<PathBuf>,
        /// Where the results files go (one per learner, named after its checkout's folder).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Build in DIR instead of a fresh target directory per learner, with each clean copy made
        /// at DIR/clean-copy (faster for a class: only the learners' crates are built again; DIR
        /// then holds builds of every learner's code).
        #[arg(long, value_name = "DIR")]
        target_dir: Option<PathBuf>,
    },
    /// The workbook's own checks, for its authors and CI.
    Dev {
        #[command(subcommand)]
        command: DevCommand,
    },
    /// A class's results in one table: per learner and phase, exercises done, speed ratios and
    /// the last check time, then the checks failing most.
    Rollup {
        /// Results files of `check --json`, directories holding them, or learners' checkouts.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Also write the table as CSV to FILE.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
        /// How many of the most failing checks to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
    },
    /// Build release runners and the grader into DIR, to check on a machine without Rust.
    Pack {
        /// `phase1`, ..., or `all` (the default): the phases to pack.
        #[arg(default_value = "all")]
        phase: String,
        /// Where to put them.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Pack runners for the reference solutions instead of your exercises.
        #[arg(long)]
        solutions: bool,
    },
}

/// The workbook's own checks.
#[derive(Subcommand)]
enum DevCommand {
    /// Every check passes on the solutions, none on the stubs, a compile error stays in its
    /// phase, and every mutant a phase declares (grader/checks/*/src/phase.rs) is caught.
    Check {
        /// Leave out this phase's mutants (repeatable), for a quicker run: each mutant rebuilds its
        /// phase's runner (`grader dev mutants PHASE` runs them alone).
        #[arg(long, value_name = "PHASE")]
        skip_mutants: Vec<String>,
    },
    /// Only the mutants (of one phase, or all).
    Mutants {
        /// `phase1`, ...; all phases when left out.
        phase: Option<String>,
    },
    /// Write exercises/*/src from solutions/*/src (the marked solution regions become `todo!()`)
    /// and grader/shipped-stubs.sha256.
    Stubs {
        /// Write nothing: show each file that differs from what would be written, and fail if any
        /// does.
        #[arg(long)]
        check: bool,
    },
    /// On a GPU: time the reference solution's challenge block and the given naive block made one
    /// graph against the given block, as the judge does, and print the speedups that phase 5's
    /// `GPU_SPEEDUP` bar is set from.
    ChallengeBar {
        /// How many runs of each.
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Print JSON (every run, and the suggested bar) instead of lines.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // The sandbox trampoline (see `grader::sandbox`) is no command for people: it is handled
    // before the command line is parsed, and never returns when it works.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == grader::sandbox::TRAMPOLINE) {
        let Err(error) = grader::sandbox::trampoline(&args[1..]);
        eprintln!("error: {error:#}");
        return ExitCode::from(97);
    }
    // Cargo runs the grader as its `RUSTC_WRAPPER` while the grader builds (`grader::compile`).
    if std::env::var_os(grader::compile::CONFIG_VARIABLE).is_some() {
        return grader::compile::wrapper(&args).unwrap_or_else(|error| {
            eprintln!("error: the grader's compile wrapper: {error:#}");
            ExitCode::from(101)
        });
    }
    let cli = Cli::parse();
    let root = cli.root.as_deref();
    let result = match cli.command {
        Command::Check { phase, options, output } => commands::check::run(root, &phase, &options, &output),
        Command::List => commands::list::run(root),
        Command::Hint { exercise } => commands::hint::run(root, &exercise),
        Command::Reset { exercise, from } => commands::reset::run(root, &exercise, from.as_deref()),
        Command::Watch { phase, options, poll } => commands::watch::run(root, phase.as_deref(), &options, poll),
        Command::Doctor => commands::doctor::run(root),
        Command::Regrade { learners, out, target_dir } => {
            commands::regrade::run(root, &learners, &out, target_dir.as_deref())
        }
        Command::Dev { command: DevCommand::Check { skip_mutants } } => commands::dev::check(root, &skip_mutants),
        Command::Dev { command: DevCommand::Mutants { phase } } => commands::dev::mutants(root, phase.as_deref()),
        Command::Dev { command: DevCommand::Stubs { check } } => commands::stubs::run(root, check),
        Command::Dev { command: DevCommand::ChallengeBar { runs, json } } => {
            commands::dev::challenge_bar(root, runs, json)
        }
        Command::Rollup { paths, csv, top } => commands::rollup::run(&paths, csv.as_deref(), top),
        Command::Pack { phase, out, solutions } => commands::pack::run(root, &phase, &out, solutions),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
