//! `compile-report`: the engine's compile trace as a static HTML report, as `tlparse` renders
//! PyTorch's `TORCH_TRACE`.
//!
//! ```text
//! ENGINE_TRACE=/tmp/trace cargo run ...               # any program: one trace file per process
//! compile-report render /tmp/trace --out report/      # index.html, one page per compile
//! compile-report models --out report/                 # every model of models/, traced, rendered
//! ```

mod highlight;
mod models;
mod pages;
mod trace;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

/// Renders the engine's compile trace as HTML.
#[derive(Parser)]
#[command(name = "compile-report", about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Render a trace (a folder written with ENGINE_TRACE=DIR, or one of its files).
    Render {
        /// The trace folder or file.
        trace: PathBuf,
        /// Where to write the report (index.html, a page per compile, style.css).
        #[arg(long, short)]
        out: PathBuf,
    },
    /// Compile every model of models/ on the CPU with the trace on, then render the trace.
    Models {
        /// Where to write the report.
        #[arg(long, short)]
        out: PathBuf,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Render { trace, out } => render(&trace, &out),
        Command::Models { out } => {
            let trace = out.join("trace");
            let _ = std::fs::remove_dir_all(&trace);
            engine::trace_structured::trace_to(Some(&trace));
            let functions = models::run_all().context("running the models")?;
            engine::trace_structured::trace_to(None);
            println!("traced {functions} compiled functions of models/");
            render(&trace, &out)
        }
    }
}

fn render(trace: &std::path::Path, out: &std::path::Path) -> Result<()> {
    let runs = trace::read(trace)?;
    let compiles: usize = runs.iter().map(|r| r.compiles.len()).sum();
    let pages = pages::write(&runs, out)?;
    println!("{compiles} compile(s): {pages} page(s) in {}", out.join("index.html").display());
    Ok(())
}
