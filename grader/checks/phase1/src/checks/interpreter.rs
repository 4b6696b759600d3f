//! Checks of `interpreter`: the learner's interpreter must agree exactly with the engine's
//! `fx::Interpreter`, since both run the same eager kernels.

use engine::fx::proxy::Tracer;
use engine::fx::{Graph, Interpreter};
use engine::{Result, Tensor, dynamo};
use grader_harness::programs::RandomProgram;
use grader_harness::{CheckResult, Context, Failure, Tolerance, assert_close, ensure, for_all, record, wires};

use super::support::capture;
use crate::subject::{GraphInterpreter, Mlp, example_input, interpret};

/// Fails unless `interpret(graph, inputs)` gives the engine interpreter's outputs, bit for bit.
fn agrees_with_fx(graph: &Graph, inputs: &[Tensor]) -> Result<(), Failure> {
    let expected = wires::exempt(|| Interpreter::new(graph.clone()).run(inputs))?;
    let actual = interpret(graph, inputs)?;
    ensure(actual.len() == expected.len(), || {
        format!("the graph has {} outputs, your interpreter returned {}:\n{graph}", expected.len(), actual.len())
    })?;
    for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert_close(&format!("output {i}"), a, e, Tolerance::EXACT)
            .map_err(|f| Failure::fail(format!("{f}\n\non this graph:\n{graph}")))?;
    }
    Ok(())
}

/// The MLP's captured graph: six placeholders (the input and four named parameters), one output.
pub fn runs_the_mlp_graph(ctx: &Context) -> CheckResult {
    let (graph, inputs) = capture(&Mlp::new(ctx.seed), &example_input(4, ctx.seed + 1))?;
    agrees_with_fx(&graph, &inputs)?;
    Ok(format!("the MLP graph ({} nodes) gives the same outputs as fx::Interpreter", graph.nodes().len()))
}

/// Random graphs of pointwise, broadcasting, reduction, composite, matmul and view nodes, half of
/// them with a dynamic batch size run at a second batch size too.
pub fn matches_fx_interpreter_on_random_graphs(ctx: &Context) -> CheckResult {
    let cases = 64;
    for_all(ctx, cases, RandomProgram::strategy(12), |program| {
        let (graph, _) = program.trace()?;
        for rows in program.batch_sizes(&graph) {
            agrees_with_fx(&graph, &program.inputs(rows))?;
        }
        Ok(())
    })?;
    Ok(format!("{cases} random graphs, dynamic ones at two batch sizes, give exactly the outputs of fx::Interpreter"))
}

/// Too few or too many inputs is an error the caller can handle, not a panic, and not a result
/// computed from the wrong inputs.
pub fn rejects_a_wrong_input_count(ctx: &Context) -> CheckResult {
    let (a, b) = (Tensor::randn(&[2, 3], ctx.seed), Tensor::randn(&[2, 3], ctx.seed + 1));
    let tracer = Tracer::new();
    let sum = tracer.input(&a)?.add(&tracer.input(&b)?)?;
    let graph = tracer.finish(&[sum])?.graph;
    // Too few (0 or 1) and too many (3 to 5), as many as the seed says.
    let (few, many) = ((ctx.seed % 2) as usize, 3 + (ctx.seed / 2 % 3) as usize);
    for inputs in [vec![a.clone(); few], vec![b.clone(); many]] {
        let refused = interpret(&graph, &inputs).is_err();
        record(format!("an error for {} inputs", inputs.len()), refused);
        if !refused {
            return Err(Failure::fail(format!(
                "interpret(graph, inputs) with {} inputs returned Ok for this graph of 2 placeholders; expected an Err:\n{graph}",
                inputs.len()
            )));
        }
    }
    Ok(format!("{few} or {many} inputs for a graph of 2 placeholders: an error each time"))
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
