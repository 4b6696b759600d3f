//! Phase 5's workloads: the models the course times. The benchmark commands (`engine-bench
//! models`, `roofline`, `modes`), the phase 5 exercises and their checks all build them from here,
//! so the numbers the book quotes and the numbers a learner measures come from the same code.
//!
//! Each is written the way people first write it, from primitive ops ("naive"): a softmax as
//! `exp(x - max) / sum`, a layer norm as two means, attention as two matrix products around a
//! hand-written softmax. That is what a compiler is for; the fused ops (`Tensor::softmax`,
//! `Tensor::layer_norm`) are what it should turn them into.

use engine::{Device, Error, Result, SourceLocation, Tensor};

/// Input and output features of the benchmark MLP.
pub const MLP_FEATURES: usize = 512;
/// Hidden width of the benchmark MLP.
pub const MLP_HIDDEN: usize = 2048;
/// The batch sizes the course sweeps the MLP over.
pub const MLP_BATCHES: [usize; 4] = [1, 16, 256, 4096];
/// The epsilon of every layer norm here (PyTorch's default).
pub const LAYER_NORM_EPS: f32 = 1e-5;

/// The MLP 512-2048-512: `linear -> gelu -> linear`, with seeded weights.
#[derive(Clone)]
pub struct Mlp {
    /// `[MLP_HIDDEN, MLP_FEATURES]`
    pub fc1_weight: Tensor,
    /// `[MLP_HIDDEN]`
    pub fc1_bias: Tensor,
    /// `[MLP_FEATURES, MLP_HIDDEN]`
    pub fc2_weight: Tensor,
    /// `[MLP_FEATURES]`
    pub fc2_bias: Tensor,
}

impl Mlp {
    /// The model with weights drawn from `seed` on `device`, scaled like PyTorch's default
    /// initialisation (`1/sqrt(fan_in)`) so that activations stay near unit size.
    pub fn new(seed: u64, device: Device) -> Result<Mlp> {
        let seed = seed.wrapping_mul(8);
        Ok(Mlp {
            fc1_weight: param(&[MLP_HIDDEN, MLP_FEATURES], seed, MLP_FEATURES, "fc1.weight", device)?,
            fc1_bias: param(&[MLP_HIDDEN], seed + 1, MLP_FEATURES, "fc1.bias", device)?,
            fc2_weight: param(&[MLP_FEATURES, MLP_HIDDEN], seed + 2, MLP_HIDDEN, "fc2.weight", device)?,
            fc2_bias: param(&[MLP_FEATURES], seed + 3, MLP_HIDDEN, "fc2.bias", device)?,
        })
    }

    /// The parameters, in the order of the fields (`model.parameters()`).
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.fc1_weight.clone(), self.fc1_bias.clone(), self.fc2_weight.clone(), self.fc2_bias.clone()]
    }

    /// The same model with every parameter a leaf that requires grad (for training).
    pub fn requires_grad_(&self) -> Mlp {
        Mlp {
            fc1_weight: self.fc1_weight.requires_grad_(true),
            fc1_bias: self.fc1_bias.requires_grad_(true),
            fc2_weight: self.fc2_weight.requires_grad_(true),
            fc2_bias: self.fc2_bias.requires_grad_(true),
        }
    }

    /// `fc2(gelu(fc1(x)))` for `x` of shape `[batch, MLP_FEATURES]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.fc1_weight, Some(&self.fc1_bias))?.gelu()?.linear(&self.fc2_weight, Some(&self.fc2_bias))
    }
}

/// The shape of a transformer block's input and its attention heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockShape {
    /// Sequences in the batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq: usize,
    /// Model width (`heads * head_dim`).
    pub d_model: usize,
    /// Attention heads.
    pub heads: usize,
}

impl BlockShape {
    /// 4 sequences of 128 tokens, width 512, 8 heads of 64: the small block the course times.
    pub const SMALL: BlockShape = BlockShape { batch: 4, seq: 128, d_model: 512, heads: 8 };
    /// 8 sequences of 1024 tokens, width 768, 12 heads of 64: the large block.
    pub const LARGE: BlockShape = BlockShape { batch: 8, seq: 1024, d_model: 768, heads: 12 };

    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads
    }

    /// `"4x128x512"`: how tables and the book name the shape.
    pub fn label(&self) -> String {
        format!("{}x{}x{}", self.batch, self.seq, self.d_model)
    }
}

/// A pre-norm transformer block (attention, then an MLP of width `4 * d_model`, each behind a
/// layer norm and a residual add), with seeded weights.
#[derive(Clone)]
pub struct Block {
    /// Input width and heads.
    pub shape: BlockShape,
    /// Layer norm before attention: `[d_model]` each.
    pub ln1_weight: Tensor,
    /// See `ln1_weight`.
    pub ln1_bias: Tensor,
    /// Query, key and value projections: `[d_model, d_model]` weights, `[d_model]` biases.
    pub wq: Tensor,
    /// See `wq`.
    pub bq: Tensor,
    /// See `wq`.
    pub wk: Tensor,
    /// See `wq`.
    pub bk: Tensor,
    /// See `wq`.
    pub wv: Tensor,
    /// See `wq`.
    pub bv: Tensor,
    /// Output projection: `[d_model, d_model]`, `[d_model]`.
    pub wo: Tensor,
    /// See `wo`.
    pub bo: Tensor,
    /// Layer norm before the MLP: `[d_model]` each.
    pub ln2_weight: Tensor,
    /// See `ln2_weight`.
    pub ln2_bias: Tensor,
    /// MLP up-projection: `[4 * d_model, d_model]`, `[4 * d_model]`.
    pub fc1_weight: Tensor,
    /// See `fc1_weight`.
    pub fc1_bias: Tensor,
    /// MLP down-projection: `[d_model, 4 * d_model]`, `[d_model]`.
    pub fc2_weight: Tensor,
    /// See `fc2_weight`.
    pub fc2_bias: Tensor,
}

impl Block {
    /// A block of `shape` with weights drawn from `seed` on `device`. Layer-norm weights start at
    /// one and biases at zero, as in PyTorch.
    pub fn new(shape: BlockShape, seed: u64, device: Device) -> Result<Block> {
        let d = shape.d_model;
        let seed = seed.wrapping_mul(16);
        let ones = |name: &str| Tensor::ones(&[d]).with_name(name).to(device);
        let zeros = |name: &str| Tensor::zeros(&[d]).with_name(name).to(device);
        Ok(Block {
            shape,
            ln1_weight: ones("ln1.weight")?,
            ln1_bias: zeros("ln1.bias")?,
            wq: param(&[d, d], seed, d, "attn.q.weight", device)?,
            bq: param(&[d], seed + 1, d, "attn.q.bias", device)?,
            wk: param(&[d, d], seed + 2, d, "attn.k.weight", device)?,
            bk: param(&[d], seed + 3, d, "attn.k.bias", device)?,
            wv: param(&[d, d], seed + 4, d, "attn.v.weight", device)?,
            bv: param(&[d], seed + 5, d, "attn.v.bias", device)?,
            wo: param(&[d, d], seed + 6, d, "attn.out.weight", device)?,
            bo: param(&[d], seed + 7, d, "attn.out.bias", device)?,
            ln2_weight: ones("ln2.weight")?,
            ln2_bias: zeros("ln2.bias")?,
            fc1_weight: param(&[4 * d, d], seed + 8, d, "mlp.fc1.weight", device)?,
            fc1_bias: param(&[4 * d], seed + 9, d, "mlp.fc1.bias", device)?,
            fc2_weight: param(&[d, 4 * d], seed + 10, 4 * d, "mlp.fc2.weight", device)?,
            fc2_bias: param(&[d], seed + 11, 4 * d, "mlp.fc2.bias", device)?,
        })
    }

    /// The parameters, in the order of the fields (`model.parameters()`).
    pub fn parameters(&self) -> Vec<Tensor> {
        [
            &self.ln1_weight,
            &self.ln1_bias,
            &self.wq,
            &self.bq,
            &self.wk,
            &self.bk,
            &self.wv,
            &self.bv,
            &self.wo,
            &self.bo,
            &self.ln2_weight,
            &self.ln2_bias,
            &self.fc1_weight,
            &self.fc1_bias,
            &self.fc2_weight,
            &self.fc2_bias,
        ]
        .into_iter()
        .cloned()
        .collect()
    }

    /// The same block with every parameter a leaf that requires grad (for training).
    pub fn requires_grad_(&self) -> Block {
        let p = |t: &Tensor| t.requires_grad_(true);
        Block {
            shape: self.shape,
            ln1_weight: p(&self.ln1_weight),
            ln1_bias: p(&self.ln1_bias),
            wq: p(&self.wq),
            bq: p(&self.bq),
            wk: p(&self.wk),
            bk: p(&self.bk),
            wv: p(&self.wv),
            bv: p(&self.bv),
            wo: p(&self.wo),
            bo: p(&self.bo),
            ln2_weight: p(&self.ln2_weight),
            ln2_bias: p(&self.ln2_bias),
            fc1_weight: p(&self.fc1_weight),
            fc1_bias: p(&self.fc1_bias),
            fc2_weight: p(&self.fc2_weight),
            fc2_bias: p(&self.fc2_bias),
        }
    }

    /// The block written naively: layer norms and the softmax from primitive ops, three separate
    /// projections, heads split with reshapes and transposes. `x`: `[batch, seq, d_model]`.
    pub fn naive_forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_checking_scores(x, false)
    }

    /// The speed challenge's starting point (phase 5, `challenge`): [`Block::naive_forward`] as
    /// real code often has it, correct and slow. On top of the naive block's hand-written softmax
    /// and layer norms and its three separate projections, a sanity check reads the attention
    /// scores back to the host to see that they are finite: a graph break, so the block compiles
    /// into two graphs and waits for the GPU in the middle.
    pub fn challenge_forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_checking_scores(x, true)
    }

    /// The naive block; with `check_scores`, the attention scores are read back to the host.
    fn forward_checking_scores(&self, x: &Tensor, check_scores: bool) -> Result<Tensor> {
        let attention = self.naive_attention(&naive_layer_norm(x, &self.ln1_weight, &self.ln1_bias)?, check_scores)?;
        let h = x.add(&attention)?;
        let normed = naive_layer_norm(&h, &self.ln2_weight, &self.ln2_bias)?;
        let mlp = normed.linear(&self.fc1_weight, Some(&self.fc1_bias))?.gelu()?;
        h.add(&mlp.linear(&self.fc2_weight, Some(&self.fc2_bias))?)
    }

    /// Multi-head self-attention of the normed input, naively: `softmax(q k^T / sqrt(d)) v`;
    /// with `check_scores`, the scores' sum is read on the host (a graph break).
    fn naive_attention(&self, x: &Tensor, check_scores: bool) -> Result<Tensor> {
        let (BlockShape { d_model, heads, .. }, [batch, seq]) = (self.shape, batch_and_seq(x, self.shape));
        let head_dim = self.shape.head_dim();
        // [batch, seq, d_model] -> [batch, heads, seq, head_dim]
        let split = |t: Tensor| t.reshape(&[batch, seq, heads, head_dim])?.transpose(1, 2);
        let q = split(x.linear(&self.wq, Some(&self.bq))?)?;
        let k = split(x.linear(&self.wk, Some(&self.bk))?)?;
        let v = split(x.linear(&self.wv, Some(&self.bv))?)?;
        let scores = q.matmul(&k.transpose(-2, -1)?)?.div((head_dim as f32).sqrt())?;
        if check_scores && !scores.sum_all()?.item()?.is_finite() {
            return Err(Error::InvalidArgument {
                op: "challenge_forward",
                message: "the attention scores are not finite".into(),
                location: SourceLocation::caller(),
            });
        }
        let attended = naive_softmax(&scores)?.matmul(&v)?;
        let merged = attended.transpose(1, 2)?.contiguous()?.reshape(&[batch, seq, d_model])?;
        merged.linear(&self.wo, Some(&self.bo))
    }
}

/// The batch and sequence length of a block's input `x` (`[batch, seq, d_model]`): a block runs
/// at any of them (a sequence-length schedule calls one block at several lengths). For an input
/// of fewer dims, the block's own, so that the reshape fails with both shapes in its error.
fn batch_and_seq(x: &Tensor, shape: BlockShape) -> [usize; 2] {
    match x.shape() {
        [batch, seq, ..] => [*batch, *seq],
        _ => [shape.batch, shape.seq],
    }
}

/// Softmax over the last dimension from primitives: `exp(x - max) / sum(exp(x - max))`.
pub fn naive_softmax(x: &Tensor) -> Result<Tensor> {
    let shifted = x.sub(&x.amax(-1, true)?)?.exp()?;
    shifted.div(&shifted.sum(-1, true)?)
}

/// Layer norm over the last dimension from primitives: two means, a square root, an affine map.
pub fn naive_layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor) -> Result<Tensor> {
    let centered = x.sub(&x.mean(-1, true)?)?;
    let variance = centered.mul(&centered)?.mean(-1, true)?;
    centered.div(&variance.add(LAYER_NORM_EPS)?.sqrt()?)?.mul(weight)?.add(bias)
}

/// Elements of each pointwise workload: 16 M floats, 64 MB a tensor, far beyond any cache, so
/// that these time memory traffic and arithmetic, not launch overhead.
pub const POINTWISE_ELEMENTS: usize = 1 << 24;

/// `relu(x + bias) * 2`: three eager kernels, one fused kernel (3 reads and writes against 1).
pub fn add_relu_mul(x: &Tensor, bias: &Tensor) -> Result<Tensor> {
    x.add(bias)?.relu()?.mul(2.0)
}

/// `ops` pointwise ops on one input, cycling through `sin(x)`, `x * 1.0001` and `x + 0.5`: `ops`
/// eager kernels, each reading and writing the whole tensor, against one fused kernel.
pub fn pointwise_chain(x: &Tensor, ops: usize) -> Result<Tensor> {
    (0..ops).try_fold(x.clone(), |t, i| match i % 3 {
        0 => t.sin(),
        1 => t.mul(1.0001),
        _ => t.add(0.5),
    })
}

/// `tanh` applied `times` times: a chain of transcendental ops, where fusion saves memory
/// traffic but the arithmetic stays.
pub fn repeated_tanh(x: &Tensor, times: usize) -> Result<Tensor> {
    (0..times).try_fold(x.clone(), |t, _| t.tanh())
}

impl Block {
    /// The block of `shape` whose parameters are `parameters`, in the order
    /// [`Block::parameters`] lists them (the fields' order): its inverse, for code that hands a
    /// block's weights around as a list of tensors.
    pub fn from_parameters(shape: BlockShape, parameters: &[Tensor]) -> Result<Block> {
        let [
            ln1_weight,
            ln1_bias,
            wq,
            bq,
            wk,
            bk,
            wv,
            bv,
            wo,
            bo,
            ln2_weight,
            ln2_bias,
            fc1_weight,
            fc1_bias,
            fc2_weight,
            fc2_bias,
        ] = parameters
        else {
            return Err(Error::InvalidArgument {
                op: "Block::from_parameters",
                message: format!("a block has 16 parameters, got {}", parameters.len()),
                location: SourceLocation::caller(),
            });
        };
        let p = |t: &Tensor| t.clone();
        Ok(Block {
            shape,
            ln1_weight: p(ln1_weight),
            ln1_bias: p(ln1_bias),
            wq: p(wq),
            bq: p(bq),
            wk: p(wk),
            bk: p(bk),
            wv: p(wv),
            bv: p(bv),
            wo: p(wo),
            bo: p(bo),
            ln2_weight: p(ln2_weight),
            ln2_bias: p(ln2_bias),
            fc1_weight: p(fc1_weight),
            fc1_bias: p(fc1_bias),
            fc2_weight: p(fc2_weight),
            fc2_bias: p(fc2_bias),
        })
    }
}

/// The layers regional compilation is about: [`LAYERS`] naive blocks of one shape, each with
/// weights of its own, applied in turn (a transformer's body).
#[derive(Clone)]
pub struct Stack {
    /// The blocks, first applied first.
    pub blocks: Vec<Block>,
}

/// Blocks in the stack the course times (GPT-2 small's depth).
pub const LAYERS: usize = 12;

impl Stack {
    /// `layers` blocks of `shape`, block `i` with weights drawn from `seed + i`.
    pub fn new(shape: BlockShape, layers: usize, seed: u64, device: Device) -> Result<Stack> {
        let blocks =
            (0..layers as u64).map(|i| Block::new(shape, seed.wrapping_add(i), device)).collect::<Result<_>>()?;
        Ok(Stack { blocks })
    }

    /// Every block's [`Block::naive_forward`] in turn. Compiled whole, this is one graph with every
    /// block in it; `x` may have any batch and sequence length.
    pub fn naive_forward(&self, x: &Tensor) -> Result<Tensor> {
        self.blocks.iter().try_fold(x.clone(), |h, block| block.naive_forward(&h))
    }
}

/// A parameter of `shape` drawn from `seed`, scaled by `1/sqrt(fan_in)`, named and placed.
fn param(shape: &[usize], seed: u64, fan_in: usize, name: &str, device: Device) -> Result<Tensor> {
    Tensor::randn(shape, seed).mul(1.0 / (fan_in as f32).sqrt())?.with_name(name).to(device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naive_pieces_match_the_fused_ops() {
        let x = Tensor::randn(&[3, 7, 16], 1);
        let (w, b) = (Tensor::randn(&[16], 2), Tensor::randn(&[16], 3));
        let close = |a: &Tensor, b: &Tensor| {
            a.to_vec().unwrap().iter().zip(b.to_vec().unwrap()).all(|(x, y)| (x - y).abs() < 1e-4)
        };
        assert!(close(&naive_softmax(&x).unwrap(), &x.softmax(-1).unwrap()));
        assert!(close(&naive_layer_norm(&x, &w, &b).unwrap(), &x.layer_norm(&w, &b, LAYER_NORM_EPS).unwrap()));
    }

    #[test]
    fn pointwise_workloads_apply_their_ops_in_order() {
        let x = Tensor::from_vec(vec![-1.0, 0.25, 2.0], &[3]).unwrap();
        let chain = pointwise_chain(&x, 4).unwrap().to_vec().unwrap();
        let tanh = repeated_tanh(&x, 2).unwrap().to_vec().unwrap();
        let relu = add_relu_mul(&x, &x).unwrap().to_vec().unwrap();
        for (i, v) in x.to_vec().unwrap().into_iter().enumerate() {
            assert!((chain[i] - ((v.sin() * 1.0001 + 0.5).sin())).abs() < 1e-6);
            assert!((tanh[i] - v.tanh().tanh()).abs() < 1e-6);
            assert_eq!(relu[i], (2.0 * v).max(0.0) * 2.0);
        }
    }

    #[test]
    fn the_block_keeps_its_input_shape() {
        let shape = BlockShape { batch: 2, seq: 5, d_model: 32, heads: 4 };
        let block = Block::new(shape, 0, Device::Cpu).unwrap();
        let x = Tensor::randn(&[2, 5, 32], 9);
        assert_eq!(block.naive_forward(&x).unwrap().shape(), &[2, 5, 32]);
        assert_eq!(Mlp::new(0, Device::Cpu).unwrap().forward(&Tensor::randn(&[3, 512], 1)).unwrap().shape(), &[3, 512]);
    }

    #[test]
    fn the_challenge_block_is_the_naive_block_with_a_graph_break() {
        let shape = BlockShape { batch: 2, seq: 4, d_model: 16, heads: 2 };
        let block = Block::new(shape, 5, Device::Cpu).unwrap();
        let x = Tensor::randn(&[2, 4, 16], 6);
        let (naive, challenge) = (block.naive_forward(&x).unwrap(), block.challenge_forward(&x).unwrap());
        assert_eq!(naive.to_vec().unwrap(), challenge.to_vec().unwrap());
        let graphs = |f: &dyn Fn(&Tensor) -> Result<Tensor>| {
            engine::dynamo::explain(|x: Tensor| f(&x)).call(&x).unwrap().graph_count()
        };
        assert_eq!(graphs(&|x| block.naive_forward(x)), 1);
        assert_eq!(graphs(&|x| block.challenge_forward(x)), 2);
    }

    #[test]
    fn the_block_exports_and_loads_as_the_same_program() {
        use engine::fx::export::{ExportedProgram, export};
        let shape = BlockShape { batch: 2, seq: 3, d_model: 8, heads: 2 };
        let block = Block::new(shape, 7, Device::Cpu).unwrap();
        let x = Tensor::randn(&[2, 3, 8], 8);
        let program = export(|t| Ok(vec![block.naive_forward(&t[0])?]), std::slice::from_ref(&x)).unwrap();
        assert_eq!(program.user_input_count(), 1, "x alone; the 16 weights are constants");
        let loaded = ExportedProgram::from_json(&program.to_json().unwrap(), Device::Cpu).unwrap();
        assert!(loaded.graph() == program.graph());
        let fresh = Tensor::randn(&[2, 3, 8], 9);
        let run = |p: &ExportedProgram| p.run(std::slice::from_ref(&fresh)).unwrap()[0].to_vec().unwrap();
        assert_eq!(run(&loaded), block.naive_forward(&fresh).unwrap().to_vec().unwrap());
        let broken = export(|t| Ok(vec![block.challenge_forward(&t[0])?]), &[x]).unwrap_err();
        assert!(matches!(broken, Error::GraphBreak { .. }), "{broken}");
    }

    #[test]
    fn a_region_compiles_the_stack_once_per_length() {
        let shape = BlockShape { batch: 2, seq: 6, d_model: 32, heads: 4 };
        let stack = Stack::new(shape, 3, 1, Device::Cpu).unwrap();
        let region = engine::dynamo::compile_region(|block: &Block, x: Tensor| block.naive_forward(&x));
        for (seq, compiles) in [(6, 1), (10, 2), (14, 2)] {
            let x = Tensor::randn(&[2, seq, 32], seq as u64);
            let h = stack.blocks.iter().try_fold(x.clone(), |h, b| region.call(b, &h)).unwrap();
            let eager = stack.naive_forward(&x).unwrap();
            let worst =
                eager.to_vec().unwrap().iter().zip(h.to_vec().unwrap()).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-4, "length {seq}: the region differs from eager by {worst}");
            assert_eq!(region.stats().compiles, compiles, "length {seq}: {:?}", region.stats());
        }
        let stats = region.stats();
        assert_eq!((stats.recompiles, stats.cache_hits), (1, 7), "{stats:?}");
    }

    #[test]
    fn the_compiled_block_matches_eager() {
        let shape = BlockShape { batch: 2, seq: 6, d_model: 32, heads: 4 };
        let block = Block::new(shape, 3, Device::Cpu).unwrap();
        let x = Tensor::randn(&[2, 6, 32], 4);
        let compiled = engine::dynamo::compile(|x: Tensor| block.naive_forward(&x));
        let (eager, fused) = (block.naive_forward(&x).unwrap(), compiled.call(&x).unwrap());
        let worst =
            eager.to_vec().unwrap().iter().zip(fused.to_vec().unwrap()).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(worst < 1e-4, "compiled block differs from eager by {worst}");
    }
}
