//! The engine trains the workbook's models: the MLP 512-2048-512 and the naive transformer block
//! reach a falling loss, eagerly and compiled, and compiled gradients equal eager ones; compiled
//! gradients against eager ones on random programs (`compiled_training`); the partitioner's
//! choices and AOT under dynamo (`partitioner`).

mod common;
#[path = "training/compiled_training.rs"]
mod compiled_training;
#[path = "training/foreach.rs"]
mod foreach;
#[path = "training/partitioner.rs"]
mod partitioner;
#[path = "training/whole_step.rs"]
mod whole_step;

use engine::backends::{AotEager, Backend, Inductor};
use engine::optim::{AdamW, Optimizer, Sgd};
use engine::{Device, Result, Tensor, dynamo};
use workbook_models::phase5::{Block, BlockShape, MLP_FEATURES, Mlp};

/// Each gradient of `params` as values (after a backward).
fn grads(params: &[Tensor]) -> Vec<Vec<f32>> {
    params.iter().map(|p| p.grad().expect("every parameter gets a gradient").to_vec().unwrap()).collect()
}

fn assert_grads_close(got: &[Vec<f32>], expected: &[Vec<f32>], what: &str) {
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        let scale = e.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let worst = g.iter().zip(e).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst <= 1e-4 + 1e-3 * scale, "{what}: parameter {i} differs by {worst} (largest gradient {scale})");
    }
}

/// Runs `steps` optimizer steps of `loss_of` and returns the losses.
fn train(optimizer: &dyn Optimizer, steps: usize, loss_of: &dyn Fn() -> Result<Tensor>) -> Vec<f32> {
    (0..steps)
        .map(|_| {
            optimizer.zero_grad();
            let loss = loss_of().unwrap();
            loss.backward().unwrap();
            optimizer.step().unwrap();
            loss.item().unwrap()
        })
        .collect()
}

fn falls(losses: &[f32]) -> bool {
    losses.last().unwrap() < &(losses[0] * 0.9) && losses.iter().all(|l| l.is_finite())
}

fn mlp_training(device: Device, backend: Option<Box<dyn Backend>>) {
    let model = Mlp::new(0, device).unwrap().requires_grad_();
    let x = Tensor::randn(&[32, MLP_FEATURES], 1).to(device).unwrap();
    let target = Tensor::randn(&[32, MLP_FEATURES], 2).mul(0.5).unwrap().to(device).unwrap();
    // The first step's gradients, eagerly, as the reference.
    model.forward(&x).unwrap().mse_loss(&target).unwrap().backward().unwrap();
    let eager = grads(&model.parameters());
    model.parameters().iter().for_each(Tensor::zero_grad);
    let losses = match backend {
        None => train(&Sgd::new(&model.parameters(), 0.1).momentum(0.9), 6, &|| model.forward(&x)?.mse_loss(&target)),
        Some(backend) => {
            let compiled = dynamo::compile(|x: Tensor| model.forward(&x)).backend(backend);
            compiled.call(&x).unwrap().mse_loss(&target).unwrap().backward().unwrap();
            assert_grads_close(&grads(&model.parameters()), &eager, "the compiled MLP");
            let step = || compiled.call(&x)?.mse_loss(&target);
            let losses = train(&Sgd::new(&model.parameters(), 0.1).momentum(0.9), 6, &step);
            assert_eq!(compiled.stats().compiles, 1, "one graph, with its backward, for every step");
            losses
        }
    };
    assert!(falls(&losses), "losses {losses:?}");
}

#[test]
fn the_mlp_trains_eagerly() {
    mlp_training(Device::Cpu, None);
}

#[test]
fn the_mlp_trains_compiled() {
    mlp_training(Device::Cpu, Some(Box::new(Inductor::default())));
}

fn block_training(device: Device, backend: Option<Box<dyn Backend>>) {
    let shape = BlockShape { batch: 2, seq: 8, d_model: 32, heads: 4 };
    let block = Block::new(shape, 3, device).unwrap().requires_grad_();
    let x = Tensor::randn(&[2, 8, 32], 4).to(device).unwrap();
    let target = Tensor::randn(&[2, 8, 32], 5).to(device).unwrap();
    block.naive_forward(&x).unwrap().mse_loss(&target).unwrap().backward().unwrap();
    let eager = grads(&block.parameters());
    block.parameters().iter().for_each(Tensor::zero_grad);
    let adamw = AdamW::new(&block.parameters(), 1e-2);
    let losses = match backend {
        None => train(&adamw, 8, &|| block.naive_forward(&x)?.mse_loss(&target)),
        Some(backend) => {
            let compiled = dynamo::compile(|x: Tensor| block.naive_forward(&x)).backend(backend);
            compiled.call(&x).unwrap().mse_loss(&target).unwrap().backward().unwrap();
            assert_grads_close(&grads(&block.parameters()), &eager, "the compiled block");
            train(&adamw, 8, &|| compiled.call(&x)?.mse_loss(&target))
        }
    };
    assert!(falls(&losses), "losses {losses:?}");
}

#[test]
fn the_block_trains_eagerly() {
    block_training(Device::Cpu, None);
}

#[test]
fn the_block_trains_compiled() {
    block_training(Device::Cpu, Some(Box::new(AotEager)));
    block_training(Device::Cpu, Some(Box::new(Inductor::default())));
}

#[test]
fn a_whole_step_compiles_with_a_break_at_backward() {
    // Forward, loss and backward in one compiled function: the backward is a graph break (as in
    // PyTorch without compiled autograd), the forward still compiles with its backward.
    let model = Mlp::new(1, Device::Cpu).unwrap().requires_grad_();
    let x = Tensor::randn(&[8, MLP_FEATURES], 6);
    let target = Tensor::zeros(&[8, MLP_FEATURES]);
    let step = dynamo::compile(|x: Tensor| {
        let loss = model.forward(&x)?.mse_loss(&target)?;
        loss.backward()?;
        Ok(loss)
    });
    let sgd = Sgd::new(&model.parameters(), 0.5);
    let losses: Vec<f32> = (0..4)
        .map(|_| {
            sgd.zero_grad();
            let loss = step.call(&x).unwrap().item().unwrap();
            sgd.step().unwrap();
            loss
        })
        .collect();
    assert!(falls(&losses), "losses {losses:?}");
    assert_eq!(step.stats().graph_breaks, 4, "one break a step, at backward()");
}
