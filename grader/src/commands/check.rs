//! `grader check <phase|all>`: build each phase's runner, run its checks one process each,
//! report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use grader::report::PhaseReport;
use grader::results::{self, Stamp};
use grader::runners::{Pack, Runners};
use grader::sandbox::Support;
use grader::state::State;
use grader::verdict::fresh_seed;
use grader::workbook::Workbook;
use grader::{grade, junit, phases};
use grader_harness::Subject;

use crate::CheckOptions;

/// Where the results go besides the table.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Output {
    /// Print JSON for tools instead of the table: one object for a phase, an array of them for
    /// `all`, each stamped with the format version, the time and the learner.
    #[arg(long)]
    pub json: bool,
    /// Also write the results as JUnit XML to FILE (one testcase per check), for CI.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// The learner's name in the JSON and JUnit results (default: the workbook's git user.name).
    #[arg(long, value_name = "NAME")]
    pub learner: Option<String>,
    /// Show each check's whole message in the table, instead of its first line cut to fit.
    #[arg(long, short)]
    pub verbose: bool,
}

/// Checks the named phases; exit code 1 when a required check did not pass.
pub fn run(root: Option<&Path>, phase: &str, options: &CheckOptions, output: &Output) -> Result<ExitCode> {
    let json = output.json;
    let (runners, workbook, subject) = runners(root, options)?;
    let mut phases = phases::select(phase)?;
    // `all` from a pack of some phases (`grader pack phase5`) is the phases it holds.
    if let (Runners::Prebuilt(pack), "all") = (&runners, phase) {
        phases.retain(|p| pack.manifest.phases.contains_key(p.name));
    }
    if let Some(workbook) = &workbook {
        State::of(workbook).remember_pristine(workbook)?;
    }
    let seed = options.seed.unwrap_or_else(fresh_seed);
    let launcher = std::env::current_exe().context("cannot find the grader's own executable")?;
    let cache = match &workbook {
        Some(workbook) => workbook.state_dir().join("learner-cache"),
        None => std::env::temp_dir().join("grader-learner-cache"),
    };
    if !json {
        eprintln!(
            "Seed {seed} (repeat this run with --seed {seed}); learner code runs in a sandbox: {}",
            Support::probe().describe()
        );
    }
    let mut reports = Vec::new();
    for phase in &phases {
        if !json {
            eprintln!("Checking {} ({subject})...", phase.name);
        }
        let report = grade::phase(&runners, workbook.as_ref(), phase, subject, seed, &launcher, &cache);
        if !json {
            println!("{}", report.render(phase, output.verbose));
        }
        reports.push(report);
    }
    if json || output.junit.is_some() {
        let learner =
            output.learner.clone().or_else(|| workbook.as_ref().and_then(|w| results::git_user(w.root(), false)));
        let stamp = Stamp::now(learner);
        if json {
            println!("{}", results::to_json(&reports, &stamp, phase != "all")?);
        }
        if let Some(path) = &output.junit {
            std::fs::write(path, junit::render(&reports, &stamp))
                .with_context(|| format!("cannot write the JUnit results to {}", path.display()))?;
        }
    }
    if let (Some(workbook), Subject::Exercises) = (&workbook, subject) {
        State::of(workbook).save_results(&reports)?;
    }
    Ok(if reports.iter().all(PhaseReport::passed) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Where runners come from, and which subject they test: a pack (named, or the one the grader
/// lies in) tests what was packed; cargo builds the exercises, or the solutions with
/// `--solutions`. A pack needs no workbook; cargo does.
pub fn runners(root: Option<&Path>, options: &CheckOptions) -> Result<(Runners, Option<Workbook>, Subject)> {
    let pack = match &options.prebuilt {
        Some(dir) => Some(Pack::open(dir)?),
        None => Pack::beside_executable(),
    };
    match pack {
        Some(pack) => {
            if options.solutions {
                pack.expect_subject(Subject::Solutions)?;
            }
            let subject = pack.manifest.subject;
            Ok((Runners::Prebuilt(pack), Workbook::find(root).ok(), subject))
        }
        None => {
            let workbook = Workbook::find(root)?;
            let subject = if options.solutions { Subject::Solutions } else { Subject::Exercises };
            Ok((Runners::Cargo { workbook: workbook.clone(), release: options.release }, Some(workbook), subject))
        }
    }
}
