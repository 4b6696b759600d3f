//! `grader pack --out DIR`: release runners for every phase plus the grader itself, in one
//! directory that runs checks on a machine without Rust (a lab GPU server): copy DIR there and
//! run `DIR/grader check all` from the workbook checkout.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Context as _, Result, anyhow};
use grader::phases::PHASES;
use grader::runners::{PACK_MANIFEST, PackManifest, PackedPhase, build_runner, cargo_build, runner_bin};
use grader::workbook::Workbook;
use grader_harness::Subject;

/// Builds and copies; exit code 1 when a phase's runner could not be built (the pack still holds
/// the others, and checking that phase from the pack shows its compile error).
pub fn run(root: Option<&Path>, out: &Path, solutions: bool) -> Result<ExitCode> {
    let workbook = Workbook::find(root)?;
    let launcher = std::env::current_exe().context("cannot find the grader's own executable")?;
    let subject = if solutions { Subject::Solutions } else { Subject::Exercises };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let (mut phases, mut judges) = (BTreeMap::new(), BTreeMap::new());
    for phase in PHASES {
        // Every pack carries the judges: the runners built against the solutions.
        eprintln!("Building the {} judge (release)...", phase.name);
        let judge = build_runner(&workbook, phase, Subject::Solutions, true, &launcher)
            .map_err(|f| anyhow!("the {} solutions do not build, so nothing could judge: {}", phase.name, f.message))?;
        let judge_name = runner_bin(phase, Subject::Solutions);
        copy_executable(&judge, &out.join(&judge_name))?;
        judges.insert(phase.name.to_string(), judge_name);
        if subject == Subject::Solutions {
            phases.insert(phase.name.to_string(), PackedPhase::Runner(runner_bin(phase, subject)));
            continue;
        }
        eprintln!("Building the {} runner for {subject} (release)...", phase.name);
        let packed = match build_runner(&workbook, phase, subject, true, &launcher) {
            Ok(exe) => {
                let name = runner_bin(phase, subject);
                copy_executable(&exe, &out.join(&name))?;
                PackedPhase::Runner(name)
            }
            Err(failure) => {
                eprintln!("{} {}", phase.name, failure.message);
                PackedPhase::BuildError(failure)
            }
        };
        phases.insert(phase.name.to_string(), packed);
    }
    eprintln!("Building the grader (release)...");
    let grader = cargo_build(&workbook, &["-p", "grader", "--bin", "grader", "--release"], "grader", &launcher)
        .map_err(|f| anyhow!("the grader {}", f.message))?;
    copy_executable(&grader, &out.join("grader"))?;
    let all_built = phases.values().all(|p| matches!(p, PackedPhase::Runner(_)));
    let manifest = PackManifest { subject, phases, judges };
    std::fs::write(out.join(PACK_MANIFEST), serde_json::to_string_pretty(&manifest)?)?;
    println!("Packed the grader and the {subject} runners into {}.", out.display());
    println!("On a machine without Rust, copy that directory and run, from the workbook checkout:");
    println!("    {}/grader check all", out.display());
    Ok(if all_built { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Copies an executable, replacing what was there (it may be running or read-only), and strips
/// its debug information when `strip` is installed: packs travel, and panic locations do not
/// need it.
fn copy_executable(from: &Path, to: &Path) -> Result<()> {
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to).with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    let _ = Command::new("strip").arg(to).status();
    Ok(())
}
