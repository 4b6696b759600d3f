//! Checks of `branch`: one graph, `fullgraph(true)` compiles, and the outputs of the original on
//! inputs that take each side of its branch.

use engine::Tensor;
use grader_harness::{CheckResult, Context, Tolerance, ensure, for_all};

use proptest::strategy::Strategy as _;

use super::support::{Input, matches_original, one_graph};
use crate::subject::models::gated_original;
use crate::subject::{Model, example_input, gated};

/// A model whose branch goes the way `positive` says for every input: its bias is shifted far
/// enough that the layer's total has that sign.
fn biased(seed: u64, positive: bool) -> Model {
    let model = Model::new(seed);
    let shift = if positive { 4.0 } else { -4.0 };
    Model { bias: model.bias.add(shift).unwrap().with_name("bias"), ..model }
}

/// `gated` captures into one graph, for each side of the branch.
pub fn gated_is_one_graph(ctx: &Context) -> CheckResult {
    for positive in [true, false] {
        let model = biased(ctx.seed, positive);
        one_graph("gated", |x: Tensor| gated(&model, &x), &example_input(3, ctx.seed))?;
    }
    Ok("one graph, no break, whichever side the input takes".into())
}

/// One random case: an input, and which side of the branch the model's bias sends it to.
#[derive(Clone, Debug)]
struct Case {
    input: Input,
    positive_side: bool,
}

/// Compiled with `fullgraph(true)`, `gated` gives the original's outputs on random inputs that
/// take both sides of the branch.
pub fn gated_matches_the_original(ctx: &Context) -> CheckResult {
    let cases = 24;
    let strategy =
        (Input::strategy(), proptest::bool::ANY).prop_map(|(input, positive_side)| Case { input, positive_side });
    for_all(ctx, cases, strategy, |Case { input: Input { seed, rows }, positive_side: positive }| {
        let model = biased(seed, positive);
        let x = example_input(rows, seed + 1);
        let side = x.linear(&model.w, Some(&model.bias))?.sum_all()?.item()? > 0.0;
        ensure(side == positive, || "the grader's input did not take the side it meant to".into())?;
        matches_original("gated", |x: Tensor| gated(&model, &x), |x| gated_original(&model, x), &x, Tolerance::F32)
    })?;
    Ok(format!("{cases} random inputs, both sides of the branch: the original's outputs, in one graph"))
}
