//! Naive attention, compiled: `softmax(q @ k^T / sqrt(d)) @ v` written from two matrix products
//! and a softmax, traced, and handed to Inductor, whose pattern matcher replaces the whole
//! subgraph by one `scaled_dot_product_attention`, called as the `flash_attention` extern kernel.
//! Prints the output code for the default device (CUDA when it can run here, else the CPU).
//!
//! ```text
//! cargo run -p engine --example naive_attention
//! ENGINE_LOGS=fusion cargo run -p engine --example naive_attention   # which pattern matched where
//! ```

use engine::inductor::{Config, OutputCode};
use engine::{Device, Result, Tensor, fx};

/// Batch, heads, sequence length (not a multiple of the kernel's 64-key tile) and head dim.
pub const SHAPE: [usize; 4] = [2, 4, 100, 64];

// ANCHOR: naive
/// Attention as it is first written: scores, a softmax over the keys, a weighted sum of values.
pub fn naive_attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let head_dim = q.shape()[q.rank() - 1] as f32;
    let scores = q.matmul(&k.transpose(-2, -1)?)?.div(head_dim.sqrt())?;
    scores.softmax(-1)?.matmul(v)
}
// ANCHOR_END: naive

/// The output code Inductor generates for [`naive_attention`] on `device`.
pub fn output_code(device: Device) -> Result<OutputCode> {
    let inputs: Vec<Tensor> =
        ["q", "k", "v"].iter().enumerate().map(|(i, name)| Tensor::randn(&SHAPE, i as u64).with_name(name)).collect();
    let traced = fx::trace(&inputs, |x| Ok(vec![naive_attention(&x[0], &x[1], &x[2])?]))?;
    engine::inductor::generate(&traced.graph, device, &Config::default())
}

fn main() -> Result<()> {
    println!("{}", output_code(Device::cuda_if_available())?);
    Ok(())
}
