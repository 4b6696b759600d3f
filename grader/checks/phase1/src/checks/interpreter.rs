//! Checks of `interpreter`: the learner's interpreter must agree exactly with the engine's
//! `fx::Interpreter`, since both run the same eager kernels.

use engine::fx::proxy::Tracer;
use engine::fx::{Graph, Interpreter};
use engine::{Result, Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, Tolerance, assert_close, ensure, for_all, record};
use proptest::prelude::*;

use super::support::capture;
use crate::subject::{GraphInterpreter, Mlp, example_input, interpret};

/// Fails unless `interpret(graph, inputs)` gives the engine interpreter's outputs, bit for bit.
fn agrees_with_fx(graph: &Graph, inputs: &[Tensor]) -> Result<(), Failure> {
    let expected = Interpreter::new(graph.clone()).run(inputs)?;
    let actual = interpret(graph, inputs)?;
    ensure(actual.len() == expected.len(), || {
        format!("the graph has {} outputs, your interpreter returned {}:\n{graph}", expected.len(), actual.len())
    })?;
    for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert_close(&format!("output {i}"), a, e, Tolerance::EXACT)
            .map_err(|f| Failure::fail(format!("on this graph:\n{graph}\n{f}")))?;
    }
    Ok(())
}

/// The MLP's captured graph: six placeholders (the input and four named parameters), one output.
pub fn runs_the_mlp_graph(ctx: &Context) -> CheckResult {
    let (graph, inputs) = capture(&Mlp::new(ctx.seed), &example_input(4, ctx.seed + 1))?;
    agrees_with_fx(&graph, &inputs)?;
    Ok(format!("the MLP graph ({} nodes) gives the same outputs as fx::Interpreter", graph.nodes().len()))
}

/// One step of a random program: an op kind, two operand picks and a scalar.
type Step = (u8, u8, u8, f32);

/// Traces a random program over inputs `[m, n]`, `[m, n]` and `[n]`: each step applies an op to
/// earlier values (steps whose shapes do not fit are left out). Two outputs, one of them may be
/// an input.
fn random_program(m: usize, n: usize, seed: u64, steps: &[Step]) -> Result<(Graph, Vec<Tensor>)> {
    let inputs = [Tensor::randn(&[m, n], seed), Tensor::randn(&[m, n], seed + 1), Tensor::randn(&[n], seed + 2)];
    let tracer = Tracer::new();
    let mut values = inputs.iter().map(|t| tracer.input(t)).collect::<Result<Vec<_>>>()?;
    for &(kind, a, b, c) in steps {
        let (x, y) = (&values[a as usize % values.len()], &values[b as usize % values.len()]);
        let value = match kind % 9 {
            0 => x.relu(),
            1 => x.tanh(),
            2 => x.add(y),
            3 => x.mul(y),
            4 => x.sub(c),
            5 => x.sum(-1, true),
            6 => x.softmax(-1),
            7 => x.maximum(y),
            _ => y.t().and_then(|yt| x.matmul(&yt)),
        };
        if let Ok(value) = value {
            values.push(value);
        }
    }
    let outputs = [values[values.len() - 1].clone(), values[values.len() / 2].clone()];
    let traced = tracer.finish(&outputs)?;
    Ok((traced.graph, inputs.to_vec()))
}

/// Random graphs of pointwise, broadcasting, reduction, composite and matmul nodes.
pub fn matches_fx_interpreter_on_random_graphs(ctx: &Context) -> CheckResult {
    let cases = 64;
    let step = (any::<u8>(), any::<u8>(), any::<u8>(), -2.0f32..2.0);
    let strategy = (1usize..4, 1usize..5, 0u64..1000, prop::collection::vec(step, 1..12));
    for_all(ctx, cases, strategy, |(m, n, seed, steps)| {
        let (graph, inputs) = random_program(m, n, seed, &steps)?;
        agrees_with_fx(&graph, &inputs)
    })?;
    Ok(format!("{cases} random graphs give exactly the outputs of fx::Interpreter"))
}

/// Too few or too many inputs is an error the caller can handle, not a panic, and not a result
/// computed from the wrong inputs.
pub fn rejects_a_wrong_input_count(ctx: &Context) -> CheckResult {
    let (a, b) = (Tensor::randn(&[2, 3], ctx.seed), Tensor::randn(&[2, 3], ctx.seed + 1));
    let tracer = Tracer::new();
    let sum = tracer.input(&a)?.add(&tracer.input(&b)?)?;
    let graph = tracer.finish(&[sum])?.graph;
    for inputs in [vec![a.clone()], vec![a.clone(), b.clone(), b.clone()]] {
        let refused = interpret(&graph, &inputs).is_err();
        record(format!("an error for {} inputs", inputs.len()), refused);
        if !refused {
            return Err(Failure::fail(format!(
                "interpret(graph, inputs) with {} inputs returned Ok for this graph of 2 placeholders; expected an Err:\n{graph}",
                inputs.len()
            )));
        }
    }
    Ok("1 or 3 inputs for a graph of 2 placeholders: an error each time".into())
}

/// `GraphInterpreter` as the backend of a compiled function, over two batch sizes.
pub fn backend_runs_compiled_functions(ctx: &Context) -> CheckResult {
    let mlp = Mlp::new(ctx.seed);
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(GraphInterpreter);
    for batch in [3, 5] {
        let x = example_input(batch, ctx.seed + batch as u64);
        let what = format!("the compiled MLP's output for a batch of {batch}");
        assert_close(&what, &compiled.call(&x)?, &mlp.forward(&x)?, Tolerance::EXACT)?;
    }
    Ok("the MLP compiled with GraphInterpreter matches eager for batches of 3 and 5".into())
}
