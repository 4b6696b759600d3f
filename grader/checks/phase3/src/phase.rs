//! Phase 3 (graph breaks): everything the grader knows about the phase, declared once (see
//! `grader_harness::declare`): its exercises, their hints and book sections, the checks grading
//! each one, named by their functions in `src/checks/`, and the mistakes those checks must catch.

use grader_harness::{Exercise, Forbidden, Mutant, Phase};

/// The regional checks compile twelve blocks (and the whole stack) with the system C compiler, in
/// the grader's debug build: more than the default time.
const REGIONAL: u64 = 300;

/// Phase 3: four models that break their graphs, fixed; what a break costs; and how few graphs a
/// program that has to stop on the host needs.
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
                custom_op::the_cuda_source_computes_log_clip,
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
                "Before timing anything, call each compiled version once, untimed: that call compiles. Then, in each \
                 of `calls` rounds, time one call of each version, so that the two take turns.",
                "A call's time ends only once its output's values are read: `let start = Instant::now(); \
                 f.call(x)?.to_vec()?; start.elapsed()`. Do the same in the untimed calls, so that no work they \
                 queued spills into the first timed one. The median is `samples[samples.len() / 2]` of a sorted Vec.",
            ],
            checks: crate::checks![break_cost::counts_the_graphs, break_cost::times_are_medians_of_real_calls],
            forbidden: &[],
        },
        Exercise {
            name: "regional",
            file: "src/regional.rs",
            section: "regional",
            stretch: true,
            hints: &[
                "One `dynamo::compile` in `new`, kept in the struct; `forward` calls it once per block. A closure \
                 that captures a block's weights serves that block only: give the weights to the compiled function \
                 as arguments instead, after the input (`Vec<Tensor>` in, `Tensor` out).",
                "`block.parameters()` lists a block's 16 weights; `Block::from_parameters(shape, &args[1..])` builds \
                 a block back from them inside the compiled function, whose `naive_forward(&args[0])` is the block.",
                "The field's type names the closure's: `Compiled<Vec<Tensor>, Tensor, BlockFn>`, with the closure \
                 boxed (`let f: BlockFn = Box::new(move |args: Vec<Tensor>| ...)`). Leave dynamic sizes as they are: \
                 the second length makes the length a symbol.",
            ],
            checks: crate::checks![
                regional::regional_matches_the_stack.with_timeout(REGIONAL),
                regional::one_compile_serves_every_block.with_timeout(REGIONAL),
                regional::new_lengths_recompile_only_the_region.with_timeout(REGIONAL),
                regional::regional_compiles_less_and_runs_as_fast.with_timeout(REGIONAL).timed(),
            ],
            forbidden: &[Forbidden {
                path: "compile_region",
                everywhere: false,
                why: "this exercise asks you to build regional compilation from `dynamo::compile` yourself",
            }],
        },
        Exercise {
            name: "schedule",
            file: "src/schedule.rs",
            section: "schedule",
            stretch: false,
            hints: &[
                "`in_program_order` first: walk the steps once, filling either a graph or a host stage; a step of \
                 the other class closes the open one (inputs close nothing). Fill the outputs afterwards: an op of \
                 a graph is handed over when a step of another stage reads it or the program returns it.",
                "For `fewest_graphs`, forget program order and ask, for each step in turn, for the earliest stage it \
                 can run in. What it reads bounds it, and so does the side effect before it, for a side effect. \
                 Which of those bounds cost a new graph? Only a host value read by an op: an op reading ops, and a \
                 host step reading anything, can run in the stage of what it reads, or right after it.",
                "Number the stages in one sequence: host stage 0, graph 1, host stage 1, graph 2, ... as times 0, 1, \
                 2, 3, ...: an op takes the first odd time at or after the latest time it must follow, any other \
                 step the first even one. Group the steps by time, leave out the empty times, and hand over what is \
                 live. Why is no schedule shorter? Follow back the chain of steps that put the last graph's op \
                 there.",
            ],
            checks: crate::checks![
                schedule::follows_program_order.without_gpu(),
                schedule::fewest_graphs_of_random_programs.without_gpu(),
                schedule::fewest_graphs_of_telling_programs.without_gpu(),
            ],
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
    .fails(crate::check_ids![branch::gated_matches_the_original, branch::gated_is_one_graph]),
    Mutant::new(
        "gated branches on the wrong sign",
        "src/branch.rs",
        ".gt(0.0)?",
        ".lt(0.0)?",
    )
    .fails(crate::check_ids![branch::gated_matches_the_original, branch::gated_is_one_graph]),
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
    .fails(crate::check_ids![logging::normalized_matches_the_original, logging::normalized_is_one_graph, logging::still_logs_when_eager]),
    Mutant::new(
        "standardized takes the variance of the uncentered values",
        "src/round_trip.rs",
        "let var = centered.mul(&centered)?",
        "let var = h.mul(&h)?",
    )
    .fails(crate::check_ids![round_trip::standardized_matches_the_original, round_trip::standardized_is_one_graph, round_trip::no_recompile_for_new_values]),
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
        "log_clip_op gives no CUDA source",
        "src/custom_op.rs",
        "        .cuda_source(&format!(\"__device__ float log_clip(float x) {body}\"))\n",
        "",
    )
    .fails(crate::check_ids![custom_op::the_cuda_source_computes_log_clip]),
    Mutant::new(
        "the CUDA function clips at 2",
        "src/custom_op.rs",
        ".cuda_source(&format!(\"__device__ float log_clip(float x) {body}\"))",
        ".cuda_source(\"__device__ float log_clip(float x) { float a = fabsf(x); return a <= 2.0f ? x : copysignf(2.0f + logf(a / 2.0f), x); }\")",
    )
    .fails(crate::check_ids![custom_op::the_cuda_source_computes_log_clip]),
    Mutant::new(
        "the kernel forgets the sign",
        "src/custom_op.rs",
        "copysignf(1.0f + logf(a), x)",
        "(1.0f + logf(a))",
    )
    .fails(crate::check_ids![custom_op::the_kernel_computes_log_clip, custom_op::the_cuda_source_computes_log_clip, custom_op::clipped_matches_the_original, custom_op::clipped_is_one_graph_with_the_op]),
    Mutant::new(
        "break_cost times the whole version twice",
        "src/break_cost.rs",
        "split_samples.push(time(&|| split.call(x))?);",
        "split_samples.push(time(&|| whole.call(x))?);",
    )
    .fails(crate::check_ids![break_cost::times_are_medians_of_real_calls]),
    Mutant::new(
        "break_cost times the call that compiles",
        "src/break_cost.rs",
        "    whole.call(x)?.to_vec()?;\n    split.call(x)?.to_vec()?;\n",
        "",
    )
    .fails(crate::check_ids![break_cost::times_are_medians_of_real_calls]),
    Mutant::new(
        "break_cost times one version's calls, then the other's",
        "src/break_cost.rs",
        "    for _ in 0..calls {\n        whole_samples.push(time(&|| whole.call(x))?);\n        split_samples.push(time(&|| split.call(x))?);\n    }",
        "    for _ in 0..calls {\n        whole_samples.push(time(&|| whole.call(x))?);\n    }\n    for _ in 0..calls {\n        split_samples.push(time(&|| split.call(x))?);\n    }",
    )
    .fails(crate::check_ids![break_cost::times_are_medians_of_real_calls]),
    Mutant::new(
        "break_cost stops the clock before the output is read",
        "src/break_cost.rs",
        "        f()?.to_vec()?;\n        Ok(start.elapsed())",
        "        let output = f()?;\n        let elapsed = start.elapsed();\n        output.to_vec()?;\n        Ok(elapsed)",
    )
    .fails(crate::check_ids![break_cost::times_are_medians_of_real_calls]),
    Mutant::new(
        "break_cost counts the whole version's graphs twice",
        "src/break_cost.rs",
        "let graphs_split = dynamo::explain(&split)",
        "let graphs_split = dynamo::explain(&whole)",
    )
    // The whole version then runs once more, and the split one once less, than the check counts.
    .fails(crate::check_ids![break_cost::counts_the_graphs, break_cost::times_are_medians_of_real_calls]),
    Mutant::new(
        "regional compiles a function per block",
        "src/regional.rs",
        "h = self.region.call(&args)?;",
        "h = RegionalStack::new(block.shape).region.call(&args)?;",
    )
    .fails(crate::check_ids![regional::one_compile_serves_every_block, regional::new_lengths_recompile_only_the_region])
    .may_fail(crate::check_ids![regional::regional_compiles_less_and_runs_as_fast]),
    Mutant::new(
        "regional runs every block with the first block's weights",
        "src/regional.rs",
        "args.extend(block.parameters());",
        "args.extend(stack.blocks[0].parameters());",
    )
    // Every regional check records the outputs it judges.
    .fails(crate::check_ids![
        regional::regional_matches_the_stack,
        regional::one_compile_serves_every_block,
        regional::new_lengths_recompile_only_the_region,
        regional::regional_compiles_less_and_runs_as_fast,
    ]),
    Mutant::new(
        "regional turns dynamic sizes off",
        "src/regional.rs",
        "dynamo::compile(block).name(\"block region\")",
        "dynamo::compile(block).name(\"block region\").dynamic(false)",
    )
    .fails(crate::check_ids![regional::new_lengths_recompile_only_the_region]),
    Mutant::new(
        "regional runs the blocks eagerly",
        "src/regional.rs",
        "h = self.region.call(&args)?;",
        "h = block.naive_forward(&args[0])?;",
    )
    .fails(crate::check_ids![regional::one_compile_serves_every_block, regional::new_lengths_recompile_only_the_region])
    .may_fail(crate::check_ids![regional::regional_compiles_less_and_runs_as_fast]),
    Mutant::new(
        "regional throws the compiled output away and runs each block eagerly",
        "src/regional.rs",
        "h = self.region.call(&args)?;",
        "self.region.call(&args)?;\n            h = block.naive_forward(&args[0])?;",
    )
    .fails(crate::check_ids![regional::regional_compiles_less_and_runs_as_fast]),
    Mutant::new(
        "in_program_order leaves an empty graph where a host step follows another",
        "src/schedule.rs",
        "                if !graph.is_empty() {\n                    stages.push(Stage::Graph { steps: std::mem::take(&mut graph), outputs: Vec::new() });",
        "                if !host.is_empty() || !graph.is_empty() {\n                    stages.push(Stage::Graph { steps: std::mem::take(&mut graph), outputs: Vec::new() });",
    )
    .fails(crate::check_ids![schedule::follows_program_order]),
    Mutant::new(
        "in_program_order merges host steps across a graph",
        "src/schedule.rs",
        "                if !host.is_empty() {\n                    stages.push(Stage::Host { steps: std::mem::take(&mut host) });\n                }\n",
        "",
    )
    .fails(crate::check_ids![schedule::follows_program_order]),
    Mutant::new(
        "a graph's outputs are listed as they are first read, not sorted",
        "src/schedule.rs",
        "            outputs.sort_unstable();\n",
        "",
    )
    .fails(crate::check_ids![schedule::follows_program_order])
    // Unsorted outputs follow the rules, unless one is listed twice.
    .may_fail(crate::check_ids![schedule::fewest_graphs_of_random_programs, schedule::fewest_graphs_of_telling_programs]),
    Mutant::new(
        "a graph hands over the values its own steps read",
        "src/schedule.rs",
        "&& reader.is_none_or(|i| stage_of[i] != Some(s))",
        "",
    )
    .fails(crate::check_ids![
        schedule::follows_program_order,
        schedule::fewest_graphs_of_random_programs,
        schedule::fewest_graphs_of_telling_programs,
    ]),
    Mutant::new(
        "a graph hands over every value it computes",
        "src/schedule.rs",
        "        if let Stage::Graph { outputs, .. } = stage {\n            outputs.sort_unstable();",
        "        if let Stage::Graph { steps, outputs } = stage {\n            *outputs = steps.clone();",
    )
    .fails(crate::check_ids![
        schedule::follows_program_order,
        schedule::fewest_graphs_of_random_programs,
        schedule::fewest_graphs_of_telling_programs,
    ]),
    Mutant::new(
        "a graph forgets the values the program returns",
        "src/schedule.rs",
        "for (value, reader) in reads.chain(returned) {",
        "for (value, reader) in reads.chain(returned.filter(|_| false)) {",
    )
    .fails(crate::check_ids![
        schedule::follows_program_order,
        schedule::fewest_graphs_of_random_programs,
        schedule::fewest_graphs_of_telling_programs,
    ]),
    Mutant::new(
        "fewest_graphs keeps program order",
        "src/schedule.rs",
        FEWEST,
        "    // ANCHOR: solution\n    return in_program_order(program);\n    // The earliest stage",
    )
    .fails(crate::check_ids![schedule::fewest_graphs_of_random_programs, schedule::fewest_graphs_of_telling_programs]),
    Mutant::new(
        "fewest_graphs moves side effects as freely as pure steps",
        "src/schedule.rs",
        "let ordered = step.kind.is_side_effect();",
        "let ordered = false;",
    )
    .fails(crate::check_ids![schedule::fewest_graphs_of_random_programs, schedule::fewest_graphs_of_telling_programs]),
    Mutant::new(
        "fewest_graphs keeps the effects in order, but lets prints move",
        "src/schedule.rs",
        "let ordered = step.kind.is_side_effect();",
        "let ordered = step.kind == Kind::Effect;",
    )
    .fails(crate::check_ids![schedule::fewest_graphs_of_telling_programs])
    .may_fail(crate::check_ids![schedule::fewest_graphs_of_random_programs]),
    Mutant::new(
        "fewest_graphs keeps the prints in order, but lets effects move",
        "src/schedule.rs",
        "let ordered = step.kind.is_side_effect();",
        "let ordered = step.kind == Kind::Print;",
    )
    .fails(crate::check_ids![schedule::fewest_graphs_of_telling_programs])
    .may_fail(crate::check_ids![schedule::fewest_graphs_of_random_programs]),
    Mutant::new(
        "fewest_graphs puts a host step in the stage of the graph that computes what it reads",
        "src/schedule.rs",
        "Kind::Host | Kind::Print | Kind::Effect => ready.next_multiple_of(2),",
        "Kind::Host | Kind::Print | Kind::Effect => ready,",
    )
    .fails(crate::check_ids![schedule::fewest_graphs_of_random_programs, schedule::fewest_graphs_of_telling_programs]),
    Mutant::new(
        "fewest_graphs puts an op reading a host value in the graph before it",
        "src/schedule.rs",
        "Kind::Op => ready | 1,",
        "Kind::Op => ready.saturating_sub(1) | 1,",
    )
    .fails(crate::check_ids![schedule::fewest_graphs_of_random_programs, schedule::fewest_graphs_of_telling_programs]),
    Mutant::new(
        "fewest_graphs keeps the empty stages",
        "src/schedule.rs",
        "        .filter(|stage| !stage.steps().is_empty())\n",
        "",
    )
    // Only the first host stage can be empty, when no host step reads inputs alone: every telling
    // program without such a block shows it, while most random programs have one.
    .fails(crate::check_ids![schedule::fewest_graphs_of_telling_programs])
    .may_fail(crate::check_ids![schedule::fewest_graphs_of_random_programs]),
];

/// Where `fewest_graphs`'s solution starts: a mutant puts program order there.
const FEWEST: &str = "    // ANCHOR: solution\n    // The earliest stage";
