//! Compiled gradients against eager ones: a function compiled with `dynamo::compile` and called
//! on inputs that require grad gets a compiled backward (AOTAutograd's forward and backward
//! graphs under `aot_eager` and `inductor`, the eager tape under `eager`), whose gradients must
//! equal eager autograd's within float tolerance, on random programs.

use crate::common::programs::{Program, training_programs};
use engine::backends::{AotEager, Backend, Eager, Inductor};
use engine::{Result, Tensor, dynamo};
use proptest::prelude::*;

/// `sum(out_i * w_i)` over the outputs, with fixed random weights: every element of every output
/// contributes differently.
fn loss(outputs: &[Tensor]) -> Result<Tensor> {
    let mut total: Option<Tensor> = None;
    for (i, out) in outputs.iter().enumerate() {
        let w = Tensor::uniform(out.shape(), -1.0, 1.0, 1000 + i as u64).to(out.device())?;
        let term = out.mul(&w)?.reshape(&[out.numel()])?.sum(0, false)?;
        total = Some(match total {
            None => term,
            Some(t) => t.add(&term)?,
        });
    }
    Ok(total.expect("programs return at least one value"))
}

/// The gradient of each input of `run` (zeros where none reaches it), eagerly or compiled.
fn gradients(inputs: &[Tensor], run: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>) -> Vec<Vec<f32>> {
    let leaves: Vec<Tensor> = inputs.iter().map(|t| t.requires_grad_(true)).collect();
    let outputs = run(&leaves).unwrap();
    let loss = loss(&outputs).unwrap();
    // A program whose outputs depend on no input (a random program can be one) has a loss that
    // requires no grad: no gradient reaches any input, and `backward` refuses, as PyTorch's does.
    if loss.requires_grad() {
        loss.backward().unwrap();
    }
    leaves.iter().map(|l| l.grad().map_or_else(|| vec![0.0; l.numel()], |g| g.to_vec().unwrap())).collect()
}

fn compiled_gradients(program: &Program, inputs: &[Tensor], backend: impl Backend + 'static) -> Vec<Vec<f32>> {
    let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).backend(backend);
    gradients(inputs, |xs| compiled.call(xs))
}

fn assert_close(got: &[Vec<f32>], expected: &[Vec<f32>], what: &str) -> std::result::Result<(), TestCaseError> {
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        for (k, (x, y)) in g.iter().zip(e).enumerate() {
            let near = (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-4 + 1e-3 * y.abs();
            prop_assert!(near, "{what}: input {i} element {k}: compiled {x}, eager {y}");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn aot_eager_gradients_match_eager(program in training_programs(10), seed in any::<u64>()) {
        let inputs = program.inputs(seed);
        let eager = gradients(&inputs, |xs| program.run(xs));
        assert_close(&compiled_gradients(&program, &inputs, AotEager), &eager, &format!("{program:?}"))?;
        assert_close(&compiled_gradients(&program, &inputs, Eager), &eager, &format!("{program:?}"))?;
    }

    #[test]
    fn inductor_gradients_match_eager(program in training_programs(8), seed in any::<u64>()) {
        let inputs = program.inputs(seed);
        let eager = gradients(&inputs, |xs| program.run(xs));
        assert_close(&compiled_gradients(&program, &inputs, Inductor::default()), &eager, &format!("{program:?}"))?;
    }
}
