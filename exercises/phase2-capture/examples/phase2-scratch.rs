//! A place to try your phase 2 functions by hand: `cargo run -p phase2-capture --example phase2-scratch`.
//! It calls each exercise on the phase's models and prints what it returns. A function that is
//! still `todo!()` prints one line saying so, and the others still run. Edit freely: the grader
//! never reads this file.

use engine::logs::{self, Artifact};
use engine::{DType, Tensor, dynamo};
use phase2_capture::{
    Attention, BIAS, Body, Call, broadcast, eliminate_common_subexpressions, eliminate_dead_code, example_input,
    line_table, predict, propagate, summarize, wasteful,
};

#[path = "../../show.rs"]
mod show;
use show::{quiet_panics, show, show_text};

fn main() {
    quiet_panics();
    let attention = Attention::new(0);
    let x = example_input(4, 1);
    let graph_of = |f: &dyn Fn(Tensor) -> engine::Result<Tensor>| -> engine::Result<engine::fx::Graph> {
        Ok(dynamo::explain(f).call(&x)?.graphs.remove(0))
    };

    show("summarize (the attention block)", || summarize(|x| attention.forward(&x), &x));
    show("line_table (the attention block)", || Ok(line_table(&graph_of(&|x| attention.forward(&x))?)));
    show("broadcast([4, 1], [3])", || Ok(broadcast(&[4, 1], &[3])));
    show("propagate (the attention graph, for 7 tokens)", || {
        let graph = graph_of(&|x| attention.forward(&x))?;
        let mut shapes: Vec<Vec<usize>> =
            graph.placeholders().iter().map(|&p| graph.node(p).meta.shape.clone()).collect();
        shapes[0][0] = 7;
        propagate(&graph, &shapes)
    });
    // The passes print the graph before and after, so the difference is there to read.
    show_text("eliminate_dead_code (wasteful)", || {
        let graph = graph_of(&|x| wasteful(&x))?;
        Ok(format!("before:\n{graph}\nafter:\n{}", eliminate_dead_code(&graph)?))
    });
    show_text("eliminate_common_subexpressions (wasteful)", || {
        let graph = graph_of(&|x| wasteful(&x))?;
        Ok(format!("before:\n{graph}\nafter:\n{}", eliminate_common_subexpressions(&graph)?))
    });
    // The engine's own cache on a few calls of one body, with its `recompiles` and `guards` logs,
    // next to your prediction: change the body, the calls and the limit to test an idea.
    let (body, limit) = (Body::AddTranspose, 3);
    let calls: Vec<Call> = [(DType::F32, [5, 5]), (DType::F32, [1, 5]), (DType::BF16, [5, 5]), (DType::F32, [3, 3])]
        .into_iter()
        .map(|(dtype, shape)| Call { dtype, shape: shape.to_vec() })
        .collect();
    show_text(&format!("the engine's cache on those calls of Body::{body:?}"), || {
        let bias = Tensor::ones(&[BIAS]);
        let compiled = dynamo::compile(|x: Tensor| body.run(&x, &bias)).recompile_limit(limit);
        let mut out = String::new();
        for call in &calls {
            let x = Tensor::randn(&call.shape, 0).to_dtype(call.dtype)?;
            let (result, log) = logs::capture(&[Artifact::Recompiles, Artifact::Guards], || compiled.call(&x));
            result?;
            let stats = compiled.stats();
            out.push_str(&format!(
                "call {} {:?}: so far {} compiles, {} cache hits, {} eager runs\n{log}",
                call.dtype, call.shape, stats.compiles, stats.cache_hits, stats.eager_fallbacks
            ));
        }
        Ok(out)
    });
    show(&format!("predict (those calls of Body::{body:?}, limit {limit})"), || Ok(predict(body, &calls, limit)));
}
