//! The examples of phase 4's engine page (`book/src/phase4/engine.md`): the output code of the
//! MLP for the CPU and the GPU, the kernel IR the printers start from, and the fusion decisions.

use engine::backends::Inductor;
use engine::inductor::{Config, generate, kernels, lowering, scheduler};
use engine::logs::{self, Artifact};
use engine::precision::autocast;
use engine::{DType, Device, Result, Tensor, aot, dynamo};
use workbook_models::phase5::{Block, BlockShape};

use crate::mlp::Mlp;

/// The MLP compiled with Inductor: its output code, C for the CPU.
pub fn output_code() -> Result<()> {
    // ANCHOR: output_code
    let mlp = Mlp::new(0);
    let inductor = Inductor::default();
    let model = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(inductor.clone());
    model.call(&Tensor::randn(&[2, 4], 100))?;
    print!("{}", inductor.output_codes()[0]);
    // ANCHOR_END: output_code
    Ok(())
}

/// The same graph printed as CUDA C, which needs no GPU.
pub fn output_code_cuda() -> Result<()> {
    // ANCHOR: output_code_cuda
    let mlp = Mlp::new(0);
    let report = dynamo::explain(|x: Tensor| mlp.forward(&x)).call(&Tensor::randn(&[2, 4], 100))?;
    let cuda = generate(&report.graphs[0], Device::Cuda(0), &Config::default())?;
    print!("{cuda}");
    // ANCHOR_END: output_code_cuda
    Ok(())
}

/// The kernel IR of two small models: what every printer is handed.
pub fn kernel_ir() -> Result<()> {
    // ANCHOR: kernel_ir
    let add_relu_mul = |(x, bias): (Tensor, Tensor)| x.add(&bias)?.relu()?.mul(2.0);
    let inputs = (&Tensor::randn(&[1000], 0), &Tensor::randn(&[1000], 1));
    let report = dynamo::explain(add_relu_mul).call(inputs)?;
    for kernel in kernels(&report.graphs[0], &Config::default())? {
        print!("{kernel}");
    }
    let report = dynamo::explain(|x: Tensor| x.softmax(-1)).call(&Tensor::randn(&[64, 4096], 2))?;
    for kernel in kernels(&report.graphs[0], &Config::default())? {
        print!("{kernel}");
    }
    // ANCHOR_END: kernel_ir
    Ok(())
}

/// The scheduler's decisions for the MLP and for a transposed read, with reasons.
pub fn fusion() -> Result<()> {
    // ANCHOR: fusion
    let mlp = Mlp::new(0);
    let transposed = |x: Tensor| {
        let e = x.exp()?;
        e.add(&e.t()?)
    };
    let graphs = [
        dynamo::explain(|x: Tensor| mlp.forward(&x)).call(&Tensor::randn(&[2, 4], 100))?.graphs.remove(0),
        dynamo::explain(transposed).call(&Tensor::randn(&[3, 3], 1))?.graphs.remove(0),
    ];
    for graph in &graphs {
        let decomposed = aot::decompose(graph)?;
        let lowered = lowering::lower(&decomposed, &Default::default())?;
        let schedule = scheduler::schedule(&lowered, scheduler::can_fuse)?;
        for decision in &schedule.decisions {
            println!("{decision}");
        }
        println!("-> {} kernels and extern calls\n", schedule.groups.len());
    }
    // ANCHOR_END: fusion
    Ok(())
}

/// The pattern matcher joining the naive block's three attention projections (attention page).
pub fn concat_linear() -> Result<()> {
    // ANCHOR: concat_linear
    let shape = BlockShape { batch: 1, seq: 8, d_model: 32, heads: 4 };
    let block = Block::new(shape, 0, Device::Cpu)?;
    let x = Tensor::randn(&[1, 8, 32], 1);
    let compiled = dynamo::compile(|x: Tensor| block.naive_forward(&x)).backend(Inductor::default());
    let (result, log) = logs::capture(&[Artifact::Fusion], || compiled.call(&x));
    result?;
    for line in log.lines().filter(|l| l.contains("concat linear")) {
        println!("{line}");
    }
    // ANCHOR_END: concat_linear
    Ok(())
}

/// The MLP compiled under autocast to bf16: its output code loads and stores in each tensor's own
/// dtype and computes in `float` between (precision section of the engine page).
pub fn output_code_bf16() -> Result<()> {
    // ANCHOR: output_code_bf16
    let mlp = Mlp::new(0);
    let inductor = Inductor::default();
    let model = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(inductor.clone());
    let y = autocast(Device::Cpu, Some(DType::BF16), || model.call(&Tensor::randn(&[2, 4], 100)))?;
    println!("output: {} {:?}\n", y.dtype(), y.shape());
    print!("{}", inductor.output_codes()[0]);
    // ANCHOR_END: output_code_bf16
    Ok(())
}

/// A pointwise chain over bf16 tensors printed as CUDA C: 16-byte loads of eight bf16 values,
/// widened in registers.
pub fn output_code_cuda_bf16() -> Result<()> {
    // ANCHOR: output_code_cuda_bf16
    let add_relu_mul = |(x, bias): (Tensor, Tensor)| x.add(&bias)?.relu()?.mul(2.0);
    let (x, bias) = (Tensor::randn_dtype(&[4096], 0, DType::BF16), Tensor::randn_dtype(&[4096], 1, DType::BF16));
    let report = dynamo::explain(add_relu_mul).call((&x, &bias))?;
    print!("{}", generate(&report.graphs[0], Device::Cuda(0), &Config::default())?);
    // ANCHOR_END: output_code_cuda_bf16
    Ok(())
}
