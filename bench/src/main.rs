//! `bench`: benchmark commands for the engine, each printing achieved rates as ratios against a
//! ceiling measured in the same run (the analogue of PyTorch's operator microbenchmarks), or
//! compiled code against eager code timed in the same run.
//!
//! ```text
//! bench eager    [--device cpu|cuda|cuda:N] [--dtype f32|bf16|f16] [--samples N] [--warmup N] [--json]
//! bench compiled [...]
//! bench models   [...] [--only TEXT]
//! bench roofline [...] [--only TEXT] [--svg FILE] [--from-json REPORT]
//! bench modes    [...] [--only TEXT] [--mode default|reduce-overhead|max-autotune]
//! bench sweep    [...] [--batches 1,4,16] [--threads 1,2] [--host-overhead python] [--load N]
//! bench regional [...] [--seqs 128,256,384]
//! bench train    [...] [--only TEXT] [--quick]
//! ```
//!
//! Also `cargo engine-bench models` from the workspace (a release build).

mod compiled;
mod eager;
mod first_call;
mod fp8;
mod models;
mod modes;
mod regional;
mod roofline;
mod sweep;
mod table;
mod train;

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand};
use engine::dynamo::Mode;
use engine::host_overhead::Setting;
use engine::{DType, Device};

/// Benchmark commands for the engine.
#[derive(Parser)]
#[command(name = "engine-bench", about, long_about = None)]
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
        /// Skip timing each workload's first call in new processes (cold and warm kernel cache):
        /// quicker, for a check that every workload runs (CI).
        #[arg(long)]
        no_first_calls: bool,
    },
    /// The device's ceilings (copy bandwidth, GEMM throughput) and every kernel of the `models`
    /// workloads, eager and compiled, placed under them on a roofline (see
    /// book/src/performance-model.md).
    Roofline {
        #[command(flatten)]
        common: Common,
        /// Run only the workloads whose name contains this text (repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// Also draw the roofline as an SVG at this path.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Measure nothing: read a report written by `--json` (on any machine) and print or draw it.
        #[arg(long, value_name = "REPORT")]
        from_json: Option<PathBuf>,
    },
    /// Every `models` workload compiled in every mode (default, reduce-overhead, max-autotune)
    /// against eager, with each mode's compile time cold and warm, and the modes' targets checked.
    Modes {
        #[command(flatten)]
        common: Common,
        /// Run only the workloads whose name contains this text (repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// Run only these modes (repeatable; all three by default).
        #[arg(long, value_parser = str::parse::<Mode>)]
        mode: Vec<Mode>,
    },
    /// The MLP eager against compiled over batch sizes, as phase 5's sweep times it, at chosen
    /// thread counts, with PyTorch's host overhead added on request and other threads busy beside
    /// it, each row judged by whether the two medians' confidence intervals overlap (see
    /// book/src/phase5/engine.md).
    Sweep {
        #[command(flatten)]
        common: Common,
        /// Batch sizes, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256,1024")]
        batches: Vec<usize>,
        /// Thread counts to repeat the sweep at, comma-separated (default: the pool as it is).
        #[arg(long, value_delimiter = ',')]
        threads: Vec<usize>,
        /// Host time added as PyTorch's Python adds it: `python`, `off`, or microseconds per eager
        /// op, per compiled graph call and per compiled launch, `6,18,1`.
        #[arg(long, default_value = "off", value_parser = parse_overhead)]
        host_overhead: Setting,
        /// Threads to keep busy beside the sweep, as another program would.
        #[arg(long, default_value_t = 0)]
        load: usize,
    },
    /// A stack of 12 naive blocks compiled whole against compiled regionally (one block compiled
    /// once and reused for each): the first call with an empty cache, the calls at new sequence
    /// lengths, and the steady state (see bench/NOTES-compile-time.md).
    Regional {
        #[command(flatten)]
        common: Common,
        /// The sequence lengths, in the order they are called (the first also times the steady
        /// state).
        #[arg(long, value_delimiter = ',', default_value = "128,256,384")]
        seqs: Vec<usize>,
    },
    /// Run by `regional` in a fresh process: one form's calls over the lengths.
    #[command(hide = true)]
    RegionalRun {
        #[command(flatten)]
        common: Common,
        /// Which form.
        #[arg(long, value_enum)]
        form: regional::Form,
        /// The sequence lengths.
        #[arg(long, value_delimiter = ',')]
        seqs: Vec<usize>,
    },
    /// Training steps (forward, MSE loss, backward, SGD with momentum) of the MLP at batch 64 and
    /// 4096 and of the naive block at two shapes: eager, the model compiled, and the whole step
    /// compiled in each mode, with first-call times (see bench/NOTES-training.md).
    Train {
        #[command(flatten)]
        common: Common,
        /// Run only the workloads whose name contains this text (repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// Only the small workloads (the MLP at batch 64, the small block): for CI.
        #[arg(long)]
        quick: bool,
        /// After timing, profile three steps of each form and print the profiler's table (kernels
        /// by device time), as `torch.profiler` shows where a step's time goes.
        #[arg(long)]
        profile: bool,
    },
    /// The MLP 512-2048-512 with its matrix products in FP8 (e4m3, per-tensor scales, as
    /// `torch._scaled_mm`; activation scales dynamic or static) against bf16, eager and compiled,
    /// with each form's error against float32 (GPUs of compute capability 8.9+; see
    /// bench/NOTES-precision.md).
    Fp8 {
        #[command(flatten)]
        common: Common,
        /// Rows of the input batch.
        #[arg(long, default_value_t = 4096)]
        batch: usize,
        /// After timing, profile ten calls of each form and print the profiler's table.
        #[arg(long)]
        profile: bool,
    },
    /// Run by `compiled` in a fresh process to time a first call against a given cache.
    #[command(hide = true)]
    CompiledFirstCall(Common),
    /// Run by `models` in a fresh process to time one workload's first call against a given cache.
    #[command(hide = true)]
    ModelsFirstCall {
        #[command(flatten)]
        common: Common,
        /// The workload's name, as `models` prints it.
        #[arg(long)]
        workload: String,
    },
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
    /// Print the results as JSON on stdout instead of tables (commentary goes to stderr).
    #[arg(long)]
    json: bool,
    /// The dtype of the workloads' inputs and parameters (`models`, `roofline`, `modes`):
    /// f32, bf16 or f16 (`model.to(dtype)` in PyTorch).
    #[arg(long, default_value = "f32", value_parser = parse_dtype)]
    dtype: DType,
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
    /// The workloads' dtype.
    pub dtype: DType,
}

impl From<Common> for Options {
    fn from(c: Common) -> Options {
        let device = c.device.unwrap_or_else(Device::cuda_if_available);
        Options { device, samples: c.samples.max(1), warmup: c.warmup, json: c.json, dtype: c.dtype }
    }
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Eager(c) => eager::run(&c.into()),
        Command::Compiled(c) => compiled::run(&c.into()),
        Command::Models { common, only, no_first_calls } => models::run(&common.into(), &only, !no_first_calls),
        Command::Roofline { mut common, only, svg, from_json } => {
            if from_json.is_some() {
                // Reading a report touches no device: do not probe for a GPU.
                common.device.get_or_insert(Device::Cpu);
            }
            roofline::run(&common.into(), &only, svg.as_deref(), from_json.as_deref())
        }
        Command::Modes { common, only, mode } => modes::run(&common.into(), &only, &mode),
        Command::Sweep { common, batches, threads, host_overhead, load } => {
            sweep::run(&common.into(), &sweep::Sweep { batches, threads, host_overhead, load })
        }
        Command::Train { common, only, quick, profile } => train::run(&common.into(), &only, quick, profile),
        Command::Fp8 { common, batch, profile } => fp8::run(&common.into(), batch, profile),
        Command::Regional { common, seqs } => regional::run(&common.into(), &seqs),
        Command::RegionalRun { common, form, seqs } => regional::run_one(&common.into(), form, &seqs),
        Command::CompiledFirstCall(c) => compiled::first_call(&c.into()),
        Command::ModelsFirstCall { common, workload } => models::first_call(&common.into(), &workload),
    }
}

/// Prints a line of commentary: on stdout beside tables, on stderr when stdout carries JSON.
pub fn say(options: &Options, text: &str) {
    if options.json {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

fn parse_dtype(text: &str) -> Result<DType> {
    match text.parse::<DType>() {
        Ok(dtype) if !dtype.is_fp8() => Ok(dtype),
        Ok(dtype) => bail!("{dtype} is a matrix-product input only, not a model's dtype: use f32, bf16 or f16"),
        Err(why) => bail!(why),
    }
}

fn parse_overhead(text: &str) -> Result<Setting, String> {
    Setting::parse(text)
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
