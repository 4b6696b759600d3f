//! Phase 3 (graph breaks): everything the grader knows about the phase, in one place.
//!
//! The checks themselves are in `src/checks/`, compiled into two runner binaries,
//! `phase3-exercises` and `phase3-solutions`, that differ only in the crate they test (`subject`).
//! See the grader's crate documentation for how to add a phase.

use grader_harness::{CheckSpec, Exercise, Phase};

/// Phase 3: four models that break their graphs, fixed; and what a break costs.
pub const PHASE: Phase = Phase {
    name: "phase3",
    title: "Graph breaks",
    exercises_dir: "exercises/phase3-graph-breaks",
    solutions_dir: "solutions/phase3-graph-breaks",
    runner_package: "checks-phase3",
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
            checks: &[CheckSpec::new("gated_is_one_graph"), CheckSpec::new("gated_matches_the_original")],
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
            checks: &[
                CheckSpec::new("normalized_is_one_graph"),
                CheckSpec::new("still_logs_when_eager"),
                CheckSpec::new("normalized_matches_the_original"),
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
            checks: &[
                CheckSpec::new("standardized_is_one_graph"),
                CheckSpec::new("standardized_matches_the_original"),
                CheckSpec::new("no_recompile_for_new_values"),
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
            checks: &[
                CheckSpec::new("the_kernel_computes_log_clip"),
                CheckSpec::new("clipped_is_one_graph_with_the_op"),
                CheckSpec::new("clipped_matches_the_original"),
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
            checks: &[CheckSpec::new("counts_the_graphs"), CheckSpec::new("times_are_medians_of_real_calls")],
            forbidden: &[],
        },
    ],
};
