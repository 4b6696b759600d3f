//! Checks of `recording`.

use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Tolerance, assert_close, ensure, record, record_tensor};

use super::support::capture;
use crate::subject::{Mlp, RecordingBackend, example_input};

/// A batch size drawn from the seed, so that the graphs recorded (and printed) depend on it.
fn batch(ctx: &Context, k: u64) -> usize {
    2 + ((ctx.seed >> (4 * k)) % 7) as usize
}

/// The shape of the first placeholder (the input batch) of each graph.
fn input_shapes(graphs: &[engine::fx::Graph]) -> Vec<Vec<usize>> {
    graphs.iter().map(|g| g.placeholders().first().map(|&p| g.node(p).meta.shape.clone()).unwrap_or_default()).collect()
}

/// Calls with batches 4, 4, 8: the second is a cache hit, the third a new shape, so two graphs.
pub fn keeps_one_graph_per_compile(ctx: &Context) -> CheckResult {
    let mlp = Mlp::new(ctx.seed);
    let recorder = RecordingBackend::new();
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(recorder.clone());
    let mut seen = Vec::new();
    for (call, batch) in [4, 4, 8].into_iter().enumerate() {
        let x = example_input(batch, ctx.seed + call as u64);
        let what = format!("call {} (batch {batch}) through the recording backend", call + 1);
        assert_close(&what, &compiled.call(&x)?, &mlp.forward(&x)?, Tolerance::EXACT)?;
        seen.push(recorder.graphs().len());
    }
    ensure(seen == [1, 1, 2], || {
        format!(
            "after calls with batches 4, 4 and 8, your clone of the backend held {seen:?} graphs; expected [1, 1, 2] \
             (the second call hits the cache, the third has a new shape). Do clones share one record?"
        )
    })?;
    let shapes = input_shapes(&recorder.graphs());
    record("graphs held after each call, and their input shapes", format!("{seen:?} {shapes:?}"));
    ensure(shapes == [vec![4, 16], vec![8, 16]], || {
        format!("the recorded graphs take inputs of shapes {shapes:?}, expected [[4, 16], [8, 16]]")
    })?;
    Ok("2 graphs recorded over 3 calls (batch 4 twice, then 8)".into())
}

/// The recorded graph is the captured graph itself: equal, and printed the same.
pub fn graphs_print_as_captured(ctx: &Context) -> CheckResult {
    let (mlp, x) = (Mlp::new(ctx.seed), example_input(batch(ctx, 0), ctx.seed + 1));
    let recorder = RecordingBackend::new();
    let output = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(recorder.clone()).call(&x)?;
    record_tensor("the output through the recording backend", &output, Tolerance::F32);
    let (expected, _) = capture(&mlp, &x)?;
    let graphs = recorder.graphs();
    record("the recorded graphs", graphs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"));
    ensure(graphs.len() == 1, || format!("one call recorded {} graphs, expected 1", graphs.len()))?;
    ensure(graphs[0] == expected && graphs[0].to_string() == expected.to_string(), || {
        format!("the recorded graph differs from the captured one.\nrecorded:\n{}\ncaptured:\n{expected}", graphs[0])
    })?;
    Ok(format!("the recorded graph equals the captured one and prints the same ({} nodes)", graphs[0].nodes().len()))
}

/// A new backend starts empty, and two backends made with `new()` keep separate records.
pub fn separate_backends_do_not_share(ctx: &Context) -> CheckResult {
    let mlp = Mlp::new(ctx.seed);
    let (used, unused) = (RecordingBackend::new(), RecordingBackend::new());
    record("graphs held by a new backend", used.graphs().len());
    ensure(used.graphs().is_empty(), || {
        format!("RecordingBackend::new() already holds {} graphs", used.graphs().len())
    })?;
    dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(used.clone()).call(&example_input(batch(ctx, 1), ctx.seed))?;
    let (a, b) = (used.graphs().len(), unused.graphs().len());
    record(
        "graphs held by the used and the unused backend, and the used one's input shapes",
        format!("{a} {b} {:?}", input_shapes(&used.graphs())),
    );
    ensure(a == 1 && b == 0, || {
        format!(
            "after compiling with one of two backends, they hold {a} and {b} graphs; expected 1 and 0 (each new() starts its own record)"
        )
    })?;
    Ok("new() starts empty; separate backends keep separate records".into())
}
