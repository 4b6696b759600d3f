//! The examples of phase 5's engine page (`book/src/phase5/engine.md`): timing work on a device's
//! own clock, and comparing eager with compiled code interleaved. They print what was measured
//! against what is known, not the times themselves, which differ from run to run.

use std::time::Duration;

use engine::bench::{Bench, Stamp, spin};
use engine::{Device, Result, Tensor, dynamo};

/// Two stamps around work of a known duration.
pub fn stamps() -> Result<()> {
    // ANCHOR: stamps
    let device = Device::cuda_if_available();
    let (mut start, mut end) = (Stamp::new(device)?, Stamp::new(device)?);
    start.record()?;
    spin(device, Duration::from_millis(5))?; // on a GPU, a kernel: this returns at once
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
