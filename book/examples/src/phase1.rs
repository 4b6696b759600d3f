//! The examples of phase 1's engine page (`book/src/phase1/engine.md`): choosing a backend,
//! writing one, and what the first call costs compared with the ones after it.

use engine::backends::{AotEager, Backend, CompiledGraph, Eager};
use engine::fx::Graph;
use engine::{Result, Tensor, dynamo};

use crate::mlp::Mlp;

/// The same model in eager mode and through the `eager` and `aot_eager` backends.
pub fn backends() -> Result<()> {
    // ANCHOR: backends
    let mlp = Mlp::new(0);
    let x = Tensor::randn(&[2, 4], 100);
    let eager = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(Eager);
    let aot_eager = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(AotEager);
    println!("eager mode: {}", mlp.forward(&x)?);
    println!("eager:      {}", eager.call(&x)?);
    println!("aot_eager:  {}", aot_eager.call(&x)?);
    // ANCHOR_END: backends
    Ok(())
}

// ANCHOR: print_graph
/// A backend of our own: it prints every graph it is handed, then lets `Eager` run it.
struct PrintGraph;

impl Backend for PrintGraph {
    fn name(&self) -> &str {
        "print_graph"
    }

    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        println!("print_graph: {} ops, {} example inputs", graph.op_count(), example_inputs.len());
        print!("{}", graph.tabular());
        Eager.compile(graph, example_inputs)
    }
}
// ANCHOR_END: print_graph

/// A user-defined backend, called once per new graph.
pub fn print_backend() -> Result<()> {
    // ANCHOR: use_print_graph
    let scale = Tensor::from_vec(vec![0.5, 2.0, -1.0], &[3])?.with_name("scale");
    let f = dynamo::compile(|x: Tensor| x.mul(&scale)?.relu()?.sum(1, false)).backend(PrintGraph);
    let y = f.call(&Tensor::ones(&[2, 3]))?; // first call: traced, compiled, run
    let again = f.call(&Tensor::ones(&[2, 3]))?; // same graph: the backend is not called again
    println!("{y} {again}");
    // ANCHOR_END: use_print_graph
    Ok(())
}

/// The compile cache: one compile per distinct graph, hits after that.
pub fn steady_state() -> Result<()> {
    // ANCHOR: steady_state
    let mlp = Mlp::new(0);
    let model = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(AotEager);
    for (seed, batch) in [2, 2, 2, 5, 5].into_iter().enumerate() {
        model.call(&Tensor::randn(&[batch, 4], seed as u64))?;
        let stats = model.stats();
        println!("batch {batch}: calls {}, compiles {}, cache hits {}", stats.calls, stats.compiles, stats.cache_hits);
    }
    // ANCHOR_END: steady_state
    Ok(())
}
