//! The examples of the book's tour of the engine (`book/src/tour.md`), in the order it shows them.

use engine::fx::proxy::Tracer;
use engine::{Result, Tensor, aot, dynamo};

use crate::mlp::Mlp;

/// Eager mode: every op runs its kernel at once and returns a tensor with values.
pub fn eager() -> Result<()> {
    // ANCHOR: eager
    let x = Tensor::from_vec(vec![-1.0, 0.5, 2.0, -3.0, 4.0, 0.0], &[2, 3])?;
    let y = x.mul(2.0)?.relu()?; // two ops, two kernels, one temporary buffer between them
    println!("{y}");
    println!("{:?}", y.sum(1, false)?); // Debug shows the metadata only
    // ANCHOR_END: eager
    Ok(())
}

/// Views: ops that only change how a buffer is addressed run no kernel.
pub fn views() -> Result<()> {
    // ANCHOR: views
    let x = Tensor::arange(6).reshape(&[2, 3])?;
    let t = x.t()?; // a transposed view of the same buffer: no copy
    for (name, v) in [("x", &x), ("t", &t)] {
        let strides = v.strides().expect("a concrete tensor has strides");
        println!("{name}: shape {:?}, strides {strides:?}, values {v}", v.shape());
    }
    // ANCHOR_END: views
    Ok(())
}

/// Tracing by hand: the same ops on a symbolic tensor record graph nodes instead of running.
pub fn trace() -> Result<()> {
    // ANCHOR: trace
    let tracer = Tracer::new();
    let x = tracer.input(&Tensor::randn(&[2, 3], 0))?; // a symbolic stand-in for the input
    let y = x.mul(2.0)?.relu()?.sum(1, false)?; // records three nodes, runs no kernel
    println!("{y:?}");
    let traced = tracer.finish(&[y])?;
    print!("{}", traced.graph);
    // ANCHOR_END: trace
    Ok(())
}

/// The MLP's graph, as code and as a table.
pub fn graph() -> Result<()> {
    // ANCHOR: graph
    let mlp = Mlp::new(0);
    let tracer = Tracer::new();
    let x = tracer.input(&Tensor::randn(&[2, 4], 100))?;
    let y = mlp.forward(&x)?; // the weights meet the trace and become placeholders
    let graph = tracer.finish(&[y])?.graph;
    print!("{graph}");
    println!();
    print!("{}", graph.tabular());
    // ANCHOR_END: graph
    Ok(())
}

/// AOT decomposition: composite ops re-traced into primitive ones.
pub fn decompose() -> Result<()> {
    // ANCHOR: decompose
    let mlp = Mlp::new(0);
    let tracer = Tracer::new();
    let x = tracer.input(&Tensor::randn(&[2, 4], 100))?;
    let graph = tracer.finish(&[mlp.forward(&x)?])?.graph;
    let primitive = aot::decompose(&graph)?;
    println!("{} ops before, {} after", graph.op_count(), primitive.op_count());
    print!("{primitive}");
    // ANCHOR_END: decompose
    Ok(())
}

/// What happens today when traced code asks for a value.
pub fn item_inside_compile() -> Result<()> {
    // ANCHOR: item
    let normalise = |x: Tensor| {
        let largest = x.amax(0, false)?.item()?; // needs a real number while tracing
        x.div(largest)
    };
    let x = Tensor::from_vec(vec![1.0, 4.0, 2.0], &[3])?;
    println!("{}", dynamo::compile(normalise).call(&x)?);
    let report = dynamo::explain(normalise).call(&x)?;
    println!("{} graphs, {} break: {}", report.graph_count(), report.graph_break_count(), report.breaks[0].reason);
    // ANCHOR_END: item
    Ok(())
}
