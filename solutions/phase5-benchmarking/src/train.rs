//! Exercise `train_break_even`: what compiling a whole training step costs, and after how many
//! steps it is repaid (the training chapter, `book/src/training/engine.md`).

use std::time::Instant;

use engine::optim::{Optimizer, Sgd};
use engine::{Device, Result, Tensor, dynamo};

use crate::break_even::Costs;
use crate::models::{MLP_FEATURES, Mlp};
use crate::timer::{TimerConfig, do_bench};

// ANCHOR: measure_training_costs
/// **Exercise `train_break_even`.** Measure the [`Costs`] of one training step of the MLP
/// 512-2048-512 at `batch` on `device`: `Mlp::new(0, device)?.requires_grad_()`, the batch
/// `Tensor::randn(&[batch, MLP_FEATURES], 1)` and the target `Tensor::randn(&[batch,
/// MLP_FEATURES], 2)` (both moved to `device`), and a step that is the forward, `mse_loss`
/// against the target, `backward()`, `Sgd::new(&params, 1e-3).momentum(0.9)`'s `step()`, then
/// `zero_grad()`.
///
/// `eager` is that step run as written; `first_call` and `compiled` are the whole step compiled
/// into one graph, `dynamo::compile(...).compiled_autograd(true)`, on a second model and
/// optimizer of its own (made the same way): its first call timed alone with [`Instant`], waiting
/// for the device before starting the clock and before stopping it, then the steady state of both
/// forms with your `do_bench` and `config`. Each timed call is a real step: the models train.
///
/// Your `break_even` then says after how many steps the compile is repaid.
///
/// Book: `book/src/phase5/exercises.md`, section "train_break_even". Check: `cargo grader check phase5`.
pub fn measure_training_costs(device: Device, batch: usize, config: &TimerConfig) -> Result<Costs> {
    // ANCHOR: solution
    let x = Tensor::randn(&[batch, MLP_FEATURES], 1).to(device)?;
    let target = Tensor::randn(&[batch, MLP_FEATURES], 2).to(device)?;
    let step = |model: &Mlp, sgd: &Sgd, x: &Tensor, target: &Tensor| -> Result<Tensor> {
        let loss = model.forward(x)?.mse_loss(target)?;
        loss.backward()?;
        sgd.step()?;
        sgd.zero_grad();
        Ok(loss)
    };
    let eager_model = Mlp::new(0, device)?.requires_grad_();
    let eager_sgd = Sgd::new(&eager_model.parameters(), 1e-3).momentum(0.9);
    let model = Mlp::new(0, device)?.requires_grad_();
    let sgd = Sgd::new(&model.parameters(), 1e-3).momentum(0.9);
    let compiled =
        dynamo::compile(|(x, target): (Tensor, Tensor)| step(&model, &sgd, &x, &target)).compiled_autograd(true);
    device.synchronize()?;
    let start = Instant::now();
    compiled.call((&x, &target))?;
    device.synchronize()?;
    let first_call = start.elapsed().as_secs_f64();
    let steady = do_bench(device, config, || compiled.call((&x, &target)).map(drop))?;
    let eager = do_bench(device, config, || step(&eager_model, &eager_sgd, &x, &target).map(drop))?;
    Ok(Costs { first_call, compiled: steady.median(), eager: eager.median() })
    // ANCHOR_END: solution
}
// ANCHOR_END: measure_training_costs
