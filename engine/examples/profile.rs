//! Profiles the naive transformer block of phase 5 (or another of its models), eager and
//! compiled, the way `torch.profiler.profile` is used on a module: one warm-up call outside the
//! profile (so compilation is not in it), then a few calls inside it, each in a named range;
//! prints both `key_averages()` tables and writes one Chrome trace of both for
//! <https://ui.perfetto.dev>.
//!
//! ```text
//! cargo run --release -p engine --example profile -- [--trace target/trace.json] [--device cpu|cuda] [--calls N]
//!     [--model block|small-block|large-block|mlp] [--batch N] [--dtype f32|bf16|f16]
//! ```
//!
//! By default the block has `BlockShape::SMALL` (4 sequences of 128 tokens, width 512, 8 heads)
//! on a GPU, and a quarter of its tokens (4 x 32 x 512) on the CPU, so that a debug build
//! finishes in seconds; `small-block` and `large-block` take the benchmark's shapes anywhere,
//! `mlp` the MLP 512-2048-512 at `--batch` rows.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use engine::profiler::{self, Profiler};
use engine::{DType, Device, Tensor, dynamo};
use workbook_models::phase5::{Block, BlockShape, MLP_FEATURES, Mlp};

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
    /// What to profile.
    #[arg(long, value_enum, default_value_t = Model::Block)]
    model: Model,
    /// Rows of the MLP's input (`--model mlp`).
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// The dtype of the model's parameters and input, as `model.to(dtype)` in PyTorch.
    #[arg(long, default_value_t = DType::F32)]
    dtype: DType,
}

/// The models this example profiles.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Model {
    /// The small block on a GPU, a quarter of its tokens on the CPU.
    Block,
    /// The benchmark's small block, 4 x 128 x 512.
    SmallBlock,
    /// The benchmark's large block, 8 x 1024 x 768.
    LargeBlock,
    /// The MLP 512-2048-512.
    Mlp,
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
    let (label, forward, x) = model(args.model, args.batch, device, args.dtype)?;
    let compiled = dynamo::compile(|x: Tensor| forward(&x));
    // Warm-up: eager kernels load, the compiled model traces and compiles, outside the profile.
    forward(&x)?;
    compiled.call(&x)?;
    device.synchronize()?;

    // ANCHOR: profile
    let versions: [(&str, &dyn Fn() -> engine::Result<Tensor>); 2] =
        [("eager", &|| forward(&x)), ("compiled", &|| compiled.call(&x))];
    let ((), profile) = Profiler::new().record_shapes(args.shapes).run(|| {
        for (version, run) in versions {
            for _ in 0..args.calls {
                profiler::range(version, run)?;
            }
            // Each version's GPU work ends inside its own part of the profile.
            device.synchronize()?;
        }
        Ok(())
    })?;
    for (version, _) in versions {
        let part = profile.within(version);
        let table = if args.shapes { part.key_averages_by_input_shape() } else { part.key_averages() };
        println!("{version} {label} on {device}, {} calls:\n{table}\n", args.calls);
    }
    if let Some(path) = &args.trace {
        profile.export_chrome_trace(path)?;
        println!("trace written to {} (open it in https://ui.perfetto.dev)", path.display());
    }
    // ANCHOR_END: profile
    Ok(())
}

/// A model's name, its forward function and an input for it, on `device`.
type Profiled = (String, Box<dyn Fn(&Tensor) -> engine::Result<Tensor>>, Tensor);

/// `model` built on `device` in `dtype` (the MLP with `batch` rows).
fn model(model: Model, batch: usize, device: Device, dtype: DType) -> Result<Profiled> {
    let shape = match (model, device) {
        (Model::Mlp, _) => {
            let mlp = Mlp::new(0, device)?.to_dtype(dtype)?;
            let x = Tensor::randn_dtype(&[batch, MLP_FEATURES], 1, dtype).to(device)?;
            return Ok((format!("MLP at batch {batch} in {dtype}"), Box::new(move |x| mlp.forward(x)), x));
        }
        (Model::Block, Device::Cpu) => BlockShape { seq: BlockShape::SMALL.seq / 4, ..BlockShape::SMALL },
        (Model::Block | Model::SmallBlock, _) => BlockShape::SMALL,
        (Model::LargeBlock, _) => BlockShape::LARGE,
    };
    let block = Block::new(shape, 0, device)?.to_dtype(dtype)?;
    let x = Tensor::randn_dtype(&[shape.batch, shape.seq, shape.d_model], 1, dtype).to(device)?;
    Ok((format!("naive block {} in {dtype}", shape.label()), Box::new(move |x| block.naive_forward(x)), x))
}
