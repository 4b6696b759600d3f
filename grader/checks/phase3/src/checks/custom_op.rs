//! Checks of `custom_op`: the registered kernel computes `log_clip`, and `clipped` is one graph
//! holding it, with the original's outputs.

use engine::Tensor;
use engine::op::{CustomOp, Op};
use grader_harness::{CheckResult, Context, Failure, Tolerance, assert_close, ensure, for_all, record};
use proptest::prelude::*;

use super::support::{Input, matches_original, one_graph};
use crate::subject::models::clipped_original;
use crate::subject::{clipped, example_input, log_clip, log_clip_op};

/// The op is called `phase3::log_clip`, takes one input, and its kernel computes `log_clip` on
/// values on both sides of ±1.
pub fn the_kernel_computes_log_clip(ctx: &Context) -> CheckResult {
    let op = log_clip_op()?;
    record("the registered op's name and arity", format!("{} {}", op.name(), op.arity()));
    ensure(op.name() == "phase3::log_clip" && op.arity() == 1, || {
        format!("registered `{}` with {} input(s); expected `phase3::log_clip` with 1", op.name(), op.arity())
    })?;
    let cases = 16;
    for_all(ctx, cases, prop::collection::vec(-20.0f32..20.0, 1..200), |values| {
        let x = Tensor::from_vec(values.clone(), &[values.len()])?;
        let expected = Tensor::from_vec(values.iter().map(|&v| log_clip(v)).collect(), &[values.len()])?;
        assert_close("your kernel's output", &op.call(&[&x])?, &expected, Tolerance::F32)
    })?;
    Ok(format!("the C kernel of `{}` agrees with log_clip on {cases} random vectors", op.name()))
}

/// What the CUDA source is compiled with on the CPU: CUDA's qualifiers and fast-math intrinsics
/// defined as C has them, so that an element function written for a GPU runs as C.
const CUDA_AS_C: &str = "#define __device__\n#define __forceinline__ inline\n#define __host__\n\
                         #define __logf logf\n#define __expf expf\n#define __fdividef(a, b) ((a) / (b))\n";

/// The op carries CUDA source too (without it, a GPU could not run the op: a mistake a CPU never
/// shows), and that source computes `log_clip`: the check compiles it as C on any machine, CUDA's
/// qualifiers defined away, and runs it on values on both sides of ±1.
pub fn the_cuda_source_computes_log_clip(ctx: &Context) -> CheckResult {
    let op = log_clip_op()?;
    let has_cuda = op.cuda_source().is_some();
    record("the op has CUDA source", has_cuda);
    let Some(source) = op.cuda_source() else {
        return Err(Failure::fail(format!(
            "`{}` has no CUDA source, so a GPU cannot run it: give the same function as a `__device__ float {}(float x)` \
             with `.cuda_source(...)`",
            op.name(),
            op.function()
        )));
    };
    let as_c = CustomOp::elementwise(&format!("phase3_cuda_as_c::{}", op.function()), 1)
        .c_source(&format!("{CUDA_AS_C}{source}"))
        .register()
        .map_err(|e| {
            Failure::fail(format!(
                "your CUDA source, compiled as C with CUDA's qualifiers defined away, does not compile: {e}"
            ))
        })?;
    let cases = 16;
    for_all(ctx, cases, prop::collection::vec(-20.0f32..20.0, 1..200), |values| {
        let x = Tensor::from_vec(values.clone(), &[values.len()])?;
        let expected = Tensor::from_vec(values.iter().map(|&v| log_clip(v)).collect(), &[values.len()])?;
        assert_close("your CUDA function's output (run as C)", &as_c.call(&[&x])?, &expected, Tolerance::F32)
    })?;
    Ok(format!("the CUDA source of `{}` agrees with log_clip on {cases} random vectors, run as C", op.name()))
}

/// `clipped` captures into one graph, and that graph calls the custom op.
pub fn clipped_is_one_graph_with_the_op(ctx: &Context) -> CheckResult {
    let op = log_clip_op()?;
    let report = one_graph("clipped", |x: Tensor| clipped(&x, &op), &example_input(3, ctx.seed))?;
    let graph = &report.graphs[0];
    let custom = graph.nodes().iter().any(|n| matches!(n.op(), Some(Op::Custom(c)) if c.name() == op.name()));
    record("the graph calls the custom op", custom);
    if !custom {
        return Err(Failure::fail(format!("the graph does not call `{}`:\n{graph}", op.name())));
    }
    Ok(format!("one graph, no break, with a `{}` node", op.name()))
}

/// Compiled with `fullgraph(true)`, the original's outputs on random inputs.
pub fn clipped_matches_the_original(ctx: &Context) -> CheckResult {
    let op = log_clip_op()?;
    let cases = 16;
    for_all(ctx, cases, Input::strategy(), |Input { seed, rows }| {
        let x = example_input(rows, seed);
        matches_original("clipped", |x: Tensor| clipped(&x, &op), clipped_original, &x, Tolerance::F32)
    })?;
    Ok(format!("{cases} random inputs: the original's outputs, in one graph"))
}
