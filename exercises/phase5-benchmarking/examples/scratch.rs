//! A place to try your phase 5 functions by hand: `cargo run -p phase5-benchmarking --example
//! scratch`. A function that is still `todo!()` prints one line saying so, and the others still
//! run. Edit freely: the grader never reads this file.

use engine::{Device, Tensor};
use phase5_benchmarking::models::Mlp;

#[path = "../../show.rs"]
mod show;
use show::{quiet_panics, show};

fn main() {
    quiet_panics();
    let device = Device::cuda_if_available();
    show("the MLP's output shape at batch 2", || {
        Ok(Mlp::new(0, device)?.forward(&Tensor::randn(&[2, 512], 1).to(device)?)?.shape().to_vec())
    });
}
