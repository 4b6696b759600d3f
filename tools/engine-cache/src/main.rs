//! `engine-cache`: fills the engine's kernel cache (`ENGINE_CACHE_DIR`) ahead of time, for GPUs
//! this machine need not have. NVRTC compiles CUDA C for any architecture without a GPU, so a
//! Docker image can be built with the CUBINs a learner's first call would otherwise wait for:
//! every eager kernel family (the flash attention, the GEMMs of the engine's own, each pointwise
//! op...) and the kernels Inductor generates for the course's models, forward and (for the MLP's
//! training step) backward.
//!
//! ```text
//! engine-cache warm --arch sm_80,sm_90      # every family, and the models' kernels
//! engine-cache warm --arch sm_90 --families-only
//! ```
//!
//! A GPU of another architecture, or another NVRTC version, compiles as before: the cache key
//! holds both.

use std::time::Instant;

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use engine::device::cuda::nvrtc::{Warmed, warm_eager_families};
use engine::fx::{self, Graph};
use engine::inductor::{Config, warm_cuda_cache};
use engine::{Device, Tensor, aot, dynamo};
use workbook_models::phase5::{Block, BlockShape, MLP_BATCHES, MLP_FEATURES, Mlp};

/// Fills the engine's kernel cache ahead of time.
#[derive(Parser)]
#[command(name = "engine-cache", about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile every eager kernel family, and the kernels of the course's models (the naive
    /// transformer block at both sizes, the MLP at every batch of the sweep, its training step's
    /// forward and backward at the largest), for each architecture, into `ENGINE_CACHE_DIR` (or
    /// the default cache). Needs NVRTC, not a GPU.
    Warm {
        /// GPU architectures, comma-separated: `sm_80` (A100), `sm_89` (L4, RTX 40), `sm_90`
        /// (H100, H200), `sm_100` (B200), `sm_120` (RTX 50).
        #[arg(long, value_delimiter = ',', required = true)]
        arch: Vec<String>,
        /// Only the eager kernel families, not the models' generated kernels.
        #[arg(long)]
        families_only: bool,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Warm { arch, families_only } => warm(&arch, families_only),
    }
}

/// The graphs Dynamo captures from the course's models, as their first compiled call would: the
/// naive block at both sizes, the speed challenge's starting block at the size the grader times
/// (two graphs around its break), the MLP at every batch of the sweep, and the forward and
/// backward graphs AOTAutograd makes of the MLP's loss (MSE) at the largest batch, where its
/// reductions over the batch are longest.
fn model_graphs() -> Result<Vec<(String, Graph)>> {
    let mut graphs = Vec::new();
    // Traced with symbolic tensors, nothing computed: the same graph Dynamo captures.
    let mut traced = |name: String, f: &dyn Fn(&Tensor) -> engine::Result<Tensor>, x: Tensor| -> Result<()> {
        graphs.push((name, fx::trace(&[x], |x| Ok(vec![f(&x[0])?]))?.graph));
        Ok(())
    };
    for shape in [BlockShape::SMALL, BlockShape::LARGE] {
        let block = Block::new(shape, 0, Device::Cpu)?;
        let x = Tensor::randn(&[shape.batch, shape.seq, shape.d_model], 1);
        traced(format!("naive block {}", shape.label()), &|x| block.naive_forward(x), x)?;
    }
    let mlp = Mlp::new(0, Device::Cpu)?;
    for batch in MLP_BATCHES {
        traced(format!("mlp batch {batch}"), &|x| mlp.forward(x), Tensor::randn(&[batch, MLP_FEATURES], 2))?;
    }
    let batch = MLP_BATCHES[MLP_BATCHES.len() - 1];
    let mut inputs = vec![Tensor::randn(&[batch, MLP_FEATURES], 3), Tensor::randn(&[batch, MLP_FEATURES], 4)];
    inputs.extend(mlp.parameters());
    let loss = fx::trace(&inputs, |t| {
        let model =
            Mlp { fc1_weight: t[2].clone(), fc1_bias: t[3].clone(), fc2_weight: t[4].clone(), fc2_bias: t[5].clone() };
        Ok(vec![model.forward(&t[0])?.mse_loss(&t[1])?])
    })?;
    let partition = aot::min_cut_partition(&loss.graph, &[false, false, true, true, true, true])?;
    graphs.push((format!("mlp training batch {batch}, forward"), partition.forward));
    graphs.push((format!("mlp training batch {batch}, backward"), partition.backward));
    // A graph break needs the values before it: run, on the CPU, at the small size only.
    let shape = BlockShape::SMALL;
    let block = Block::new(shape, 0, Device::Cpu)?;
    let x = Tensor::randn(&[shape.batch, shape.seq, shape.d_model], 1);
    for (i, graph) in dynamo::explain(|x: Tensor| block.challenge_forward(&x)).call(&x)?.graphs.into_iter().enumerate()
    {
        graphs.push((format!("challenge block {}, graph {i}", shape.label()), graph));
    }
    Ok(graphs)
}

fn warm(archs: &[String], families_only: bool) -> Result<()> {
    for arch in archs {
        if !arch.starts_with("sm_") || arch[3..].parse::<u32>().is_err() {
            bail!("unknown architecture `{arch}`: name it as NVRTC does, `sm_` and the compute capability (sm_90)");
        }
    }
    let graphs = if families_only { Vec::new() } else { model_graphs()? };
    let cache = engine::codecache::DiskCache::global();
    println!("warming {} for {}", cache.dir().display(), archs.join(", "));
    for arch in archs {
        let start = Instant::now();
        let families = warm_eager_families(arch)?;
        println!("{arch}: eager kernel families: {}", counts(families));
        for (name, graph) in &graphs {
            let warmed = warm_cuda_cache(graph, arch, &Config::default())?;
            println!("{arch}: {name}: {}", counts(warmed));
        }
        println!("{arch}: done in {:.1} s", start.elapsed().as_secs_f64());
    }
    Ok(())
}

fn counts(w: Warmed) -> String {
    format!("{} compiled, {} already cached", w.compiled, w.cached)
}
