//! Checks of the stretch exercise `deny_ops`.

use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, Tolerance, assert_close, ensure, record};

use super::support::capture;
use crate::subject::{DenyOps, Mlp, example_input};

/// Denying one of the MLP's ops (which one is drawn from the seed) fails the compile with an
/// error naming the op and its source line.
pub fn refuses_a_denied_op(ctx: &Context) -> CheckResult {
    let (mlp, x) = (Mlp::new(ctx.seed), example_input(2, ctx.seed + 1));
    let (graph, _) = capture(&mlp, &x)?;
    let calls: Vec<_> = graph.nodes().iter().filter(|n| n.op().is_some()).collect();
    let denied = calls[(ctx.seed % calls.len() as u64) as usize].op().expect("filtered to calls").name();
    // The first node calling it is the one a backend refuses.
    let first = calls.iter().find(|n| n.op().is_some_and(|op| op.name() == denied)).expect("found above");
    let line = first.location.expect("call nodes have locations").short();
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(DenyOps::new(&[denied]));
    let result = compiled.call(&x);
    let names = result.as_ref().err().map(|e| e.to_string()).is_some_and(|m| m.contains(denied) && m.contains(&line));
    record(format!("refused `{denied}`, naming the op and its line"), format!("{} {names}", result.is_err()));
    match result {
        Ok(_) => Err(Failure::fail(format!(
            "with DenyOps::new(&[\"{denied}\"]) the MLP (which calls {denied} at {line}) compiled and ran; expected an \
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

/// Ops that only appear after decomposition (`exp`) or not at all (`matmul`) are not in the
/// captured graph, so the backend compiles it and it runs like eager.
pub fn allows_graphs_without_denied_ops(ctx: &Context) -> CheckResult {
    let (mlp, x) = (Mlp::new(ctx.seed), example_input(3, ctx.seed + 1));
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(DenyOps::new(&["exp", "matmul"]));
    let what = "the MLP's output with DenyOps::new(&[\"exp\", \"matmul\"])";
    assert_close(what, &compiled.call(&x)?, &mlp.forward(&x)?, Tolerance::EXACT)?;
    Ok("denying exp and matmul leaves the captured MLP graph alone: softmax and linear are not decomposed yet".into())
}
