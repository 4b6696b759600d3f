//! Phase 1's model: the MLP every phase 1 exercise compiles, and the backends they compare.
//! Given, not an exercise: the exercise crate and its solved twin both re-export it as `model`.

use engine::backends::{AotEager, Backend, Eager, Inductor};
use engine::{Device, Result, Tensor};

/// Features of one input row.
pub const IN_FEATURES: usize = 16;
/// Width of the hidden layer.
pub const HIDDEN: usize = 32;
/// Classes the model scores.
pub const OUT_FEATURES: usize = 8;

/// A two-layer classifier head, `softmax(fc2(gelu(fc1(x))))`, with seeded weights. Its
/// parameters carry names (`fc1.weight`, ...) so that captured graphs read like PyTorch's.
#[derive(Clone)]
pub struct Mlp {
    /// `[HIDDEN, IN_FEATURES]`
    pub fc1_weight: Tensor,
    /// `[HIDDEN]`
    pub fc1_bias: Tensor,
    /// `[OUT_FEATURES, HIDDEN]`
    pub fc2_weight: Tensor,
    /// `[OUT_FEATURES]`
    pub fc2_bias: Tensor,
}

impl Mlp {
    /// The model with weights drawn from `seed`: the same seed gives the same model.
    pub fn new(seed: u64) -> Mlp {
        let seed = seed.wrapping_mul(4);
        Mlp {
            fc1_weight: Tensor::randn(&[HIDDEN, IN_FEATURES], seed).with_name("fc1.weight"),
            fc1_bias: Tensor::randn(&[HIDDEN], seed + 1).with_name("fc1.bias"),
            fc2_weight: Tensor::randn(&[OUT_FEATURES, HIDDEN], seed + 2).with_name("fc2.weight"),
            fc2_bias: Tensor::randn(&[OUT_FEATURES], seed + 3).with_name("fc2.bias"),
        }
    }

    /// The same model with its parameters on `device` (names kept).
    pub fn to(&self, device: Device) -> Result<Mlp> {
        Ok(Mlp {
            fc1_weight: self.fc1_weight.to(device)?,
            fc1_bias: self.fc1_bias.to(device)?,
            fc2_weight: self.fc2_weight.to(device)?,
            fc2_bias: self.fc2_bias.to(device)?,
        })
    }

    /// Class probabilities for a batch `x` of shape `[batch, IN_FEATURES]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let hidden = x.linear(&self.fc1_weight, Some(&self.fc1_bias))?.gelu()?;
        hidden.linear(&self.fc2_weight, Some(&self.fc2_bias))?.softmax(-1)
    }
}

/// A batch of `batch` input rows drawn from `seed`.
pub fn example_input(batch: usize, seed: u64) -> Tensor {
    Tensor::randn(&[batch, IN_FEATURES], seed)
}

/// The backends the exercises compare, in order: adding a backend is one line here.
pub fn backends() -> Vec<Box<dyn Backend>> {
    vec![Box::new(Eager), Box::new(AotEager), Box::new(Inductor::default())]
}

/// The model (seed 0) and a batch of `batch` inputs (seed 1), placed on `device`.
pub fn workload(device: Device, batch: usize) -> Result<(Mlp, Tensor)> {
    Ok((Mlp::new(0).to(device)?, example_input(batch, 1).to(device)?))
}
