//! What several checks share: capturing a model, the engine's own output code for it, running a
//! model through a configured Inductor against eager execution, and random programs.

use engine::backends::Inductor;
use engine::fx::Graph;
use engine::fx::proxy::Tracer;
use engine::inductor::{Config, OutputCode};
use engine::{Device, Result, Tensor, dynamo};
use grader_harness::{Failure, Tolerance, assert_close};
use proptest::prelude::*;

/// The graph compiling `f` on `inputs` captures (traced as `Compiled::call` traces it).
pub fn capture(f: &dyn Fn(Vec<Tensor>) -> Result<Tensor>, inputs: &[Tensor]) -> Result<Graph> {
    let tracer = Tracer::new();
    let symbolic = inputs.iter().map(|t| tracer.input(t)).collect::<Result<Vec<_>>>()?;
    let output = f(symbolic)?;
    Ok(tracer.finish(&[output])?.graph)
}

/// The output code the engine's own Inductor generates for `f` on `inputs` (C for the CPU).
pub fn reference_code(f: &dyn Fn(Vec<Tensor>) -> Result<Tensor>, inputs: &[Tensor]) -> Result<OutputCode> {
    engine::inductor::generate(&capture(f, inputs)?, Device::Cpu, &Config::default())
}

/// Compiles `f` with `inductor`, runs it on `inputs`, and fails unless the result matches eager
/// execution. Returns the output code of the compilation.
pub fn matches_eager(
    what: &str,
    inductor: Inductor,
    f: &dyn Fn(Vec<Tensor>) -> Result<Tensor>,
    inputs: &[Tensor],
) -> Result<OutputCode, Failure> {
    let expected = f(inputs.to_vec())?;
    let compiled = dynamo::compile(|t: Vec<Tensor>| f(t)).backend(inductor.clone());
    let actual = compiled.call(inputs)?;
    let code = inductor.output_codes().pop().expect("a call compiles once");
    assert_close(what, &actual, &expected, Tolerance { abs: 1e-5, rel: 1e-4 })
        .map_err(|f| Failure::fail(format!("{f}\n\nthe generated code was:\n{code}")))?;
    Ok(code)
}

/// A random chain of pointwise ops over a `[rows, cols]` input `x`, a second input `y`, a bias
/// broadcast in one of three ways and a transposed input: every kind of index a pointwise
/// kernel meets (contiguous, broadcast, strided), at sizes that are rarely multiples of 4.
#[derive(Clone)]
pub struct PointwiseProgram {
    /// Rows of `x`.
    pub rows: usize,
    /// Columns of `x`.
    pub cols: usize,
    /// 0: bias `[cols]`; 1: bias `[rows, 1]`; 2: a one-element bias `[1]`.
    pub bias: u8,
    /// Steps: op kind, two operand picks, a constant.
    pub steps: Vec<(u8, u8, u8, f32)>,
}

/// A failing program prints as the graph it traces to, so that a shrunk case reads like code.
impl std::fmt::Debug for PointwiseProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bias = ["[cols]", "[rows, 1]", "[1]"][usize::from(self.bias.min(2))];
        writeln!(f, "a program over x, y: [{}, {}], a bias {bias} and a transposed z:", self.rows, self.cols)?;
        match capture(&|t| self.run(t), &self.inputs(0)) {
            Ok(graph) => write!(f, "{graph}"),
            Err(e) => write!(f, "(it does not trace: {e}) steps {:?}", self.steps),
        }
    }
}

impl PointwiseProgram {
    /// Programs with 1 to 8 steps over shapes up to 40 x 40, a dim of 1 as often as not (so a
    /// single element, a row, a column).
    pub fn strategy() -> impl Strategy<Value = PointwiseProgram> {
        let step = (any::<u8>(), any::<u8>(), any::<u8>(), -2.0f32..2.0);
        let size = || prop_oneof![Just(1usize), 2usize..40];
        (size(), size(), 0u8..3, prop::collection::vec(step, 1..8))
            .prop_map(|(rows, cols, bias, steps)| PointwiseProgram { rows, cols, bias, steps })
    }

    /// The program's inputs, drawn from `seed`: `x`, `y`, the bias and `z` (stored `[cols, rows]`).
    pub fn inputs(&self, seed: u64) -> Vec<Tensor> {
        let (r, c) = (self.rows, self.cols);
        let bias_shape: Vec<usize> = match self.bias {
            0 => vec![c],
            1 => vec![r, 1],
            _ => vec![1],
        };
        vec![
            Tensor::uniform(&[r, c], -2.0, 2.0, seed),
            Tensor::uniform(&[r, c], -2.0, 2.0, seed + 1),
            Tensor::uniform(&bias_shape, -2.0, 2.0, seed + 2),
            Tensor::uniform(&[c, r], -2.0, 2.0, seed + 3),
        ]
    }

    /// Runs the program: eagerly on concrete inputs, or recorded when traced.
    pub fn run(&self, inputs: Vec<Tensor>) -> Result<Tensor> {
        let mut pool = vec![inputs[0].clone(), inputs[1].clone(), inputs[2].clone(), inputs[3].t()?];
        for &(kind, a, b, c) in &self.steps {
            let (x, y) = (pool[a as usize % pool.len()].clone(), pool[b as usize % pool.len()].clone());
            let value = match kind % 12 {
                0 => x.add(&y)?,
                1 => x.sub(&y)?,
                2 => x.mul(&y)?,
                3 => x.maximum(&y)?,
                4 => x.relu()?,
                5 => x.neg()?,
                6 => x.tanh()?,
                7 => x.sigmoid()?,
                8 => x.mul(0.5)?.exp()?,
                9 => x.gt(c)?.where_(&x, &y)?,
                10 => x.mul(c)?,
                _ => x.add(c)?,
            };
            pool.push(value);
        }
        Ok(pool.pop().expect("the pool is never empty"))
    }
}
