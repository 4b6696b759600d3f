//! `grader doctor`: is this machine ready for the workbook? One line per tool.
//!
//! Each line comes from a probe in [`PROBES`]; add a probe (GPU, driver, NVRTC...) by writing a
//! function returning a [`Line`] and listing it there.

use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::Result;
use engine::codecache::CCompiler;
use grader::runners::Pack;
use grader::workbook::Workbook;
use tabled::settings::Style;
use tabled::{Table, Tabled};

/// What a probe found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Health {
    /// Present and usable.
    Ok,
    /// Missing but optional: some feature will not work.
    Optional,
    /// Missing and needed.
    Missing,
}

/// One line of the doctor's report.
#[derive(Tabled)]
pub struct Line {
    /// What was probed.
    pub tool: &'static str,
    /// `ok`, `optional` or `MISSING`.
    #[tabled(display = "health_text")]
    pub health: Health,
    /// Version, path, or what to do.
    pub detail: String,
}

fn health_text(health: &Health) -> String {
    match health {
        Health::Ok => "✓ ok",
        Health::Optional => "– optional",
        Health::Missing => "✗ MISSING",
    }
    .to_string()
}

/// What probes may look at.
pub struct Context<'a> {
    /// `--root`, if given.
    pub root: Option<&'a Path>,
    /// Whether the grader runs from a pack (then Rust is not needed).
    pub from_pack: bool,
}

/// Every probe, in the order the report lists them.
pub const PROBES: &[fn(&Context) -> Line] = &[workbook, rustc, cargo, c_compiler, git, mdbook];

/// Prints the report; exit code 1 when something needed is missing.
pub fn run(root: Option<&Path>) -> Result<ExitCode> {
    let context = Context { root, from_pack: Pack::beside_executable().is_some() };
    let lines: Vec<Line> = PROBES.iter().map(|probe| probe(&context)).collect();
    let missing = lines.iter().any(|l| l.health == Health::Missing);
    println!("{}", Table::new(lines).with(Style::rounded()));
    Ok(if missing { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The first line of `program --version`, if it runs.
fn version(program: &str) -> Option<String> {
    let output = Command::new(program).arg("--version").output().ok().filter(|o| o.status.success())?;
    String::from_utf8_lossy(&output.stdout).lines().next().map(str::to_string)
}

/// A line for a tool found by running `program --version`.
fn tool_line(tool: &'static str, program: &str, when_missing: Health, help: &str) -> Line {
    match version(program) {
        Some(v) => Line { tool, health: Health::Ok, detail: v },
        None => Line { tool, health: when_missing, detail: help.to_string() },
    }
}

fn workbook(context: &Context) -> Line {
    match Workbook::find(context.root) {
        Ok(w) => Line { tool: "workbook", health: Health::Ok, detail: w.root().display().to_string() },
        Err(e) if context.from_pack => Line { tool: "workbook", health: Health::Optional, detail: format!("{e:#}") },
        Err(e) => Line { tool: "workbook", health: Health::Missing, detail: format!("{e:#}") },
    }
}

/// Rust is needed to build checks, but not to run packed ones.
fn rust_needed(context: &Context) -> Health {
    if context.from_pack { Health::Optional } else { Health::Missing }
}

fn rustc(context: &Context) -> Line {
    tool_line(
        "rustc",
        "rustc",
        rust_needed(context),
        "install Rust from https://rustup.rs (or use `grader pack` elsewhere)",
    )
}

fn cargo(context: &Context) -> Line {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    tool_line(
        "cargo",
        &cargo,
        rust_needed(context),
        "install Rust from https://rustup.rs (or use `grader pack` elsewhere)",
    )
}

fn c_compiler(_: &Context) -> Line {
    match CCompiler::detect() {
        Ok(cc) => {
            let openmp = if cc.openmp() { "with OpenMP" } else { "without OpenMP (generated C runs on one core)" };
            Line {
                tool: "C compiler",
                health: Health::Ok,
                detail: format!("{}: {} ({openmp})", cc.program(), cc.version()),
            }
        }
        Err(e) => {
            Line { tool: "C compiler", health: Health::Missing, detail: format!("{e} (Inductor's CPU code needs it)") }
        }
    }
}

fn git(_: &Context) -> Line {
    tool_line("git", "git", Health::Optional, "not found: `grader reset` falls back to the copies in .grader/pristine/")
}

fn mdbook(_: &Context) -> Line {
    tool_line(
        "mdbook",
        "mdbook",
        Health::Optional,
        "not found: read the book online, or `cargo install mdbook --locked --no-default-features --features search`",
    )
}
