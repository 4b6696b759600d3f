//! A place to try your phase 1 functions by hand: `cargo run -p phase1-backends --example phase1-scratch`.
//! It calls each exercise on the phase's model and prints what it returns. A function that is
//! still `todo!()` prints one line saying so, and the others still run. Edit freely: the grader
//! never reads this file.

use engine::{Device, Tensor, dynamo};
use phase1_backends::model::{Mlp, backends, example_input};
use std::sync::Arc;

use engine::backends::Eager;
use phase1_backends::{
    CapabilityBackend, GraphInterpreter, RecordingBackend, compare_backends, interpret, measure_latency, partition,
};

#[path = "../../show.rs"]
mod show;
use show::{quiet_panics, show};

fn main() {
    quiet_panics();
    let mlp = Mlp::new(0);
    let x = example_input(4, 1);

    // Latency first, so that Inductor's first call is the process's first compile (cold or warm).
    for backend in backends() {
        let name = backend.name().to_string();
        show(&format!("measure_latency with {name} on the CPU, 20 steady calls"), || {
            measure_latency(backend, Device::Cpu, 20).map(|l| (l.first_call, l.steady_median, l.stats))
        });
    }
    show("compare_backends", || compare_backends(&mlp, &x, backends()));
    show("interpret (the MLP's graph, run by your interpreter)", || {
        let graph = dynamo::explain(|x: Tensor| mlp.forward(&x)).call(&x)?.graphs.remove(0);
        // The placeholders, in the order the code first used them: the input, then each parameter.
        let inputs = [&x, &mlp.fc1_weight, &mlp.fc1_bias, &mlp.fc2_weight, &mlp.fc2_bias].map(Tensor::clone);
        interpret(&graph, &inputs)
    });
    show("GraphInterpreter as a backend", || {
        dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(GraphInterpreter).call(&x)
    });
    // A compiler that runs everything but `gelu`: try your own graphs and supported sets here.
    let supports = |op: &engine::op::Op| op.name() != "gelu";
    show("partition (the MLP's graph, every op supported but gelu)", || {
        let graph = dynamo::explain(|x: Tensor| mlp.forward(&x)).call(&x)?.graphs.remove(0);
        let partitions = partition(&graph, &supports);
        Ok(partitions
            .iter()
            .map(|p| p.iter().map(|&id| graph.node(id).name.clone()).collect::<Vec<_>>())
            .collect::<Vec<_>>())
    });
    show("CapabilityBackend (the same, with Eager as the compiler): max |diff| from eager", || {
        let backend = CapabilityBackend { supports: Arc::new(supports), compiler: Arc::new(Eager) };
        let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(backend).call(&x)?.to_vec()?;
        let eager = mlp.forward(&x)?.to_vec()?;
        Ok(compiled.iter().zip(&eager).map(|(a, e)| (a - e).abs()).fold(0.0, f32::max))
    });
    show("RecordingBackend: graphs recorded after two batch sizes", || {
        let recording = RecordingBackend::new();
        let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(recording.clone());
        compiled.call(&example_input(2, 0))?;
        compiled.call(&example_input(3, 0))?;
        Ok(recording
            .graphs()
            .iter()
            .map(|g| format!("{} ops, {} inputs", g.op_count(), g.placeholders().len()))
            .collect::<Vec<_>>())
    });
}
