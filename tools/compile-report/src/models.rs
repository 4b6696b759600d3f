//! Every model of `models/` (the workbook's phases), compiled on the CPU with the trace on, so that
//! `compile-report models` renders a report for each: what CI opens in a browser. Each model runs
//! at a small size; the graph breaks, recompiles and dynamic sizes the phases teach are kept.

use engine::backends::{Backend, CompiledGraph};
use engine::compile_mode::Mode;
use engine::dynamo;
use engine::fx::Graph;
use engine::{Device, Result, Tensor};
use workbook_models::{phase1, phase2, phase3, phase4, phase5};

/// One of phase 1's backends, as `Compiled::backend` takes it.
struct Boxed(Box<dyn Backend>);

impl Backend for Boxed {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn compile(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        self.0.compile(graph, inputs)
    }

    fn compile_in_mode(&self, graph: &Graph, inputs: &[Tensor], mode: Mode) -> Result<Box<dyn CompiledGraph>> {
        self.0.compile_in_mode(graph, inputs, mode)
    }
}

/// Compiles and calls every model; returns how many compiled functions ran.
pub fn run_all() -> Result<usize> {
    let mut functions = 0;

    // Phase 1: the MLP, with each of the phase's backends.
    let mlp = phase1::Mlp::new(0);
    let x = phase1::example_input(4, 1);
    for backend in phase1::backends() {
        let name = format!("phase1 mlp ({})", backend.name());
        dynamo::compile(|x: Tensor| mlp.forward(&x)).name(&name).backend(Boxed(backend)).call(&x)?;
        functions += 1;
    }

    // Phase 2: attention and the wasteful function.
    let attention = phase2::Attention::new(0);
    let tokens = phase2::example_input(8, 2);
    dynamo::compile(|x: Tensor| attention.forward(&x)).name("phase2 attention").call(&tokens)?;
    dynamo::compile(|x: Tensor| phase2::wasteful(&x)).name("phase2 wasteful").call(&tokens)?;
    functions += 2;

    // Phase 3: the models that break, the first two at two batch sizes (a recompile that makes
    // the batch dynamic), then at a third (a dynamic graph's new sizes).
    let model = phase3::Model::new(0);
    let batches: Vec<Tensor> = [4, 8, 12].iter().map(|&rows| phase3::example_input(rows, rows as u64)).collect();
    let logger = phase3::Logger::new();
    let gated = dynamo::compile(|x: Tensor| phase3::gated_original(&model, &x)).name("phase3 gated");
    let normalized = dynamo::compile(|x: Tensor| phase3::normalized_original(&x, &logger)).name("phase3 normalized");
    for x in &batches {
        gated.call(x)?;
        normalized.call(x)?;
    }
    let x = &batches[0];
    dynamo::compile(|x: Tensor| phase3::standardized_original(&x)).name("phase3 standardized").call(x)?;
    dynamo::compile(|x: Tensor| phase3::clipped_original(&x)).name("phase3 clipped").call(x)?;
    dynamo::compile(|x: Tensor| phase3::layered(&x, 6, 2)).name("phase3 layered").call(x)?;
    functions += 5;

    // Phase 4: the codegen catalogue.
    for (name, model, inputs) in phase4::catalogue(0) {
        dynamo::compile(model).name(&format!("phase4 {name}")).call(&inputs)?;
        functions += 1;
    }

    // Phase 5: the workloads, small.
    let mlp = phase5::Mlp::new(0, Device::Cpu)?;
    dynamo::compile(|x: Tensor| mlp.forward(&x))
        .name("phase5 mlp")
        .call(&Tensor::randn(&[4, phase5::MLP_FEATURES], 5))?;
    // Compiled for training: AOTAutograd's joint, forward and backward graphs join the trace.
    let trained = mlp.requires_grad_();
    let loss = dynamo::compile(|x: Tensor| trained.forward(&x)?.mul(&x)?.sum_all()).name("phase5 mlp, training");
    loss.call(&Tensor::randn(&[4, phase5::MLP_FEATURES], 11))?.backward()?;
    let shape = phase5::BlockShape { batch: 2, seq: 16, d_model: 64, heads: 4 };
    let block = phase5::Block::new(shape, 0, Device::Cpu)?;
    let x = Tensor::randn(&[shape.batch, shape.seq, shape.d_model], 6);
    dynamo::compile(|x: Tensor| block.naive_forward(&x)).name("phase5 naive block").call(&x)?;
    dynamo::compile(|x: Tensor| block.challenge_forward(&x)).name("phase5 challenge block").call(&x)?;
    let rows = Tensor::randn(&[8, 32], 7);
    dynamo::compile(|x: Tensor| phase5::naive_softmax(&x)).name("phase5 naive softmax").call(&rows)?;
    let (w, b) = (Tensor::randn(&[32], 8), Tensor::randn(&[32], 9));
    dynamo::compile(|x: Tensor| phase5::naive_layer_norm(&x, &w, &b)).name("phase5 naive layer norm").call(&rows)?;
    let flat = Tensor::randn(&[256], 10);
    dynamo::compile(|x: Tensor| phase5::add_relu_mul(&x, &x)).name("phase5 add-relu-mul").call(&flat)?;
    dynamo::compile(|x: Tensor| phase5::pointwise_chain(&x, 8)).name("phase5 pointwise chain").call(&flat)?;
    dynamo::compile(|x: Tensor| phase5::repeated_tanh(&x, 4)).name("phase5 repeated tanh").call(&flat)?;
    functions += 10;
    Ok(functions)
}
