//! Checks of `explain_report`: the learner's summary against the grader's reading of the same
//! `explain` report.

use engine::{Result, Tensor, dynamo};
use grader_harness::programs::RandomProgram;
use grader_harness::{CheckResult, Context, draw, ensure, record, wires};

use crate::subject::{Attention, CaptureSummary, example_input, summarize};

/// What the summary must say, read by the grader from `explain` itself (past the wires on the
/// report's counts, which the exercise asks the learner to take themselves).
fn expected(f: impl Fn(Tensor) -> Result<Tensor>, x: &Tensor) -> Result<CaptureSummary> {
    let report = dynamo::explain(f).call(x)?;
    let first = report.graphs.first();
    Ok(wires::exempt(|| CaptureSummary {
        graph_count: report.graph_count(),
        break_count: report.graph_break_count(),
        op_count: report.op_count(),
        ops: report.ops_per_graph().into_iter().map(|ops| ops.into_iter().map(str::to_string).collect()).collect(),
        inputs: first.map(|g| g.placeholders().iter().map(|&p| g.node(p).name.clone()).collect()).unwrap_or_default(),
    }))
}

fn compare(what: &str, actual: CaptureSummary, expected: CaptureSummary) -> CheckResult {
    record(format!("your summary of {what}"), format!("{actual:?}"));
    ensure(actual == expected, || {
        let first = [
            ("graph_count", actual.graph_count == expected.graph_count),
            ("break_count", actual.break_count == expected.break_count),
            ("op_count", actual.op_count == expected.op_count),
            ("ops", actual.ops == expected.ops),
            ("inputs", actual.inputs == expected.inputs),
        ]
        .into_iter()
        .find(|(_, same)| !same)
        .map_or("a field", |(field, _)| field);
        format!("for {what}, your summary's `{first}` is wrong.\nyou returned\n{actual:#?}\nexpected\n{expected:#?}")
    })?;
    Ok(format!(
        "{what}: {} graph(s), {} break(s), {} ops, inputs {:?}",
        expected.graph_count, expected.break_count, expected.op_count, expected.inputs
    ))
}

/// A random program (drawn from the seed) as a function of `x` alone, its other inputs captured
/// as constants, breaking the graph after each step in `breaks`.
fn random_function(ctx: &Context, salt: u64, breaks: Vec<usize>) -> (impl Fn(Tensor) -> Result<Tensor>, Tensor) {
    let program = RandomProgram { dynamic: false, ..draw(ctx, salt, RandomProgram::strategy(10)) };
    let inputs = program.inputs(program.rows);
    let x = inputs[0].clone();
    let f = move |x: Tensor| {
        let mut values = inputs.clone();
        values[0] = x;
        let [last, middle] =
            program.apply(values, |i| if breaks.contains(&i) { dynamo::graph_break() } else { Ok(()) })?;
        last.sum_all()?.add(&middle.sum_all()?)
    };
    (f, x)
}

/// The attention block: one graph, no break, its weights as named inputs; then a random program
/// drawn from the seed.
pub fn summarizes_one_graph(ctx: &Context) -> CheckResult {
    let model = Attention::new(ctx.seed);
    let x = example_input(5, ctx.seed + 1);
    let actual = summarize(|x| model.forward(&x), &x)?;
    compare("the attention block", actual, expected(|x| model.forward(&x), &x)?)?;
    let (f, x) = random_function(ctx, 1, vec![]);
    compare("a random program", summarize(&f, &x)?, expected(&f, &x)?)
}

/// A function with two breaks (a value read with `item()`, an explicit `graph_break()`): three
/// graphs, with their ops counted separately.
pub fn summarizes_graphs_and_breaks(ctx: &Context) -> CheckResult {
    let w = Tensor::randn(&[4, 4], ctx.seed).with_name("w");
    let f = |x: Tensor| {
        let h = x.matmul(&w)?.relu()?;
        let scale = h.sum_all()?.item()?;
        let h = h.mul(scale)?.exp()?;
        dynamo::graph_break()?;
        h.softmax(-1)
    };
    let x = Tensor::randn(&[3, 4], ctx.seed + 1);
    compare("a function with two breaks", summarize(f, &x)?, expected(f, &x)?)?;
    // A random program with breaks after one to three of its steps, all drawn from the seed.
    let breaks = draw(ctx, 2, proptest::collection::vec(0usize..10, 1..4));
    let (f, x) = random_function(ctx, 3, breaks.clone());
    compare(&format!("a random program breaking after steps {breaks:?}"), summarize(&f, &x)?, expected(&f, &x)?)
}
