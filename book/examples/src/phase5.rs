//! The examples of phase 5's engine page (`book/src/phase5/engine.md`): timing work on a device's
//! own clock, comparing eager with compiled code interleaved, and profiling both. They print what
//! was measured against what is known, not the times themselves, which differ from run to run.

use std::time::Duration;

use engine::bench::{Bench, Stamp, spin};
use engine::precision::autocast;
use engine::profiler::{self, SortBy};
use engine::{DType, Device, Result, Tensor, dynamo};
use workbook_models::phase5::{Block, BlockShape, Mlp};

/// Two stamps around work of a known duration.
pub fn stamps() -> Result<()> {
    // ANCHOR: stamps
    let device = Device::cuda_if_available();
    let (mut start, mut end) = (Stamp::new(device)?, Stamp::new(device)?);
    start.record()?;
    spin(device, Duration::from_millis(5))?; // queued (a kernel on a GPU): this returns at once
    end.record()?;
    let seconds = end.seconds_since(&start)?; // waits until the device reaches `end`
    println!("the stamps bracket the 5 ms of work: {}", seconds >= 0.005);
    // ANCHOR_END: stamps
    Ok(())
}

/// Eager against compiled, interleaved, with the engine's timer.
pub fn interleaved() -> Result<()> {
    // ANCHOR: interleaved
    let device = Device::cuda_if_available();
    let x = Tensor::randn(&[1 << 20], 0).to(device)?;
    let f = |x: Tensor| x.mul(2.0)?.relu()?.add(1.0);
    let compiled = dynamo::compile(f);
    let bench = Bench::new(device).warmup(3).samples(25);
    let mut eager = || f(x.clone()).map(drop);
    let mut fused = || compiled.call(&x).map(drop);
    let timings = bench.run_interleaved(&mut [&mut eager, &mut fused])?;
    // Each timing keeps its samples: median(), quantile(q), min(), max() in seconds, spread().
    let (eager_t, compiled_t) = (&timings[0], &timings[1]);
    println!("{} samples each", compiled_t.samples().len());
    // Three passes over 4 MB fused into one: a margin no noise closes.
    println!("compiled faster than eager: {}", compiled_t.median() < eager_t.median());
    // ANCHOR_END: interleaved
    Ok(())
}

/// A profile of eager and compiled code, each in a named range: its table and its trace.
pub fn profile() -> Result<()> {
    // ANCHOR: profile
    let device = Device::cuda_if_available();
    let (x, w) = (Tensor::randn(&[256, 256], 0).to(device)?, Tensor::randn(&[256, 256], 1).to(device)?);
    let f = |x: Tensor| x.matmul(&w)?.relu()?.mul(2.0)?.add(1.0);
    let compiled = dynamo::compile(f);
    compiled.call(&x)?; // traced and compiled here, outside the profile
    let ((), profile) = profiler::profile(|| {
        for _ in 0..3 {
            profiler::range("eager", || f(x.clone()))?;
            profiler::range("compiled", || compiled.call(&x))?;
        }
        device.synchronize() // the last kernels end inside the profile
    })?;
    // `println!("{}", profile.key_averages())` prints the whole table, times included; here the
    // rows by calls, whose names and counts are the same on every run.
    for row in profile.key_averages().sort_by(SortBy::Calls).rows() {
        println!("{:<26} {:<9} {} calls", row.name, row.kind.label(), row.calls);
    }
    let trace = std::env::temp_dir().join("phase5-profile.json");
    profile.export_chrome_trace(&trace)?; // open it in https://ui.perfetto.dev
    println!("trace: {} spans on the host track, kernels on each GPU's", profile.events().len());
    // ANCHOR_END: profile
    Ok(())
}

/// How far bf16 and f16 under autocast move the MLP's and a block's outputs from float32, eager
/// and compiled (precision page).
pub fn precision_error() -> Result<()> {
    // ANCHOR: precision_error
    let mlp = Mlp::new(0, Device::Cpu)?;
    let shape = BlockShape { batch: 2, seq: 64, d_model: 256, heads: 4 };
    let block = Block::new(shape, 0, Device::Cpu)?;
    let (x_mlp, x_block) = (Tensor::randn(&[64, 512], 1), Tensor::randn(&[2, 64, 256], 2));
    type Forward<'a> = &'a dyn Fn(Tensor) -> Result<Tensor>;
    let models: [(&str, Forward, &Tensor); 2] = [
        ("mlp 512-2048-512", &|x| mlp.forward(&x), &x_mlp),
        ("block 2x64x256", &|x| block.naive_forward(&x), &x_block),
    ];
    for (name, forward, x) in models {
        let reference = forward(x.clone())?.to_vec()?; // float32, eager
        let scale = reference.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let compiled = dynamo::compile(|x: Tensor| forward(x));
        for dtype in [DType::BF16, DType::F16] {
            let eager = autocast(Device::Cpu, Some(dtype), || forward(x.clone()))?;
            let fused = autocast(Device::Cpu, Some(dtype), || compiled.call(x))?;
            for (how, y) in [("eager", eager), ("compiled", fused)] {
                let y = y.to_vec()?;
                let error = y.iter().zip(&reference).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / scale;
                println!("{name:<17} {dtype:<4} {how:<8} error {:.2} eps", error / dtype.epsilon());
            }
        }
    }
    // ANCHOR_END: precision_error
    Ok(())
}
