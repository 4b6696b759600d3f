//! `bench`: benchmark commands for the engine, each printing achieved rates as ratios against a
//! ceiling measured in the same run (the analogue of PyTorch's operator microbenchmarks), or
//! compiled code against eager code timed in the same run.
//!
//! ```text
//! bench eager    [--device cpu|cuda|cuda:N] [--samples N] [--warmup N] [--json]
//! bench compiled [...]
//! bench models   [...]
//! ```
//!
//! Also `cargo engine-bench models` from the workspace (a release build).

mod compiled;
mod eager;
mod models;
mod table;

use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand};
use engine::Device;

/// Benchmark commands for the engine.
#[derive(Parser)]
#[command(name = "bench", about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Time each class of eager op (pointwise, broadcast, reductions, softmax, layer norm,
    /// matmul) at a size that fills the device, against a device-to-device copy (or the vendor
    /// GEMM) timed in the same run.
    Eager(Common),
    /// Inductor's generated code: fused pointwise kernels and whole-row reductions against a
    /// copy, compiled against eager, the host cost of a cached call, cold compile and warm start
    /// from the disk cache (see bench/NOTES-inductor.md).
    Compiled(Common),
    /// The workbook's headline workloads (the MLP at four batches, the naive transformer block at
    /// two shapes, naive softmax and layer norm, pointwise chains), eager against compiled, with
    /// the compile time of the first call (see bench/NOTES-models.md).
    Models {
        #[command(flatten)]
        common: Common,
        /// Run only the workloads whose name contains this text (repeatable), e.g. `--only mlp`.
        #[arg(long)]
        only: Vec<String>,
    },
    /// Run by `compiled` in a fresh process to time a first call against a given cache.
    #[command(hide = true)]
    CompiledFirstCall(Common),
}

/// The options every command takes.
#[derive(Args)]
struct Common {
    /// cpu, cuda or cuda:N; by default the GPU when there is one.
    #[arg(long, value_parser = parse_device)]
    device: Option<Device>,
    /// Timed samples per workload (an upper bound on the CPU for `models`).
    #[arg(long, default_value_t = 25)]
    samples: usize,
    /// Untimed runs before the samples.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Print the results as JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

/// Options shared by the benchmark commands.
pub struct Options {
    /// Where to run.
    pub device: Device,
    /// Timed samples per workload.
    pub samples: usize,
    /// Untimed runs before the samples.
    pub warmup: usize,
    /// JSON on stdout instead of tables.
    pub json: bool,
}

impl From<Common> for Options {
    fn from(c: Common) -> Options {
        let device = c.device.unwrap_or_else(Device::cuda_if_available);
        Options { device, samples: c.samples.max(1), warmup: c.warmup, json: c.json }
    }
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Eager(c) => eager::run(&no_json("eager", c)?),
        Command::Compiled(c) => compiled::run(&no_json("compiled", c)?),
        Command::Models { common, only } => models::run(&common.into(), &only),
        Command::CompiledFirstCall(c) => compiled::first_call(&c.into()),
    }
}

/// The options of a command that prints tables only.
fn no_json(command: &str, common: Common) -> Result<Options> {
    if common.json {
        bail!("`bench {command}` prints tables only; --json is for `bench models`");
    }
    Ok(common.into())
}

fn parse_device(text: &str) -> Result<Device> {
    match text {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        _ => match text.strip_prefix("cuda:").map(str::parse) {
            Some(Ok(ordinal)) => Ok(Device::Cuda(ordinal)),
            _ => bail!("unknown device `{text}`: use cpu, cuda or cuda:N"),
        },
    }
}
