//! A place to try your phase 3 functions by hand: `cargo run -p phase3-graph-breaks --example
//! phase3-scratch`. It runs each of your versions beside the original model and prints how many graphs
//! and breaks each makes and whether the outputs agree, and schedules the program of the book's
//! `schedule` picture both ways. A function that is still `todo!()` prints
//! one line saying so, and the others still run. Edit freely: the grader never reads this file.

use engine::{Result, Tensor, dynamo};
use phase3_graph_breaks::models::{clipped_original, gated_original, normalized_original, standardized_original};
use phase3_graph_breaks::{
    Kind, Logger, Model, Program, Step, clipped, example_input, fewest_graphs, gated, in_program_order, layered,
    log_clip_op, measure_break_cost, normalized, standardized,
};

#[path = "../../show.rs"]
mod show;
use show::{quiet_panics, show, show_text};

/// Graphs, breaks and the largest difference from the original's output, for one fix.
fn compare(
    x: &Tensor,
    original: impl Fn(Tensor) -> Result<Tensor>,
    yours: impl Fn(Tensor) -> Result<Tensor>,
) -> Result<String> {
    let before = dynamo::explain(original).call(x)?;
    let after = dynamo::explain(yours).call(x)?;
    let (a, b) = (before.outputs[0].to_vec()?, after.outputs[0].to_vec()?);
    let diff = a.iter().zip(&b).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    Ok(format!(
        "original: {} graphs, {} breaks; yours: {} graphs, {} breaks; largest difference {diff}",
        before.graphs.len(),
        before.breaks.len(),
        after.graphs.len(),
        after.breaks.len()
    ))
}

/// The program of the book's picture (`book/src/images/schedule-two-ways.svg`): `a = x @ w;
/// s = a.sum().item(); b = x.relu(); print(b); c = a * s; d = b + 1; return c, d`.
fn pictured_program() -> Program {
    let step = |name: &str, kind, reads: &[usize]| Step { name: name.into(), kind, reads: reads.to_vec() };
    Program {
        steps: vec![
            step("x", Kind::Input, &[]),
            step("w", Kind::Input, &[]),
            step("a", Kind::Op, &[0, 1]),
            step("s", Kind::Host, &[2]),
            step("b", Kind::Op, &[0]),
            step("print", Kind::Print, &[4]),
            step("c", Kind::Op, &[2, 3]),
            step("d", Kind::Op, &[4]),
        ],
        outputs: vec![6, 7],
    }
}

fn main() {
    quiet_panics();
    let model = Model::new(0);
    let x = example_input(4, 1);
    show_text("gated", || compare(&x, |x| gated_original(&model, &x), |x| gated(&model, &x)));
    show_text("normalized", || {
        let logger = Logger::new();
        compare(&x, |x| normalized_original(&x, &logger), |x| normalized(&x, &logger))
    });
    show_text("standardized", || compare(&x, |x| standardized_original(&x), |x| standardized(&x)));
    show_text("clipped", || {
        let op = log_clip_op()?;
        compare(&x, |x| clipped_original(&x), |x| clipped(&x, &op))
    });
    show("measure_break_cost (layered: 8 layers whole, then split by 7 breaks; 50 calls)", || {
        measure_break_cost(|x| layered(&x, 8, 0), |x| layered(&x, 8, 7), &x, 50)
    });
    let program = pictured_program();
    show("in_program_order (the book's picture: 3 graphs)", || Ok(in_program_order(&program)));
    show("fewest_graphs (the book's picture: 2 graphs)", || Ok(fewest_graphs(&program)));
}
