//! A place to try your phase 4 functions by hand: `cargo run -p phase4-codegen --example phase4-scratch`.
//! It reads the output code of each model of the phase, compiles the MLP with your fusion
//! decision, and prints your kernel printers' C and CUDA C. A function that is still `todo!()`
//! prints one line saying so, and the others still run. Edit freely: the grader never reads this
//! file.

use engine::backends::Inductor;
use engine::inductor::{Config, kernels};
use engine::{Tensor, dynamo};
use phase4_codegen::models::{add_relu_mul, mlp, softmax};
use phase4_codegen::{can_fuse, catalogue, inspect, pointwise_c, pointwise_cuda, reduction_c};

#[path = "../../show.rs"]
mod show;
use show::{quiet_panics, show, show_text};

fn main() {
    quiet_panics();
    for (name, model, inputs) in catalogue(0) {
        show(&format!("inspect({name})"), || inspect(model, &inputs));
    }
    let models = catalogue(0);
    let inputs_of = |wanted: &str| models.iter().find(|(name, ..)| *name == wanted).map(|(_, _, i)| i.clone());
    show_text("the MLP compiled with your can_fuse: its output code", || {
        let inductor = Inductor::with_fusion_policy(can_fuse);
        let inputs = inputs_of("mlp").expect("the catalogue has the MLP");
        dynamo::compile(mlp).backend(inductor.clone()).call(&inputs)?;
        Ok(inductor.output_codes().iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))
    });
    // The kernel IR of a model, from the engine, handed to your printers.
    let kernel_of = |model: fn(Vec<Tensor>) -> engine::Result<Tensor>, name: &str| {
        let inputs = inputs_of(name).expect("the catalogue has the model");
        let graph = dynamo::explain(model).call(&inputs)?.graphs.remove(0);
        Ok::<_, engine::Error>(kernels(&graph, &Config::default())?.remove(0))
    };
    show_text("pointwise_c (add_relu_mul)", || Ok(pointwise_c(&kernel_of(add_relu_mul, "add_relu_mul")?)));
    show_text("pointwise_cuda (add_relu_mul)", || Ok(pointwise_cuda(&kernel_of(add_relu_mul, "add_relu_mul")?)));
    show_text("reduction_c (softmax)", || Ok(reduction_c(&kernel_of(softmax, "softmax")?)));
}
