//! Checks of `layer_norm_backward`: each gradient against central finite differences of layer
//! norm that this check computes itself, in double precision, on shapes, values and `eps` drawn
//! from the run's seed. Autograd is not consulted: the exercise is to write what it would run.

use engine::Tensor;
use grader_harness::{CheckResult, Context, Failure, Tolerance, ensure, for_all, record_floats};
use proptest::prelude::*;

use crate::subject::layer_norm_backward;

/// One case: `x` of `shape` (rows, then the normalised dimension), the parameters and the
/// gradient of the output, as numbers; `eps`.
#[derive(Clone, Debug)]
struct Case {
    shape: Vec<usize>,
    x: Vec<f32>,
    weight: Vec<f32>,
    bias: Vec<f32>,
    grad_y: Vec<f32>,
    eps: f32,
}

fn cases() -> impl Strategy<Value = Case> {
    let shape = prop_oneof![
        (1usize..=6, 2usize..=24).prop_map(|(r, d)| vec![r, d]),
        (1usize..=3, 1usize..=3, 2usize..=12).prop_map(|(a, b, d)| vec![a, b, d]),
    ];
    (shape, prop_oneof![Just(1e-5f32), Just(1e-3), Just(0.1)]).prop_flat_map(|(shape, eps)| {
        let n: usize = shape.iter().product();
        let d = shape[shape.len() - 1];
        let values = |len| prop::collection::vec(-2.0f32..2.0, len);
        (values(n), prop::collection::vec(0.25f32..2.0, d), values(d), values(n)).prop_map(
            move |(x, weight, bias, grad_y)| Case { shape: shape.clone(), x, weight, bias, grad_y, eps },
        )
    })
}

/// `sum(grad_y * layer_norm(x, weight, bias))` in double precision: the loss whose gradients
/// the subject computes.
fn loss(c: &Case, x: &[f64], weight: &[f64], bias: &[f64]) -> f64 {
    let d = c.shape[c.shape.len() - 1];
    let mut total = 0.0;
    for (row, g) in x.chunks(d).zip(c.grad_y.chunks(d)) {
        let mean = row.iter().sum::<f64>() / d as f64;
        let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d as f64;
        let std = (variance + f64::from(c.eps)).sqrt();
        for i in 0..d {
            total += f64::from(g[i]) * ((row[i] - mean) / std * weight[i] + bias[i]);
        }
    }
    total
}

/// The gradient of [`loss`] with respect to `which` (0: x, 1: weight, 2: bias) by central
/// differences.
fn finite_differences(c: &Case, which: usize) -> Vec<f64> {
    let widen = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let mut args = [widen(&c.x), widen(&c.weight), widen(&c.bias)];
    (0..args[which].len())
        .map(|i| {
            let original = args[which][i];
            let h = 1e-6 * original.abs().max(1.0);
            args[which][i] = original + h;
            let up = loss(c, &args[0], &args[1], &args[2]);
            args[which][i] = original - h;
            let down = loss(c, &args[0], &args[1], &args[2]);
            args[which][i] = original;
            (up - down) / (2.0 * h)
        })
        .collect()
}

/// `layer_norm_backward` agrees with finite differences on every gradient.
pub fn layer_norm_backward_matches_finite_differences(ctx: &Context) -> CheckResult {
    let cases_run = 40;
    for_all(ctx, cases_run, cases(), |c| {
        let d = c.shape[c.shape.len() - 1];
        let tensor = |v: &[f32], shape: &[usize]| Tensor::from_vec(v.to_vec(), shape);
        let (x, weight, grad_y) = (tensor(&c.x, &c.shape)?, tensor(&c.weight, &[d])?, tensor(&c.grad_y, &c.shape)?);
        let (grad_x, grad_weight, grad_bias) = layer_norm_backward(&x, &weight, c.eps, &grad_y)?;
        for (which, (name, got, shape)) in
            [("grad_x", &grad_x, c.shape.as_slice()), ("grad_weight", &grad_weight, &[d]), ("grad_bias", &grad_bias, &[d])]
                .into_iter()
                .enumerate()
        {
            ensure(got.shape() == shape, || {
                format!("{name} has shape {:?}; it must have the shape {shape:?} of what it is the gradient of", got.shape())
            })?;
            let got = got.to_vec()?;
            let expected = finite_differences(&c, which);
            let scale = expected.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            if let Some((i, (g, e))) =
                got.iter().zip(&expected).enumerate().find(|(_, (g, e))| (f64::from(**g) - **e).abs() > 2e-3 * scale)
            {
                return Err(Failure::fail(format!(
                    "{name}[{i}] is {g}, but finite differences of layer norm give {e:.6} (x of shape {:?}, eps {})",
                    c.shape, c.eps
                )));
            }
            record_floats(name, &got, Tolerance { abs: 1e-3, rel: 1e-3 });
        }
        Ok(())
    })?;
    Ok(format!("grad_x, grad_weight and grad_bias agree with finite differences on {cases_run} random layer norms"))
}
