//! `grader doctor`: is this machine ready for the workbook? One line per tool.
//!
//! Each line comes from a probe in [`PROBES`]; add a probe by writing a function returning a
//! [`Line`] and listing it there. The GPU lines read the engine's CUDA probe
//! ([`engine::device::cuda::probe`]), the same one that decides whether GPU checks run or are
//! skipped; a GPU is optional, since everything but GPU checks runs on the CPU.

use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::Result;
use engine::codecache::{CCompiler, DiskCache};
use engine::device::cuda::probe;
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
pub const PROBES: &[fn(&Context) -> Line] =
    &[workbook, rustc, cargo, c_compiler, git, mdbook, cuda_driver, gpu, nvrtc, cublas, kernel_cache];

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
        "not found: `cargo install mdbook --version \"^0.5\"`, then `mdbook serve book --open` serves the book at \
         http://localhost:3000 (as book/src/setup.md says)",
    )
}

/// A line for one component of the CUDA probe: `ok` with `found`, or `optional` with the reason.
fn cuda_line<T>(tool: &'static str, probed: &Result<T, String>, found: impl FnOnce(&T) -> String) -> Line {
    match probed {
        Ok(value) => Line { tool, health: Health::Ok, detail: found(value) },
        Err(reason) => Line { tool, health: Health::Optional, detail: format!("{reason}; GPU checks are skipped") },
    }
}

fn cuda_driver(_: &Context) -> Line {
    cuda_line("CUDA driver", &probe().driver, |(major, minor)| format!("supports CUDA {major}.{minor}"))
}

fn gpu(_: &Context) -> Line {
    cuda_line("GPU", &probe().devices, |devices| {
        let d = &devices[0];
        let others = if devices.len() > 1 { format!(" (+{} more)", devices.len() - 1) } else { String::new() };
        format!(
            "cuda:0 {}, compute capability {}.{} ({}), {:.1} GiB, {} SMs{others}",
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.arch(),
            d.total_memory as f64 / (1u64 << 30) as f64,
            d.multiprocessors
        )
    })
}

fn nvrtc(_: &Context) -> Line {
    cuda_line("NVRTC", &probe().nvrtc, |(major, minor)| {
        format!("{major}.{minor} (compiles CUDA kernels for the GPU's exact architecture)")
    })
}

fn cublas(_: &Context) -> Line {
    cuda_line("cuBLAS", &probe().cublas, |(major, minor, patch)| format!("{major}.{minor}.{patch}"))
}

/// Where compiled kernels (CUBINs and shared libraries) are kept between runs.
fn kernel_cache(_: &Context) -> Line {
    let dir = DiskCache::global().dir();
    let detail = format!("{} (set ENGINE_CACHE_DIR to move it)", dir.display());
    let configured = std::env::var_os("ENGINE_CACHE_DIR").map(std::path::PathBuf::from);
    match configured.as_deref().map(engine::codecache::writable).transpose() {
        Err(e) => Line {
            tool: "kernel cache",
            health: Health::Missing,
            detail: format!(
                "ENGINE_CACHE_DIR={} cannot be written ({e}): set it to a folder you can write, or unset it",
                configured.unwrap_or_default().display()
            ),
        },
        Ok(_) => match engine::codecache::writable(dir) {
            Ok(()) => Line { tool: "kernel cache", health: Health::Ok, detail },
            Err(e) => Line {
                tool: "kernel cache",
                health: Health::Missing,
                detail: format!("{detail}: cannot write there ({e}); set ENGINE_CACHE_DIR to a writable folder"),
            },
        },
    }
}
