//! The examples of the training chapter (`book/src/training/engine.md`): the joint graph of a
//! two-layer model, its partition into a forward and a backward graph with what is saved, the
//! backward's generated kernels, and a whole training step compiled into one graph with its
//! foreach update.

use engine::backends::Inductor;
use engine::inductor::{Config, kernels};
use engine::optim::{Optimizer, Sgd};
use engine::{Result, Tensor, aot, dynamo};

// ANCHOR: model
/// `gelu(x @ w1ᵀ + b1) @ w2ᵀ`: 4 features in, 8 hidden, 3 out. Its three parameters require
/// grad; the input does not.
pub struct TwoLayers {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl TwoLayers {
    /// Seeded parameters, named as a module's would be, each a leaf that requires grad.
    pub fn new() -> TwoLayers {
        let param = |shape: &[usize], seed, name| Tensor::randn(shape, seed).with_name(name).requires_grad_(true);
        TwoLayers { w1: param(&[8, 4], 1, "w1"), b1: param(&[8], 2, "b1"), w2: param(&[3, 8], 3, "w2") }
    }

    /// The forward pass.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.w1, Some(&self.b1))?.gelu()?.linear(&self.w2, None)
    }

    /// The parameters, for an optimizer.
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.w1.clone(), self.b1.clone(), self.w2.clone()]
    }
}
// ANCHOR_END: model

impl Default for TwoLayers {
    fn default() -> TwoLayers {
        TwoLayers::new()
    }
}

/// The input, which requires no grad.
fn input() -> Tensor {
    Tensor::randn(&[2, 4], 0).with_name("x")
}

/// The joint graph AOT traces from the captured forward: forward and backward in one graph.
pub fn joint_graph() -> Result<()> {
    // ANCHOR: joint_graph
    let model = TwoLayers::new();
    let captured = dynamo::explain(|x: Tensor| model.forward(&x)).call(&input())?.graphs.remove(0);
    // Placeholders: x, then the parameters the trace captured; all but x require grad.
    let requires_grad: Vec<bool> = (0..captured.placeholders().len()).map(|i| i > 0).collect();
    let joint = aot::joint_graph(&captured, &requires_grad)?;
    print!("{}", joint.graph);
    // ANCHOR_END: joint_graph
    Ok(())
}

/// The joint graph cut in two: the forward, the backward, and what the forward saves.
pub fn partition() -> Result<()> {
    // ANCHOR: partition
    let model = TwoLayers::new();
    let captured = dynamo::explain(|x: Tensor| model.forward(&x)).call(&input())?.graphs.remove(0);
    let requires_grad: Vec<bool> = (0..captured.placeholders().len()).map(|i| i > 0).collect();
    let partition = aot::min_cut_partition(&captured, &requires_grad)?;
    println!("forward:\n{}", partition.forward);
    println!("backward:\n{}", partition.backward);
    print!("{}", partition.saved);
    // ANCHOR_END: partition
    Ok(())
}

/// The model compiled by Inductor and used under autograd: the backward graph's kernels.
pub fn backward_code() -> Result<()> {
    // ANCHOR: backward_code
    let model = TwoLayers::new();
    let inductor = Inductor::default();
    let compiled = dynamo::compile(|x: Tensor| model.forward(&x)).backend(inductor.clone());
    compiled.call(&input())?.sum_all()?.backward()?; // runs the compiled backward
    let codes = inductor.output_codes(); // the forward's, then the backward's
    print!("{}", codes[1]);
    // ANCHOR_END: backward_code
    Ok(())
}

/// A whole training step, forward to optimizer, compiled into one graph with compiled autograd:
/// its kernels, and the foreach kernel that updates every parameter in place.
pub fn whole_step() -> Result<()> {
    // ANCHOR: whole_step
    let model = TwoLayers::new();
    let sgd = Sgd::new(&model.parameters(), 0.1).momentum(0.9);
    let step_of = |x: &Tensor, target: &Tensor| -> Result<Tensor> {
        let loss = model.forward(x)?.mse_loss(target)?;
        loss.backward()?;
        sgd.step()?;
        sgd.zero_grad();
        Ok(loss)
    };
    let inductor = Inductor::default();
    let step = dynamo::compile(|(x, target): (Tensor, Tensor)| step_of(&x, &target))
        .backend(inductor.clone())
        .compiled_autograd(true) // backward() is traced into the graph, not a break
        .fullgraph(true);
    let (x, target) = (input(), Tensor::randn(&[2, 3], 9));
    for _ in 0..3 {
        step.call((&x, &target))?;
    }
    let stats = step.stats();
    println!("{} calls, {} graph compiled, {} graph breaks", stats.calls, stats.compiles, stats.graph_breaks);
    println!("kernels: {:?}", inductor.output_codes()[0].kernel_names());
    // The last kernel updates every parameter and momentum buffer: its kernel IR.
    let graph =
        dynamo::explain(|(x, t): (Tensor, Tensor)| step_of(&x, &t)).compiled_autograd(true).call((&x, &target))?;
    let update = kernels(&graph.graphs[0], &Config::default())?.pop().expect("the update kernel");
    print!("{update}");
    // ANCHOR_END: whole_step
    Ok(())
}
