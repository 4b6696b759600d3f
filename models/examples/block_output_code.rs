//! Prints the output code Inductor generates for phase 5's naive transformer block at
//! `BlockShape::SMALL`, for the CPU and for CUDA (generating CUDA C needs no GPU).
//!
//! ```text
//! ENGINE_LOGS=fusion cargo run -p workbook-models --example block_output_code
//! ```

use engine::inductor::Config;
use engine::{Device, Result, Tensor, fx};
use workbook_models::phase5::{Block, BlockShape};

fn main() -> Result<()> {
    let shape = BlockShape::SMALL;
    let block = Block::new(shape, 0, Device::Cpu)?;
    let x = Tensor::randn(&[shape.batch, shape.seq, shape.d_model], 1).with_name("x");
    let traced = fx::trace(&[x], |x| Ok(vec![block.naive_forward(&x[0])?]))?;
    for device in [Device::Cpu, Device::Cuda(0)] {
        println!("{}", engine::inductor::generate(&traced.graph, device, &Config::default())?);
    }
    Ok(())
}
