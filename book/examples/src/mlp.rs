//! The small model the book compiles again and again: a two-layer perceptron, written the way
//! a PyTorch `nn.Module` would be, with named parameters.

use engine::{Result, Tensor};

// ANCHOR: mlp
/// `softmax(gelu(x @ fc1ᵀ + b1) @ fc2ᵀ + b2)`: 4 features in, 8 hidden, 3 classes out.
pub struct Mlp {
    fc1_weight: Tensor,
    fc1_bias: Tensor,
    fc2_weight: Tensor,
    fc2_bias: Tensor,
}

impl Mlp {
    /// Random parameters from a seed, named like the parameters of a PyTorch module.
    pub fn new(seed: u64) -> Mlp {
        Mlp {
            fc1_weight: Tensor::randn(&[8, 4], seed).with_name("fc1.weight"),
            fc1_bias: Tensor::randn(&[8], seed + 1).with_name("fc1.bias"),
            fc2_weight: Tensor::randn(&[3, 8], seed + 2).with_name("fc2.weight"),
            fc2_bias: Tensor::randn(&[3], seed + 3).with_name("fc2.bias"),
        }
    }

    /// The forward pass: ordinary eager code, which `dynamo::compile` can also capture.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let hidden = x.linear(&self.fc1_weight, Some(&self.fc1_bias))?.gelu()?;
        hidden.linear(&self.fc2_weight, Some(&self.fc2_bias))?.softmax(-1)
    }
}
// ANCHOR_END: mlp
