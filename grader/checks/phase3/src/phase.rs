//! Phase 3 (graph breaks): everything the grader knows about the phase, declared once (see
//! `grader_harness::declare`): its exercises, their hints and book sections, the checks grading
//! each one, named by their functions in `src/checks/`, and the mistakes those checks must catch.

use grader_harness::{Exercise, Mutant, Phase};

/// Phase 3: four models that break their graphs, fixed; and what a break costs.
pub const PHASE: Phase = Phase {
    name: "phase3",
    title: "Graph breaks",
    exercises_dir: "exercises/phase3-graph-breaks",
    solutions_dir: "solutions/phase3-graph-breaks",
    runner_package: env!("CARGO_PKG_NAME"),
    book_page: "book/src/phase3/exercises.md",
    exercises: &[
        Exercise {
            name: "branch",
            file: "src/branch.rs",
            section: "branch",
            stretch: false,
            hints: &[
                "Run `dynamo::explain(|x: Tensor| gated_original(&m, &x)).call(&x)?` and print it: the break is at \
                 `item()`, which turns the layer's total into an `f32` for the `if`. Keep the condition a tensor \
                 instead: `h.sum_all()?.gt(0.0)?` is 1.0 or 0.0.",
                "With `where_`, compute both sides and let the condition pick: `cond.where_(&h.relu()?, \
                 &h.neg()?.sigmoid()?)` (a one-element condition broadcasts over the whole tensor).",
                "With `cond`, give each side as a closure over the operands: `dynamo::cond(&positive, |hs| \
                 hs[0].relu(), |hs| hs[0].neg()?.sigmoid(), &[&h])`. Both branches are traced into subgraphs of \
                 the one graph.",
            ],
            checks: crate::checks![branch::gated_is_one_graph, branch::gated_matches_the_original],
            forbidden: &[],
        },
        Exercise {
            name: "logging",
            file: "src/logging.rs",
            section: "logging",
            stretch: false,
            hints: &[
                "`Logger::log` prints with `engine::println!`, a side effect a graph cannot hold: each call is a \
                 graph break. The checks still want the lines when the function runs eagerly, so do not delete them.",
                "`dynamo::is_compiling()` is true while a compiled function is being traced: wrap each `logger.log(\
                 ...)` in `if !dynamo::is_compiling() { ... }`.",
            ],
            checks: crate::checks![
                logging::normalized_is_one_graph,
                logging::still_logs_when_eager,
                logging::normalized_matches_the_original,
            ],
            forbidden: &[],
        },
        Exercise {
            name: "round_trip",
            file: "src/round_trip.rs",
            section: "round_trip",
            stretch: false,
            hints: &[
                "`to_vec()` needs the values, so the graph so far must run: a break. And the mean and variance then \
                 enter the next graph as constants, so every new input recompiles it (try ENGINE_LOGS=recompiles).",
                "Keep the statistics as tensors: `h.sum_all()?` is a 0-d tensor, and `.div(n)?` with `n = \
                 h.numel() as f32` makes it the mean. A 0-d tensor broadcasts against `h` in `sub` and `div`.",
                "The variance is the mean of `centered * centered`, where `centered = h.sub(&mean)?`; finish with \
                 `centered.div(&var.add(1e-5)?.sqrt()?)`.",
            ],
            checks: crate::checks![
                round_trip::standardized_is_one_graph,
                round_trip::standardized_matches_the_original,
                round_trip::no_recompile_for_new_values,
            ],
            forbidden: &[],
        },
        Exercise {
            name: "custom_op",
            file: "src/custom_op.rs",
            section: "custom_op",
            stretch: false,
            hints: &[
                "`CustomOp::elementwise(\"phase3::log_clip\", 1).c_source(SOURCE).register()` compiles SOURCE with the \
                 system C compiler. SOURCE must define `float log_clip(float x)` computing what the Rust `log_clip` \
                 does; `math.h` is included for you (`fabsf`, `logf`, `copysignf`).",
                "In C: `float a = fabsf(x); return a <= 1.0f ? x : copysignf(1.0f + logf(a), x);`. Add the same \
                 function as `__device__ float log_clip(float x)` with `.cuda_source(...)` for GPUs.",
                "`clipped` is `clipped_original` with `h.map_host(\"log_clip\", log_clip)?` replaced by \
                 `op.call(&[&h])?`.",
            ],
            checks: crate::checks![
                custom_op::the_kernel_computes_log_clip,
                custom_op::clipped_is_one_graph_with_the_op,
                custom_op::clipped_matches_the_original,
            ],
            forbidden: &[],
        },
        Exercise {
            name: "break_cost",
            file: "src/break_cost.rs",
            section: "break_cost",
            stretch: true,
            hints: &[
                "Count graphs with `dynamo::explain(&whole).call(x)?.graph_count()` (a reference to a closure is a \
                 closure too), then compile each: `let whole = dynamo::compile(&whole);`.",
                "Time one call with `let start = Instant::now(); f.call(x)?; start.elapsed()`. In each of `calls` \
                 rounds time one call of each version, pushing into two Vecs; the median is the middle element \
                 of a sorted Vec (`samples[samples.len() / 2]`).",
            ],
            checks: crate::checks![break_cost::counts_the_graphs, break_cost::times_are_medians_of_real_calls],
            forbidden: &[],
        },
    ],
    mutants: MUTANTS,
};

/// Deliberately wrong variants of the solutions, and the checks that catch each one.
const MUTANTS: &[Mutant] = &[
    Mutant::new(
        "gated runs the true branch on both sides",
        "src/branch.rs",
        "|hs| hs[0].neg()?.sigmoid()",
        "|hs| hs[0].relu()",
    )
    .fails(crate::check_ids![branch::gated_matches_the_original]),
    Mutant::new(
        "gated branches on the wrong sign",
        "src/branch.rs",
        ".gt(0.0)?",
        ".lt(0.0)?",
    )
    .fails(crate::check_ids![branch::gated_matches_the_original]),
    Mutant::new(
        "normalized drops a log line",
        "src/logging.rs",
        "    if !dynamo::is_compiling() {\n        logger.log(format!(\"tanh done, shape {:?}\", h.shape()))?;\n    }\n",
        "",
    )
    .fails(crate::check_ids![logging::still_logs_when_eager]),
    Mutant::new(
        "normalized logs while compiling",
        "src/logging.rs",
        "if !dynamo::is_compiling() {\n        logger.log(format!(\"tanh",
        "if true {\n        logger.log(format!(\"tanh",
    )
    .fails(crate::check_ids![logging::normalized_is_one_graph, logging::normalized_matches_the_original]),
    Mutant::new(
        "normalized takes its softmax over the rows",
        "src/logging.rs",
        "let out = h.softmax(-1)?;",
        "let out = h.softmax(0)?;",
    )
    .fails(crate::check_ids![logging::normalized_matches_the_original]),
    Mutant::new(
        "standardized takes the variance of the uncentered values",
        "src/round_trip.rs",
        "let var = centered.mul(&centered)?",
        "let var = h.mul(&h)?",
    )
    .fails(crate::check_ids![round_trip::standardized_matches_the_original]),
    Mutant::new(
        "standardized computes the mean on the host",
        "src/round_trip.rs",
        "let mean = h.sum_all()?.div(n)?;",
        "let mean = Tensor::scalar(h.sum_all()?.item()? / n);",
    )
    .fails(crate::check_ids![round_trip::standardized_is_one_graph, round_trip::standardized_matches_the_original, round_trip::no_recompile_for_new_values]),
    Mutant::new(
        "clipped keeps the host function",
        "src/custom_op.rs",
        "op.call(&[&h])?.add(x)",
        r#"h.map_host("log_clip", crate::models::log_clip)?.add(x)"#,
    )
    .fails(crate::check_ids![custom_op::clipped_is_one_graph_with_the_op, custom_op::clipped_matches_the_original]),
    Mutant::new(
        "the kernel forgets the sign",
        "src/custom_op.rs",
        "copysignf(1.0f + logf(a), x)",
        "(1.0f + logf(a))",
    )
    .fails(crate::check_ids![custom_op::the_kernel_computes_log_clip, custom_op::clipped_matches_the_original]),
    Mutant::new(
        "break_cost times the whole version twice",
        "src/break_cost.rs",
        "split_samples.push(time(&|| split.call(x))?);",
        "split_samples.push(time(&|| whole.call(x))?);",
    )
    .fails(crate::check_ids![break_cost::times_are_medians_of_real_calls]),
    Mutant::new(
        "break_cost counts the whole version's graphs twice",
        "src/break_cost.rs",
        "let graphs_split = dynamo::explain(&split)",
        "let graphs_split = dynamo::explain(&whole)",
    )
    .fails(crate::check_ids![break_cost::counts_the_graphs]),
];
