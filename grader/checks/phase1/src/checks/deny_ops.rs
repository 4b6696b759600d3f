//! Checks of the stretch exercise `deny_ops`.

use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, Tolerance, assert_close, ensure, record};

use super::support::capture;
use crate::subject::{DenyOps, Mlp, example_input};

/// Denying one of the MLP's ops (which one is drawn from the seed), listed among names of ops the
/// MLP does not call (which, how many and in what order are drawn from the seed too), fails the
/// compile with an error naming the op the graph calls and its source line.
pub fn refuses_a_denied_op(ctx: &Context) -> CheckResult {
    let (mlp, x) = (Mlp::new(ctx.seed), example_input(2, ctx.seed + 1));
    let (graph, _) = capture(&mlp, &x)?;
    let calls: Vec<_> = graph.nodes().iter().filter(|n| n.op().is_some()).collect();
    let denied = calls[(ctx.seed % calls.len() as u64) as usize].op().expect("filtered to calls").name();
    // The first node calling it is the one a backend refuses.
    let first = calls.iter().find(|n| n.op().is_some_and(|op| op.name() == denied)).expect("found above");
    let line = first.location.expect("call nodes have locations").short();
    let names = with_absent_ops(&graph, denied, ctx.seed);
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(DenyOps::new(&names));
    let result = compiled.call(&x);
    let named = result.as_ref().err().map(|e| e.to_string()).is_some_and(|m| m.contains(denied) && m.contains(&line));
    record(format!("with DenyOps::new(&{names:?}): refused, naming `{denied}` and its line"), format!("{} {named}", result.is_err()));
    match result {
        Ok(_) => Err(Failure::fail(format!(
            "with DenyOps::new(&{names:?}) the MLP (which calls {denied} at {line}) compiled and ran; expected an \
             error"
        ))),
        Err(error) => {
            let message = error.to_string();
            ensure(message.contains(denied) && message.contains(&line), || {
                format!("the error should name the op `{denied}` and its line `{line}`; it reads: {message}")
            })?;
            Ok(format!("refused with: {message}"))
        }
    }
}

/// `denied` among one to three names of ops the MLP's graph never calls, before or after
/// decomposition, none part of one of its op names or holding one (so a backend that matches parts
/// of names refuses the same op). Which names, and where `denied` stands among them, come from the
/// seed.
fn with_absent_ops<'a>(graph: &engine::fx::Graph, denied: &'a str, seed: u64) -> Vec<&'a str> {
    const ABSENT: [&str; 8] = ["conv2d", "embedding", "cumsum", "sort", "dropout", "batch_norm", "topk", "avg_pool2d"];
    let called: Vec<&str> = graph.nodes().iter().filter_map(|n| n.op().map(|op| op.name())).collect();
    let mut absent: Vec<&str> =
        ABSENT.into_iter().filter(|a| called.iter().all(|c| !c.contains(a) && !a.contains(c))).collect();
    let mut names = Vec::new();
    for k in 0..1 + (seed >> 40) % 3 {
        names.push(absent.remove(((seed >> (44 + 4 * k)) % absent.len() as u64) as usize));
    }
    names.insert(((seed >> 56) % (names.len() as u64 + 1)) as usize, denied);
    names
}

/// Names that are not ops of the MLP's captured graph, drawn from the seed: part of one of its op
/// names (`max` of `softmax`, `elu` of `gelu`) and a longer name holding one (`log_softmax`,
/// `linear_backward`). A name is denied whole: `softmax` is not `max`.
fn near_misses(graph: &engine::fx::Graph, seed: u64) -> Vec<String> {
    let mut names: Vec<&str> = graph.nodes().iter().filter_map(|n| n.op().map(|op| op.name())).collect();
    names.dedup();
    let pick = |k: u64| names[((seed >> (8 * k)) % names.len() as u64) as usize];
    let part = pick(0);
    // A part of at least two characters, not the whole name, at an offset drawn from the seed.
    let len = 2 + (seed >> 16) as usize % (part.len() - 2);
    let start = (seed >> 24) as usize % (part.len() - len + 1);
    let longer = match (seed >> 32) % 3 {
        0 => format!("log_{}", pick(1)),
        1 => format!("{}_backward", pick(1)),
        _ => format!("{}2d", pick(1)),
    };
    vec![part[start..start + len].to_string(), longer]
}

/// Ops that only appear after decomposition (`exp`) or not at all (`matmul`) are not in the
/// captured graph, nor are parts of its op names or longer names holding them ([`near_misses`]),
/// so the backend compiles it and it runs like eager.
pub fn allows_graphs_without_denied_ops(ctx: &Context) -> CheckResult {
    let (mlp, x) = (Mlp::new(ctx.seed), example_input(3, ctx.seed + 1));
    let (graph, _) = capture(&mlp, &x)?;
    let mut denied = vec!["exp".to_string(), "matmul".to_string()];
    denied.extend(near_misses(&graph, ctx.seed));
    let names: Vec<&str> = denied.iter().map(String::as_str).collect();
    record("the ops denied", format!("{names:?}"));
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(DenyOps::new(&names));
    let what = format!("the MLP's output with DenyOps::new(&{names:?}) (a name is denied whole, not as part of another)");
    assert_close(&what, &compiled.call(&x)?, &mlp.forward(&x)?, Tolerance::EXACT)?;
    Ok(format!(
        "denying {names:?} leaves the captured MLP graph alone: softmax and linear are not decomposed yet, and a \
         name is not part of another"
    ))
}
