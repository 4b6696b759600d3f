//! Foreach kernels: an optimizer's update of every parameter, independent pointwise loops of
//! different sizes, compiled into one kernel (C and CUDA C snapshots), equal to the update run
//! eagerly.

use engine::backends::Inductor;
use engine::inductor::{self, Config, TargetKind};
use engine::optim::sgd_update;
use engine::{Device, Result, Tensor, dynamo, fx};

/// Parameters of three sizes, their gradients and momentum buffers, named.
fn sgd_inputs() -> Vec<Tensor> {
    let shapes: [&[usize]; 3] = [&[64, 32], &[64], &[10, 64]];
    let mut inputs = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        inputs.push(Tensor::randn(shape, i as u64).with_name(&format!("p{i}")));
        inputs.push(Tensor::randn(shape, 10 + i as u64).with_name(&format!("g{i}")));
        inputs.push(Tensor::randn(shape, 20 + i as u64).with_name(&format!("m{i}")));
    }
    inputs
}

/// The new parameters and momentum buffers from `(parameter, gradient, buffer)` triples.
fn sgd(t: &[Tensor]) -> Result<Vec<Tensor>> {
    let params: Vec<Tensor> = t.chunks(3).map(|c| c[0].clone()).collect();
    let grads: Vec<Tensor> = t.chunks(3).map(|c| c[1].clone()).collect();
    let buffers: Vec<Tensor> = t.chunks(3).map(|c| c[2].clone()).collect();
    let (params, buffers) = sgd_update(&params, &grads, &buffers, 0.1, 0.9, 0.0)?;
    Ok(params.into_iter().chain(buffers).collect())
}

fn sgd_graph() -> fx::Graph {
    fx::trace(&sgd_inputs(), sgd).unwrap().graph
}

#[test]
fn an_sgd_update_is_one_foreach_kernel() {
    let code = inductor::generate(&sgd_graph(), Device::Cpu, &Config::default()).unwrap();
    assert_eq!(code.kernel_names().len(), 1, "{code}");
    insta::assert_snapshot!("sgd_foreach_c", code.to_string());
    let cuda = inductor::generate(&sgd_graph(), Device::Cuda(0), &Config::default()).unwrap();
    insta::assert_snapshot!("sgd_foreach_cuda", cuda.to_string());
}

#[test]
fn a_foreach_kernel_computes_what_the_update_computes_eagerly() {
    let inputs = sgd_inputs();
    let eager: Vec<Vec<f32>> = sgd(&inputs).unwrap().iter().map(|t| t.to_vec().unwrap()).collect();
    let interpreter = Config { target: TargetKind::Interpreter, ..Config::default() };
    for config in [Config::default(), interpreter] {
        let f = dynamo::compile(|t: Vec<Tensor>| sgd(&t)).backend(Inductor::with_config(config));
        let compiled: Vec<Vec<f32>> = f.call(&inputs).unwrap().iter().map(|t| t.to_vec().unwrap()).collect();
        assert_eq!(compiled, eager, "the same operations in the same order: the same bits");
    }
}
