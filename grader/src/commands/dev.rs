//! `grader dev check`: the workbook's own checks, for its authors and CI (as rustlings' `dev
//! check`): every check passes on the solutions and records answers that depend on the seed (the
//! reference, run again with another seed, records other answers), nothing passes on the stubs
//! (every required check reads "not started" and points at its stub), a compile error in one
//! phase is reported with its `file:line` and spreads to no other, and every deliberate mistake a
//! phase declares ([`Phase::mutants`]) is caught by the checks it names (`grader dev mutants`).
//!
//! The learner's files it changes on the way are restored byte for byte, whatever happens: a
//! Ctrl-C (or SIGTERM) stops the run before its next grading, and the files are put back on the
//! way out; a second one ends it at once, leaving them to `git checkout`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use grader::grade;
use grader::isolation::Run;
use grader::phases::PHASES;
use grader::report::PhaseReport;
use grader::runners::Runners;
use grader::verdict::fresh_seed;
use grader::workbook::Workbook;
use grader_harness::transcript::{Entry, Recorded};
use grader_harness::{Mutant, Outcome, Phase, Record, Status, Subject};

/// Grading that the `dev` checks run, in this process, with one seed for the whole run.
struct Grader {
    workbook: Workbook,
    runners: Runners,
    seed: u64,
    launcher: PathBuf,
    cache: PathBuf,
    /// Set by the first Ctrl-C or SIGTERM.
    stop: Arc<AtomicBool>,
}

impl Grader {
    fn new(root: Option<&Path>) -> Result<Grader> {
        let workbook = Workbook::find(root)?;
        let runners = Runners::Cargo { workbook: workbook.clone(), release: false };
        let launcher = std::env::current_exe().context("cannot find the grader's own executable")?;
        let cache = workbook.state_dir().join("learner-cache");
        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // The second signal, with the flag already set, ends the process as if unhandled.
            signal_hook::flag::register_conditional_default(signal, stop.clone())
                .and_then(|_| signal_hook::flag::register(signal, stop.clone()))
                .context("cannot handle Ctrl-C")?;
        }
        Ok(Grader { workbook, runners, seed: fresh_seed(), launcher, cache, stop })
    }

    /// An error once Ctrl-C or SIGTERM has come: the caller returns it, and the files it changed
    /// are restored as its [`Restore`] drops.
    fn go_on(&self) -> Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            bail!("interrupted: stopped before the next grading; the exercise files it changed are restored");
        }
        Ok(())
    }

    fn grade(&self, phase: &Phase, subject: Subject) -> Result<PhaseReport> {
        self.go_on()?;
        Ok(grade::phase(&self.runners, Some(&self.workbook), phase, subject, self.seed, &self.launcher, &self.cache))
    }
}

/// Files put back as they were when this is dropped, on every exit path.
struct Restore(Vec<(PathBuf, Vec<u8>)>);

impl Restore {
    fn keep(paths: impl IntoIterator<Item = PathBuf>) -> Result<Restore> {
        let kept = paths
            .into_iter()
            .map(|p| {
                std::fs::read(&p)
                    .map(|bytes| (p.clone(), bytes))
                    .with_context(|| format!("cannot read {}", p.display()))
            })
            .collect::<Result<_>>()?;
        Ok(Restore(kept))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        for (path, bytes) in &self.0 {
            if let Err(e) = std::fs::write(path, bytes) {
                eprintln!("error: could not restore {}: {e}; its content is in git", path.display());
            }
        }
    }
}

/// `grader dev check`, leaving out the mutants of the phases in `skip_mutants`.
pub fn check(root: Option<&Path>, skip_mutants: &[String]) -> Result<ExitCode> {
    for name in skip_mutants {
        grader::phases::select(name)?;
    }
    let grader = Grader::new(root)?;
    eprintln!("Seed {}", grader.seed);
    let mut problems = Vec::new();
    for phase in PHASES {
        let report = grader.grade(phase, Subject::Solutions)?;
        problems.extend(
            report
                .checks
                .iter()
                .filter(|c| !matches!(c.status, Status::Pass | Status::Skipped))
                .map(|c| format!("solutions {}/{} is {}: {}", phase.name, c.id, c.status, brief(c))),
        );
        println!("solutions, {}: {}", phase.name, summary(&report));
        problems.extend(answers_depend_on_the_seed(&grader, phase, &report)?);
        let report = grader.grade(phase, Subject::Exercises)?;
        for c in &report.checks {
            let expected = c.status == Status::NotStarted && c.location.is_some() || c.status == Status::Skipped;
            if !expected {
                problems.push(format!("stub {}/{} is {}: {}", phase.name, c.id, c.status, brief(c)));
            }
        }
        println!("stubs, {}: {}", phase.name, summary(&report));
    }
    problems.extend(a_compile_error_stays_in_its_phase(&grader)?);
    for phase in PHASES.iter().filter(|p| !skip_mutants.iter().any(|s| s == p.name)) {
        problems.extend(mutants_are_caught(&grader, Some(phase.name))?);
    }
    if !skip_mutants.is_empty() {
        println!("mutants not run here: {} (`grader dev mutants PHASE` runs them)", skip_mutants.join(", "));
    }
    finish(problems)
}

/// `grader dev mutants [PHASE]`.
pub fn mutants(root: Option<&Path>, phase: Option<&str>) -> Result<ExitCode> {
    if let Some(name) = phase {
        grader::phases::select(name)?;
    }
    let grader = Grader::new(root)?;
    finish(mutants_are_caught(&grader, phase)?)
}

fn finish(problems: Vec<String>) -> Result<ExitCode> {
    if problems.is_empty() {
        println!("dev check: every property holds");
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &problems {
        println!("PROBLEM: {problem}");
    }
    println!("{} passed, {} failed", 0, problems.len());
    Ok(ExitCode::FAILURE)
}

fn summary(report: &PhaseReport) -> String {
    let count = |status| report.checks.iter().filter(|c| c.status == status).count();
    format!(
        "{} pass, {} not started, {} skipped, {} fail, {} error",
        count(Status::Pass),
        count(Status::NotStarted),
        count(Status::Skipped),
        count(Status::Fail),
        count(Status::Error)
    )
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Lines of an error's message kept in a problem: a build that failed says why after its first
/// line (the compiler's own messages), which a problem must show to be of use.
const ERROR_LINES: usize = 40;

/// A check's message for a problem: an error's first [`ERROR_LINES`] lines, else its first line.
fn brief(check: &grader::report::CheckReport) -> String {
    if check.status == Status::Error {
        check.message.lines().take(ERROR_LINES).collect::<Vec<_>>().join("\n")
    } else {
        first_line(&check.message).to_string()
    }
}

/// Every check the reference solution passes records answers that depend on the seed: run again
/// with another seed, the reference records different ones. A check whose answers were the same
/// for every seed could be passed by a record made before the run (the seal on a record keeps the
/// learner's code from writing one, and this keeps the answers from being known in advance).
fn answers_depend_on_the_seed(grader: &Grader, phase: &Phase, report: &PhaseReport) -> Result<Vec<String>> {
    grader.go_on()?;
    let grading = match grader.runners.grading(phase, Subject::Solutions, &grader.launcher, &grader.cache) {
        Ok(grading) => grading,
        Err(failure) => {
            return Ok(vec![format!("{}: the seed-dependence proof cannot build: {}", phase.name, failure.message)]);
        }
    };
    // Up to three other seeds: a check whose inputs take a few values (a count from 3 to 8, say)
    // may draw the same ones for two seeds, but hardly for four.
    let others: Vec<u64> = std::iter::repeat_with(fresh_seed).filter(|&s| s != grader.seed).take(3).collect();
    let mut problems = Vec::new();
    let mut proved = 0;
    'checks: for ((_, spec), check) in phase.checks().zip(&report.checks) {
        let Some(answers) = &check.answers else { continue };
        for &other in &others {
            grader.go_on()?;
            let timing = grader::gpu_lock::Timing::for_check(phase, spec);
            let run =
                grading.subject.run(spec.id, other, Duration::from_secs(spec.timeout_secs), None, timing.as_ref());
            let problem = match run {
                Run::Recorded(Record { outcome: Some(Outcome { status: Status::Pass, .. }), transcript, .. }) => {
                    if &transcript != answers {
                        proved += 1;
                        continue 'checks;
                    }
                    continue;
                }
                Run::Recorded(record) => {
                    format!(
                        "{}/{}: the reference does not pass with seed {other}: {:?}",
                        phase.name, spec.id, record.outcome
                    )
                }
                Run::Ended(outcome) => format!(
                    "{}/{}: the reference's run with seed {other} ended: {}",
                    phase.name,
                    spec.id,
                    first_line(&outcome.message)
                ),
            };
            problems.push(problem);
            continue 'checks;
        }
        problems.push(format!(
            "{}/{} records the same answers with seeds {} and {others:?}: draw its inputs from the seed",
            phase.name, spec.id, grader.seed
        ));
    }
    println!(
        "solutions, {}: {proved} checks record other answers with another seed{}",
        phase.name,
        if problems.is_empty() { "" } else { "; WRONG for the others" }
    );
    Ok(problems)
}

/// A type error added to phase 1's first stub: every phase 1 check is an error at that file, and
/// no other phase has one.
fn a_compile_error_stays_in_its_phase(grader: &Grader) -> Result<Vec<String>> {
    let phase = PHASES[0];
    let relative = format!("{}/{}", phase.exercises_dir, phase.exercises[0].file);
    let path = grader.workbook.path(&relative);
    let _restore = Restore::keep([path.clone()])?;
    let mut broken = std::fs::read(&path)?;
    broken.extend_from_slice(b"\nfn broken() -> u32 {\n    \"not a number\"\n}\n");
    std::fs::write(&path, broken)?;
    let mut problems = Vec::new();
    for other in PHASES {
        let report = grader.grade(other, Subject::Exercises)?;
        // A GPU check is skipped where there is no GPU, built or not.
        for c in report.checks.iter().filter(|c| c.status != Status::Skipped) {
            let in_error = c.status == Status::Error;
            if other.name == phase.name {
                let placed = c.location.as_deref().is_some_and(|l| l.starts_with(&format!("{relative}:")));
                if !in_error || !placed || !c.message.contains("mismatched types") {
                    problems.push(format!("the compile error in {relative} shows as {}: {c:?}", c.status));
                }
            } else if in_error {
                problems.push(format!("phase 1's compile error spread to {}/{}", other.name, c.id));
            }
        }
    }
    println!(
        "a compile error in {relative}: {}",
        if problems.is_empty() { "reported there, and only there" } else { "WRONG" }
    );
    Ok(problems)
}

/// For each phase with mutants (or only `only`): the solution's files copied into the exercise
/// crate pass; each mutant fails exactly the checks it names, or is refused.
fn mutants_are_caught(grader: &Grader, only: Option<&str>) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for phase in PHASES.iter().filter(|p| only.is_none_or(|name| p.name == name) && !p.mutants.is_empty()) {
        let mut files: Vec<&str> = phase.mutants.iter().map(|m| m.file).collect();
        files.sort_unstable();
        files.dedup();
        let exercise = |file: &str| grader.workbook.path(phase.exercises_dir).join(file);
        let solution = |file: &str| grader.workbook.path(phase.solutions_dir).join(file);
        let _restore = Restore::keep(files.iter().map(|f| exercise(f)))?;
        let solved = || -> Result<()> {
            for file in &files {
                std::fs::copy(solution(file), exercise(file))?;
            }
            Ok(())
        };
        solved()?;
        problems.extend(judge(
            phase,
            "the solution, inside the exercise crate",
            &grader.grade(phase, Subject::Exercises)?,
            &[],
            &[],
        ));
        for mutant in phase.mutants {
            solved()?;
            let text = std::fs::read_to_string(solution(mutant.file))?;
            if !text.contains(mutant.find) {
                problems.push(format!("mutant `{}`: its text is not in {} any more", mutant.name, mutant.file));
                continue;
            }
            std::fs::write(exercise(mutant.file), text.replacen(mutant.find, mutant.replace, 1))?;
            let report = grader.grade(&touched_by(phase, mutant), Subject::Exercises)?;
            problems.extend(if mutant.refused {
                judge_refused(phase, mutant, &report)
            } else {
                judge(phase, mutant.name, &report, mutant.fails, mutant.may_fail)
            });
        }
    }
    Ok(problems)
}

/// The part of `phase` that `mutant` can change: the exercises of the file it edits and those
/// whose checks it must fail, as the run of the phase's exercises from the first of them to the
/// last. A mutant is graded on that part alone: every other check of the phase reads other files,
/// which are the solution's, and the full grading of the solutions has already passed them. Phase
/// 3's `regional`, which compiles twelve blocks in C, would otherwise run once per mutant of every
/// other exercise. The checks it may fail are run only where they fall in that part: either
/// verdict is accepted from them, so running them proves nothing, and a timing check that times
/// with a mutant's broken timer can take half a minute.
fn touched_by(phase: &'static Phase, mutant: &Mutant) -> Phase {
    let named = |id: &str| mutant.fails.contains(&id);
    let touched: Vec<usize> = (0..phase.exercises.len())
        .filter(|&i| {
            let exercise = &phase.exercises[i];
            exercise.file == mutant.file || exercise.checks.iter().any(|c| named(c.id))
        })
        .collect();
    let exercises = match (touched.first(), touched.last()) {
        (Some(&first), Some(&last)) => &phase.exercises[first..=last],
        _ => phase.exercises,
    };
    Phase { exercises, mutants: &[], ..*phase }
}

/// What is wrong with one mutant's run: a named check that did not fail, or another that did
/// not pass. A skip (no GPU here) is neither a catch nor a miss.
fn judge(phase: &Phase, name: &str, report: &PhaseReport, fails: &[&str], may_fail: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for c in &report.checks {
        let named = fails.contains(&c.id.as_str());
        let fine = match c.status {
            Status::Skipped => true,
            Status::Fail if named => true,
            Status::Fail => may_fail.contains(&c.id.as_str()),
            Status::Pass => !named,
            _ => false,
        };
        if !fine {
            let expected = if named { "fail" } else { "pass" };
            problems.push(format!(
                "{}: mutant `{name}`: {} is {}, expected {expected}: {}",
                phase.name,
                c.id,
                c.status,
                first_line(&c.message)
            ));
        }
    }
    // A mutant whose named checks were all skipped was not tried here: say so, not "caught".
    let named = report.checks.iter().filter(|c| fails.contains(&c.id.as_str()));
    let (skipped, total) = named.fold((0, 0), |(s, t), c| (s + usize::from(c.status == Status::Skipped), t + 1));
    let verdict = match (problems.is_empty(), skipped) {
        (false, _) => "WRONG".to_string(),
        (true, 0) => "caught".to_string(),
        (true, s) if s == total => "not run here (its checks were skipped: they need a GPU)".to_string(),
        (true, s) => format!("caught ({s} of its {total} checks skipped here)"),
    };
    println!("{}: {name}: {verdict}", phase.name);
    problems
}

/// What is wrong with a run whose mutant the grader should have refused before running it: the
/// checks of the exercise it changes read "refused"; every other check is refused too (it forbids
/// the same item) or passes.
fn judge_refused(phase: &Phase, mutant: &grader_harness::Mutant, report: &PhaseReport) -> Vec<String> {
    let name = mutant.name;
    let own = |exercise: &str| phase.exercise(exercise).is_some_and(|e| e.file == mutant.file);
    let problems: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.status != Status::Skipped)
        .filter(|c| !(c.status == Status::Error && c.is_refusal()))
        .filter(|c| own(&c.exercise) || c.status != Status::Pass)
        .map(|c| {
            let expected = if own(&c.exercise) { "refused" } else { "refused, or a pass" };
            format!("{}: mutant `{name}`: {} is {}, expected {expected}", phase.name, c.id, c.status)
        })
        .collect();
    println!("{}: {name}: {}", phase.name, if problems.is_empty() { "refused" } else { "WRONG" });
    problems
}

/// The label under which the challenge's checks record the learner's exported block, as
/// `grader/checks/phase5/src/checks/challenge.rs` names it.
const YOUR_BLOCK: &str = "your block, exported";

/// One run of `grader dev challenge-bar`: the speedups over the given block that the judge
/// measured for the reference solution and for the naive block made one graph.
#[derive(Debug, serde::Serialize)]
struct BarRun {
    seed: u64,
    solution: Option<f64>,
    naive_one_graph: Option<f64>,
}

/// `grader dev challenge-bar`: times the reference solution's block and the given naive block made
/// one graph (its graph break removed, nothing else changed) against the given block, `runs` times
/// each on this machine's GPU, exactly as the judge times a learner's block in
/// `challenge_is_faster`, and prints the ratios: what `GPU_SPEEDUP` is set from.
pub fn challenge_bar(root: Option<&Path>, runs: usize, json: bool) -> Result<ExitCode> {
    if let Some(reason) = engine::device::cuda::unavailable_reason() {
        anyhow::bail!("the challenge is timed on a GPU, and this machine has none: {reason}");
    }
    let workbook = Workbook::find(root)?;
    let launcher = std::env::current_exe().context("cannot find the grader's own executable")?;
    let phase = grader::phases::select("phase5")?[0];
    let (_, spec) = phase.checks().find(|(_, s)| s.id == "challenge_is_faster").context("phase5 has no speed check")?;
    let limit = Duration::from_secs(spec.timeout_secs);
    // A pack of the solutions beside this grader (`grader pack --solutions`) serves on a GPU
    // machine without Rust; otherwise cargo builds the reference runner.
    let runners = match grader::runners::Pack::beside_executable() {
        Some(pack) => {
            pack.expect_subject(Subject::Solutions)?;
            Runners::Prebuilt(pack)
        }
        None => {
            eprintln!("Building the phase 5 reference runner (release)...");
            Runners::Cargo { workbook: workbook.clone(), release: true }
        }
    };
    let cache = workbook.state_dir().join("learner-cache");
    let grading = runners
        .grading(phase, Subject::Solutions, &launcher, &cache)
        .map_err(|f| anyhow::anyhow!("the phase 5 solutions do not build: {}", f.message))?;
    let mut results = Vec::new();
    for run in 1..=runs {
        let seed = fresh_seed();
        let timing = grader::gpu_lock::Timing::for_check(phase, spec);
        let solution = grading.verdict(spec.id, seed, limit, timing.as_ref());
        let naive = grading.judge_record(spec.id, seed, limit, &naive_one_graph(seed, spec.id)?, timing.as_ref());
        let naive = naive.unwrap_or_else(|ended| ended);
        let result = BarRun { seed, solution: speedup(&solution.message), naive_one_graph: speedup(&naive.message) };
        if !json {
            let show = |r: Option<f64>, o: &Outcome| {
                r.map_or_else(|| format!("- ({})", first_line(&o.message)), |r| format!("{r:.2}x"))
            };
            println!(
                "run {run:>2}/{runs} (seed {seed}): solution {}, naive block made one graph {}",
                show(result.solution, &solution),
                show(result.naive_one_graph, &naive)
            );
        }
        results.push(result);
    }
    let solution: Vec<f64> = results.iter().filter_map(|r| r.solution).collect();
    let naive: Vec<f64> = results.iter().filter_map(|r| r.naive_one_graph).collect();
    let range = |v: &[f64]| (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max));
    let ((solution_min, _), (_, naive_max)) = (range(&solution), range(&naive));
    let bar = (solution_min > naive_max).then(|| (solution_min + naive_max) / 2.0);
    if json {
        println!("{}", serde_json::json!({ "runs": results, "suggested_bar": bar }));
    } else {
        println!(
            "solution: {solution:.2?}\nnaive block made one graph: {naive:.2?}\n{}",
            match bar {
                Some(bar) => format!(
                    "a bar of {bar:.2} (halfway between) passes the solution {} of {} times and the naive block {} of {}",
                    solution.iter().filter(|&&r| r >= bar).count(),
                    solution.len(),
                    naive.iter().filter(|&&r| r >= bar).count(),
                    naive.len()
                ),
                None => "no bar separates them: the structure check of challenge_matches_block tells them apart".into(),
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A sealed record of a learner's run of check `id` with `seed` whose exported block is the given
/// naive block made one graph, for the judge to time.
fn naive_one_graph(seed: u64, id: &str) -> Result<Record> {
    use workbook_models::phase5::{Block, BlockShape};
    let shape = BlockShape::SMALL;
    let block = Block::new(shape, seed, engine::Device::Cpu)?;
    let x = engine::Tensor::randn(&[shape.batch, shape.seq, shape.d_model], seed);
    let program = engine::fx::export::export(|t| Ok(vec![block.naive_forward(&t[0])?]), std::slice::from_ref(&x))?;
    let artifact = Entry { label: YOUR_BLOCK.into(), value: Recorded::Artifact(program.to_json()?) };
    let claim = Outcome { status: Status::Pass, message: "the naive block made one graph".into(), location: None };
    Ok(Record::sealed(seed, id, Some(claim), vec![artifact]))
}

/// The speedup in a message of `challenge_is_faster` (`1.72x the given block, ...`).
fn speedup(message: &str) -> Option<f64> {
    let before = &message[..message.find("x the given block")?];
    before.rsplit(|c: char| !(c.is_ascii_digit() || c == '.')).next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speedup_is_read_from_the_checks_message() {
        let message = "1.72x the given block, both compiled (yours 0.412 ms, given 0.709 ms, medians of 40 samples)";
        assert_eq!(speedup(message), Some(1.72));
        assert_eq!(speedup("your block cannot be exported"), None);
    }

    /// Each mutant's part of its phase holds the exercise of the file it edits and every check it
    /// must fail, and a mutant of one exercise's file is graded on that exercise's part, not the
    /// phase, even where checks of other exercises may fail with it.
    #[test]
    fn a_mutant_is_graded_on_what_it_can_change() {
        for phase in PHASES {
            for mutant in phase.mutants {
                let part = touched_by(phase, mutant);
                let ids: Vec<&str> = part.checks().map(|(_, spec)| spec.id).collect();
                assert!(part.exercises.iter().any(|e| e.file == mutant.file), "{}: {}", phase.name, mutant.name);
                for id in mutant.fails {
                    assert!(ids.contains(id), "{}: {}: {id} is left out", phase.name, mutant.name);
                }
                assert!(part.mutants.is_empty());
            }
        }
        let phase3 = PHASES.iter().find(|p| p.name == "phase3").expect("phase 3");
        let schedule = phase3.mutants.iter().find(|m| m.file == "src/schedule.rs").expect("a mutant of schedule");
        let part = touched_by(phase3, schedule);
        assert_eq!(part.exercises.iter().map(|e| e.name).collect::<Vec<_>>(), ["schedule"]);
        let phase5 = PHASES.iter().find(|p| p.name == "phase5").expect("phase 5");
        let quantile = phase5
            .mutants
            .iter()
            .find(|m| m.file == "src/timer.rs" && m.may_fail.len() > 1)
            .expect("a mutant of the timer that the timing checks of other exercises may fail");
        let part = touched_by(phase5, quantile);
        assert_eq!(part.exercises.iter().map(|e| e.name).collect::<Vec<_>>(), ["timer"]);
    }

    /// A SIGTERM (as a Ctrl-C) while a mutant is in the exercise file: the next grading does not
    /// start, and the learner's file is back as it was.
    #[test]
    fn a_signal_stops_the_sweep_before_its_next_grading_and_the_files_come_back() {
        let grader = Grader::new(None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stub.rs");
        std::fs::write(&file, "the learner's version").unwrap();
        let sweep = || -> Result<PhaseReport> {
            let _restore = Restore::keep([file.clone()])?;
            std::fs::write(&file, "a mutant")?;
            grader.go_on()?;
            // SAFETY: raise only sends a signal to this thread; the handler sets a flag.
            assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
            grader.grade(PHASES[0], Subject::Exercises)
        };
        let error = sweep().expect_err("the grading after the signal must not run");
        assert!(error.to_string().starts_with("interrupted"), "{error}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "the learner's version");
    }
}
