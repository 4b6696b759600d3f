//! Checks of the stretch exercise `deny_ops`.

use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Failure, Tolerance, assert_close, ensure, record};

use super::support::capture;
use crate::subject::{DenyOps, Mlp, example_input};

/// Denying `softmax` fails the compile with an error naming the op and its source line.
pub fn refuses_a_denied_op(ctx: &Context) -> CheckResult {
    let (mlp, x) = (Mlp::new(ctx.seed), example_input(2, ctx.seed + 1));
    let (graph, _) = capture(&mlp, &x)?;
    let softmax = graph
        .nodes()
        .iter()
        .find(|n| n.op().is_some_and(|op| op.name() == "softmax"))
        .expect("the MLP ends in softmax");
    let line = softmax.location.expect("call nodes have locations").short();
    let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(DenyOps::new(&["softmax"]));
    let result = compiled.call(&x);
    let names =
        result.as_ref().err().map(|e| e.to_string()).is_some_and(|m| m.contains("softmax") && m.contains(&line));
    record("refused, naming the op and its line", format!("{} {names}", result.is_err()));
    match result {
        Ok(_) => Err(Failure::fail(
            "with DenyOps::new(&[\"softmax\"]) the MLP (which ends in softmax) compiled and ran; expected an error",
        )),
        Err(error) => {
            let message = error.to_string();
            ensure(message.contains("softmax") && message.contains(&line), || {
                format!("the error should name the op `softmax` and its line `{line}`; it reads: {message}")
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
