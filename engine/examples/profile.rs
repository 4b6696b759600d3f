//! Profiles the naive transformer block of phase 5, eager and compiled, the way
//! `torch.profiler.profile` is used on a module: one warm-up call outside the profile (so
//! compilation is not in it), then a few calls inside it, each in a named range; prints both
//! `key_averages()` tables and writes one Chrome trace of both for <https://ui.perfetto.dev>.
//!
//! ```text
//! cargo run --release -p engine --example profile -- [--trace trace.json] [--device cpu|cuda] [--calls N]
//! ```
//!
//! On a GPU the block has `BlockShape::SMALL` (4 sequences of 128 tokens, width 512, 8 heads);
//! on the CPU a quarter of its tokens (4 x 32 x 512), so a debug build finishes in seconds.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use engine::profiler::{self, Profiler};
use engine::{Device, Tensor, dynamo};
use workbook_models::phase5::{Block, BlockShape};

/// Profile the naive transformer block, eager and compiled.
#[derive(Parser)]
struct Args {
    /// Write the Chrome trace (both profiles, one after the other) to this file.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// cpu, cuda or cuda:N; by default the GPU when there is one.
    #[arg(long)]
    device: Option<String>,
    /// Calls of each version inside the profile.
    #[arg(long, default_value_t = 3)]
    calls: usize,
    /// Group the tables by input shape too.
    #[arg(long)]
    shapes: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let device = match args.device.as_deref() {
        None => Device::cuda_if_available(),
        Some("cpu") => Device::Cpu,
        Some(other) => match other.strip_prefix("cuda").map(|n| n.trim_start_matches(':')) {
            Some("") => Device::Cuda(0),
            Some(n) => Device::Cuda(n.parse()?),
            None => anyhow::bail!("unknown device `{other}`: use cpu, cuda or cuda:N"),
        },
    };
    let shape = match device {
        Device::Cuda(_) => BlockShape::SMALL,
        Device::Cpu => BlockShape { seq: BlockShape::SMALL.seq / 4, ..BlockShape::SMALL },
    };
    let block = Block::new(shape, 0, device)?;
    let x = Tensor::randn(&[shape.batch, shape.seq, shape.d_model], 1).to(device)?;
    let compiled = dynamo::compile(|x: Tensor| block.naive_forward(&x));
    // Warm-up: eager kernels load, the compiled block traces and compiles, outside the profile.
    block.naive_forward(&x)?;
    compiled.call(&x)?;
    device.synchronize()?;

    // ANCHOR: profile
    let versions: [(&str, &dyn Fn() -> engine::Result<Tensor>); 2] =
        [("eager", &|| block.naive_forward(&x)), ("compiled", &|| compiled.call(&x))];
    let ((), profile) = Profiler::new().record_shapes(args.shapes).run(|| {
        for (version, run) in versions {
            for _ in 0..args.calls {
                profiler::range(&format!("block {version}"), run)?;
            }
            // Each version's GPU work ends inside its own part of the profile.
            device.synchronize()?;
        }
        Ok(())
    })?;
    for (version, _) in versions {
        let part = profile.within(&format!("block {version}"));
        let table = if args.shapes { part.key_averages_by_input_shape() } else { part.key_averages() };
        println!("{version} naive block {} on {device}, {} calls:\n{table}\n", shape.label(), args.calls);
    }
    if let Some(path) = &args.trace {
        profile.export_chrome_trace(path)?;
        println!("trace written to {} (open it in https://ui.perfetto.dev)", path.display());
    }
    // ANCHOR_END: profile
    Ok(())
}
