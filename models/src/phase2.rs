//! Phase 2's models, read and transformed by the exercises (given; re-exported as `model`).

use engine::{Result, Tensor};

/// One attention head with a residual connection, small enough to read its graph line by line.
pub struct Attention {
    /// Query projection, `[d, d]`.
    pub wq: Tensor,
    /// Key projection, `[d, d]`.
    pub wk: Tensor,
    /// Value projection, `[d, d]`.
    pub wv: Tensor,
    /// Layer-norm scale, `[d]`.
    pub gamma: Tensor,
    /// Layer-norm shift, `[d]`.
    pub beta: Tensor,
}

/// The model width.
pub const WIDTH: usize = 8;

impl Attention {
    /// Weights drawn from `seed`, named as they should read in graphs.
    pub fn new(seed: u64) -> Attention {
        let w = |i: u64, name: &str| Tensor::randn(&[WIDTH, WIDTH], seed + i).mul(0.3).unwrap().with_name(name);
        Attention {
            wq: w(0, "wq"),
            wk: w(1, "wk"),
            wv: w(2, "wv"),
            gamma: Tensor::ones(&[WIDTH]).with_name("gamma"),
            beta: Tensor::zeros(&[WIDTH]).with_name("beta"),
        }
    }

    /// `x: [tokens, WIDTH]`. Some lines make one node, some several, some none.
    // ANCHOR: attention
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (q, k, v) = (x.linear(&self.wq, None)?, x.linear(&self.wk, None)?, x.linear(&self.wv, None)?);
        let scale = 1.0 / (WIDTH as f32).sqrt();
        let scores = q.matmul(&k.t()?)?.mul(scale)?;
        let attention = scores.softmax(-1)?.matmul(&v)?;
        attention.add(x)?.layer_norm(&self.gamma, &self.beta, 1e-5)
    }
    // ANCHOR_END: attention
}

/// An input of `tokens` rows for [`Attention`].
pub fn example_input(tokens: usize, seed: u64) -> Tensor {
    Tensor::randn(&[tokens, WIDTH], seed)
}

/// Code with work a compiler can remove: a value nobody uses and a subexpression computed twice.
// ANCHOR: wasteful
pub fn wasteful(x: &Tensor) -> Result<Tensor> {
    let unused = x.exp()?.sum(0, false)?; // computed, never used
    let _ = unused;
    let a = x.mul(2.0)?.tanh()?;
    let b = x.mul(2.0)?.tanh()?; // the same as `a`
    a.add(&b)?.relu()
}
// ANCHOR_END: wasteful

/// The engine's shape rule for the ops you do not broadcast yourself (reductions, matmul,
/// softmax, views...): `Op::infer_shape`, refused for the pointwise ops (`Op::Unary`,
/// `Op::Binary`, `Op::Where`), whose broadcasting is what `shape_propagation` asks you to write.
pub fn shape_rule(
    op: &engine::op::Op,
    operands: &[Option<&[usize]>],
    location: engine::SourceLocation,
) -> Result<Vec<usize>> {
    use engine::op::Op;
    match op {
        Op::Unary(_) | Op::Binary(_) | Op::Where => Err(engine::Error::InvalidArgument {
            op: op.name(),
            message: "a pointwise op broadcasts its operands: use your own `broadcast` for it".into(),
            location,
        }),
        _ => op.infer_shape(operands, location),
    }
}
