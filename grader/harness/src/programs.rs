//! Random programs for checks that take a graph: traced from a short list of steps over the
//! inputs `x: [rows, cols]`, `y: [cols]` and `z: [rows, 1]`, with pointwise, broadcasting,
//! reduction, composite, matmul and view ops. A program may be traced *dynamic*, with the batch
//! size `rows` as the symbol `s0` (as Dynamo does after a second batch size), and then run at
//! another batch size: the test a graph pass or an interpreter that forgets symbolic sizes fails.
//! A dynamic program computes `z` as `x.sum(-1, keepdim)` instead of taking it as an input, so
//! that one symbol stands for the batch size.
//!
//! A failing program prints as its graph, so that a shrunk case reads like code.

use std::fmt;

use engine::fx::Graph;
use engine::fx::proxy::Tracer;
use engine::{Result, Tensor};
use proptest::prelude::*;

/// One step: which op, which two earlier values it reads (taken modulo the values so far), and
/// a constant for the ops that take one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// The op (taken modulo the number of ops).
    pub op: u8,
    /// First operand: an index into the values so far.
    pub a: u8,
    /// Second operand.
    pub b: u8,
    /// A constant, a multiple of 0.25 in `[-2, 2]`.
    pub c: f32,
}

/// A random program over `x: [rows, cols]`, `y: [cols]`, `z: [rows, 1]` (computed from `x` when
/// the program is dynamic).
#[derive(Clone, PartialEq)]
pub struct RandomProgram {
    /// Rows of `x` and `z` when traced (at least 2, so that a dynamic batch is possible).
    pub rows: usize,
    /// Columns of `x`, and the length of `y`.
    pub cols: usize,
    /// Whether the batch size is a symbol in the graph.
    pub dynamic: bool,
    /// Seed of the inputs' values.
    pub seed: u64,
    /// The steps; those whose shapes do not fit are left out when tracing.
    pub steps: Vec<Step>,
}

impl RandomProgram {
    /// Programs of 1 to `max_steps` steps over small shapes, static or dynamic.
    pub fn strategy(max_steps: usize) -> impl Strategy<Value = RandomProgram> {
        let step = (any::<u8>(), any::<u8>(), any::<u8>(), -8i8..=8).prop_map(|(op, a, b, c)| Step {
            op,
            a,
            b,
            c: f32::from(c) / 4.0,
        });
        (2usize..5, 1usize..5, any::<bool>(), 0u64..1000, prop::collection::vec(step, 1..max_steps))
            .prop_map(|(rows, cols, dynamic, seed, steps)| RandomProgram { rows, cols, dynamic, seed, steps })
    }

    /// Inputs for batch size `rows` (the traced one, or another for a dynamic program).
    pub fn inputs(&self, rows: usize) -> Vec<Tensor> {
        let seed = self.seed.wrapping_mul(31).wrapping_add(rows as u64);
        let mut inputs = vec![Tensor::randn(&[rows, self.cols], seed), Tensor::randn(&[self.cols], seed + 1)];
        if !self.dynamic {
            inputs.push(Tensor::randn(&[rows, 1], seed + 2));
        }
        inputs
    }

    /// The batch sizes to run `graph` (this program's trace) at: the traced one, and another when
    /// the batch size stayed a symbol (an op that pins it to a number specializes the graph).
    pub fn batch_sizes(&self, graph: &Graph) -> Vec<usize> {
        let other = if self.rows == 3 { 5 } else { 3 };
        if graph.is_dynamic() { vec![self.rows, other] } else { vec![self.rows] }
    }

    /// The traced graph (two outputs: the last value and a middle one) and the inputs it was
    /// traced with.
    pub fn trace(&self) -> Result<(Graph, Vec<Tensor>)> {
        let inputs = self.inputs(self.rows);
        let tracer = Tracer::new();
        let mut values = Vec::new();
        for (i, (tensor, name)) in inputs.iter().zip(["x", "y", "z"]).enumerate() {
            let batch_dims: &[usize] = if self.dynamic && i == 0 { &[0] } else { &[] };
            let strides = engine::layout::contiguous_strides(tensor.shape());
            values.push(tracer.dynamic_placeholder(name, tensor.meta(), strides, batch_dims));
        }
        let outputs = self.apply(values, |_| Ok(()))?;
        Ok((tracer.finish(&outputs)?.graph, inputs))
    }

    /// The program's two outputs (the last value and a middle one) from its inputs' values,
    /// concrete or traced, calling `after_step(i)` after step `i` (to break the graph there, say).
    pub fn apply(
        &self,
        mut values: Vec<Tensor>,
        mut after_step: impl FnMut(usize) -> Result<()>,
    ) -> Result<[Tensor; 2]> {
        if self.dynamic {
            values.push(values[0].sum(-1, true)?);
        }
        for (i, step) in self.steps.iter().enumerate() {
            let pick = |k: u8| &values[k as usize % values.len()];
            let (x, y, c) = (pick(step.a), pick(step.b), step.c);
            let value = match step.op % 13 {
                0 => x.relu(),
                1 => x.tanh(),
                2 => x.add(y),
                3 => x.mul(y),
                4 => x.sub(c),
                5 => x.sum(-1, true),
                6 => x.softmax(-1),
                7 => x.maximum(y),
                8 => x.gt(c).and_then(|mask| mask.where_(x, y)),
                9 => y.t().and_then(|yt| x.matmul(&yt)),
                10 => x.mul(2.0),
                11 => x.reshape(&[x.shape().iter().product()]),
                _ => y.expand(x.shape()),
            };
            if let Ok(value) = value {
                values.push(value);
            }
            after_step(i)?;
        }
        Ok([values[values.len() - 1].clone(), values[values.len() / 2].clone()])
    }
}

impl fmt::Debug for RandomProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let batch = if self.dynamic { "a dynamic batch size `s0`" } else { "static sizes" };
        writeln!(f, "a program traced with x: [{}, {}] and {batch}:", self.rows, self.cols)?;
        match self.trace() {
            Ok((graph, _)) => write!(f, "{graph}"),
            Err(e) => write!(f, "(it does not trace: {e}) steps {:?}", self.steps),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::fx::Interpreter;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    #[test]
    fn dynamic_programs_run_at_another_batch_size() {
        let mut runner = TestRunner::deterministic();
        let (mut dynamic, mut reshaped) = (0, 0);
        for _ in 0..300 {
            let program = RandomProgram::strategy(12).new_tree(&mut runner).unwrap().current();
            let (graph, inputs) = program.trace().unwrap();
            Interpreter::new(graph.clone()).run(&inputs).unwrap();
            if graph.is_dynamic() {
                dynamic += 1;
                reshaped += usize::from(graph.to_string().contains("reshape"));
            }
            for rows in program.batch_sizes(&graph) {
                Interpreter::new(graph.clone())
                    .run(&program.inputs(rows))
                    .unwrap_or_else(|e| panic!("{e}\n{program:?}"));
            }
        }
        assert!(dynamic > 100 && reshaped > 20, "{dynamic} dynamic programs, {reshaped} with a reshape");
    }
}
