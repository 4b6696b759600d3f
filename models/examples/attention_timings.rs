//! Times the fused attention op and the naive transformer block on the default device: the figures
//! of the book's attention page (`book/src/phase4/attention.md`). Medians of 50 CUDA-event samples (L2 flushed before each), printed with
//! their spread.
//!
//! 1. `scaled_dot_product_attention` at 8x12x1024x64 against the engine's eager naive attention
//!    (`q @ k^T / sqrt(d)`, the naive softmax, `@ v`), and its FLOP rate;
//! 2. phase 5's naive block compiled by Inductor (which rewrites its attention into the fused op)
//!    at `BlockShape::SMALL` and `LARGE`, beside the same block run eagerly;
//! 3. a 16k-token, 1-batch, 8-head attention, whose naive form would store 8 GiB of scores.
//!
//! ```text
//! cargo run --release -p workbook-models --example attention_timings
//! ```

use engine::bench::{Bench, Timing};
use engine::op::AttentionSizes;
use engine::{Device, Result, Tensor, dynamo};
use workbook_models::phase5::{Block, BlockShape, naive_softmax};

/// The H100 SXM's f32 peak without tensor cores (132 SMs x 128 lanes x 2 flops x 1.98 GHz).
const F32_PEAK_FLOPS: f64 = 66.9e12;

/// The H100 SXM's dense TF32 tensor-core peak (NVIDIA's datasheet) over three: the ceiling of the
/// fused kernel, which takes each f32 product as three TF32 products.
const TF32X3_PEAK_FLOPS: f64 = 494.7e12 / 3.0;

fn naive_attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let scores = q.matmul(&k.transpose(-2, -1)?)?.div((q.shape()[3] as f32).sqrt())?;
    naive_softmax(&scores)?.matmul(v)
}

fn show(label: &str, t: &Timing) {
    println!("{label:<58} median {:>9.4} ms  (min {:.4}, max {:.4})", t.median() * 1e3, t.min() * 1e3, t.max() * 1e3);
}

fn qkv(shape: [usize; 4], device: Device) -> Result<[Tensor; 3]> {
    let make = |seed| Tensor::randn(&shape, seed).to(device);
    Ok([make(1)?, make(2)?, make(3)?])
}

fn main() -> Result<()> {
    let device = Device::cuda_if_available();
    let bench = Bench::new(device).warmup(5).samples(50);
    if let Device::Cuda(i) = device {
        let facts = engine::device::cuda::CudaDevice::get(i)?.facts().clone();
        println!("device: {} ({} SMs)", facts.name, facts.multiprocessors);
    }

    let shape = [8, 12, 1024, 64];
    let [q, k, v] = qkv(shape, device)?;
    let sizes = AttentionSizes::of(&shape, &shape, &shape);
    let fused = |causal: bool| q.scaled_dot_product_attention(&k, &v, None, causal, None).map(drop);
    let times = bench.run_interleaved(&mut [
        &mut || fused(false),
        &mut || fused(true),
        &mut || naive_attention(&q, &k, &v).map(drop),
        &mut || q.matmul(&k.transpose(-2, -1)?)?.div(8.0)?.softmax(-1)?.matmul(&v).map(drop),
    ])?;
    show("sdpa 8x12x1024x64, fused", &times[0]);
    show("sdpa 8x12x1024x64, fused, causal", &times[1]);
    show("sdpa 8x12x1024x64, eager naive (naive softmax)", &times[2]);
    show("sdpa 8x12x1024x64, eager naive (Tensor::softmax)", &times[3]);
    let rate = sizes.flops() / times[0].median();
    println!(
        "fused: {:.1} GFLOP in {:.3} ms = {:.1} TFLOP/s, {:.0}% of the f32 units' peak ({:.1} TFLOP/s), {:.0}% of \
         the tensor cores' TF32 peak over three ({:.1} TFLOP/s); {:.2}x faster than eager naive",
        sizes.flops() / 1e9,
        times[0].median() * 1e3,
        rate / 1e12,
        100.0 * rate / F32_PEAK_FLOPS,
        F32_PEAK_FLOPS / 1e12,
        100.0 * rate / TF32X3_PEAK_FLOPS,
        TF32X3_PEAK_FLOPS / 1e12,
        times[2].median() / times[0].median()
    );

    for block_shape in [BlockShape::SMALL, BlockShape::LARGE] {
        let block = Block::new(block_shape, 0, device)?;
        let x = Tensor::randn(&[block_shape.batch, block_shape.seq, block_shape.d_model], 7).to(device)?;
        let compiled = dynamo::compile(|x: Tensor| block.naive_forward(&x));
        let want = block.naive_forward(&x)?.to_vec()?;
        let got = compiled.call(&x)?.to_vec()?;
        let worst = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let times = bench
            .run_interleaved(&mut [&mut || compiled.call(&x).map(drop), &mut || block.naive_forward(&x).map(drop)])?;
        show(&format!("block {} compiled (max |compiled - eager| {worst:.2e})", block_shape.label()), &times[0]);
        show(&format!("block {} eager", block_shape.label()), &times[1]);
    }

    let long = [1, 8, 16384, 64];
    let [q, k, v] = qkv(long, device)?;
    let t = Bench::new(device)
        .warmup(2)
        .samples(10)
        .run(|| q.scaled_dot_product_attention(&k, &v, None, false, None).map(drop))?;
    let scores_gib = (8.0 * 16384.0 * 16384.0 * 4.0) / f64::from(1u32 << 30);
    show("sdpa 1x8x16384x64, fused (no [L, S] buffer)", &t);
    println!("  its inputs and output: 4 x 32 MiB; the naive form's scores alone: {scores_gib:.0} GiB per tensor");
    let causal = Bench::new(device)
        .warmup(2)
        .samples(10)
        .run(|| q.scaled_dot_product_attention(&k, &v, None, true, None).map(drop))?;
    show("sdpa 1x8x16384x64, fused, causal", &causal);
    Ok(())
}
