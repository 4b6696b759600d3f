//! The examples of phase 4's engine page (`book/src/phase4/engine.md`): the output code of the
//! MLP for the CPU and the GPU, the kernel IR the printers start from, and the fusion decisions.

use engine::backends::Inductor;
use engine::inductor::{Config, generate, kernels, lowering, scheduler};
use engine::{Device, Result, Tensor, aot, dynamo};

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
