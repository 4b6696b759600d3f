//! `bench`: benchmark commands for the engine, each printing achieved rates as ratios against a
//! ceiling measured in the same run (the analogue of PyTorch's operator microbenchmarks).
//!
//! ```text
//! bench eager    [--device cpu|cuda|cuda:N] [--samples N] [--warmup N]
//! bench compiled [--device cpu|cuda|cuda:N] [--samples N] [--warmup N]
//! ```
//!
//! Also `cargo engine-bench eager` from the workspace (a release build).

mod compiled;
mod eager;
mod table;

use anyhow::{Context, Result, bail};
use engine::Device;

const USAGE: &str = "usage: bench eager|compiled [--device cpu|cuda|cuda:N] [--samples N] [--warmup N]

  eager      time each class of eager op (pointwise, broadcast, reductions, softmax, layer norm,
             matmul) at a size that fills the device, against a device-to-device copy (or the
             vendor GEMM) timed in the same run
  compiled   Inductor's generated code: fused pointwise kernels and whole-row reductions against
             a copy, compiled against eager, the host cost of a cached call, cold compile and warm
             start from the disk cache (see bench/NOTES-inductor.md)";

/// Options shared by the benchmark commands.
pub struct Options {
    /// Where to run; by default the GPU when there is one.
    pub device: Device,
    /// Timed samples per workload.
    pub samples: usize,
    /// Untimed runs before the samples.
    pub warmup: usize,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let wants_help = args.iter().any(|a| matches!(a.as_str(), "-h" | "--help" | "help"));
    let Some((command, rest)) = args.split_first().filter(|_| !wants_help) else {
        println!("{USAGE}");
        return Ok(());
    };
    let options = parse_options(rest)?;
    match command.as_str() {
        "eager" => eager::run(&options),
        "compiled" => compiled::run(&options),
        // Run by `compiled` in a fresh process to time a first call against a given cache.
        "compiled-first-call" => compiled::first_call(&options),
        other => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}

fn parse_options(args: &[String]) -> Result<Options> {
    let mut options = Options { device: Device::cuda_if_available(), samples: 25, warmup: 3 };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value\n\n{USAGE}"));
        match flag.as_str() {
            "--device" => options.device = parse_device(value()?)?,
            "--samples" => options.samples = value()?.parse().context("--samples takes a count")?,
            "--warmup" => options.warmup = value()?.parse().context("--warmup takes a count")?,
            other => bail!("unknown option `{other}`\n\n{USAGE}"),
        }
    }
    Ok(options)
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
