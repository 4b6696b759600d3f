//! Phase 4 (codegen inspection): everything the grader knows about the phase, declared once (see
//! `grader_harness::declare`): its exercises, their hints and book sections, the checks grading
//! each one, named by their functions in `src/checks/`, and the mistakes those checks must catch.

use grader_harness::{Exercise, Forbidden, Mutant, Phase};

/// Checks that compile many programs with the system C compiler get more time than the default.
const COMPILES: u64 = 180;

/// The seconds each of `save_or_recompute`'s checks of `choose_saved` may take, judging included:
/// ample for a method whose time grows polynomially with the graph, and far too few for trying
/// every plan of the smallest graph those checks draw.
const CHOSEN_PLAN: u64 = 30;

/// Phase 4: reading the code Inductor generates, deciding fusions, printing kernels.
pub const PHASE: Phase = Phase {
    name: "phase4",
    title: "Codegen inspection",
    exercises_dir: "exercises/phase4-codegen",
    solutions_dir: "solutions/phase4-codegen",
    runner_package: env!("CARGO_PKG_NAME"),
    book_page: "book/src/phase4/exercises.md",
    exercises: &[
        Exercise {
            name: "inspect",
            file: "src/inspect.rs",
            section: "inspect",
            stretch: false,
            hints: &[
                "`parse_kernel_name` first: `name.split_once(\"_fused_\")` gives the prefix and the rest; \
                 `rest.rsplit_once('_')` splits off the position, which must be all digits.",
                "In `inspect`, keep a clone of the backend to read it afterwards: `let inductor = \
                 Inductor::default(); dynamo::compile(model).backend(inductor.clone()).call(inputs)?;` then \
                 `inductor.output_codes()` holds one `OutputCode` per compiled graph.",
                "Each `KernelCode` has `name`, `origins` (the graph nodes: `o.node`) and `args` (`a.elements` \
                 floats each). Bytes are `4 * Σ elements`: every argument read or written once.",
            ],
            checks: crate::checks![inspect::names_are_read, inspect::kernels_are_summarised],
            forbidden: &[],
        },
        Exercise {
            name: "can_fuse",
            file: "src/fusion.rs",
            section: "can_fuse",
            stretch: false,
            hints: &[
                "Match on the pair `(&c.group, &c.own)`. The extern cases come first: a candidate whose \
                 `group` or whose `own` kind is `LoopKind::Extern` is always a refusal.",
                "Shapes decide the kind: same shape as a pointwise group is `Pointwise`; a reduction of the \
                 group's shape is `ReductionPrologue`; in a reduction group, the full shape is `RowEpilogue`, \
                 a shape `is_row_shape` accepts is `PerRow`, the same reduction shape and dim is \
                 `AnotherReduction`.",
                "Before saying `Fuse`, look at `c.reads`: one read with `Access::Other` means the value must be \
                 in memory, so refuse and name `read.buffer` in the reason.",
            ],
            checks: crate::checks![
                fusion::decides_known_cases,
                fusion::refusals_give_reasons,
                fusion::fuses_as_much_as_inductor.with_timeout(COMPILES),
            ],
            forbidden: &[Forbidden {
                path: "scheduler::can_fuse",
                everywhere: true,
                why: "this exercise asks you to write the fusion decision yourself",
            }],
        },
        Exercise {
            name: "pointwise_c",
            file: "src/pointwise.rs",
            section: "pointwise_c",
            stretch: false,
            hints: &[
                "The header is `void NAME(float* const* args, int64_t xnumel) {`, then one line per argument: \
                 `const float* in_ptr0 = args[0];` (no `const` for outputs).",
                "The loop is `for (int64_t x = 0; x < xnumel; x++) { ... }`. Inside, match each `Stmt`: a \
                 `Load` is `float tmpN = in_ptr0[index];` with `index.to_c()`; a `Store` is \
                 `out_ptr0[index] = value;`.",
                "A `Compute` is `float tmpN = EXPR;` where `EXPR = op_expr(op, &args, Dialect::C)` and each \
                 operand prints as `tmpN` or `constant(c, Dialect::C)`.",
            ],
            checks: crate::checks![pointwise::pointwise_c_matches_eager.with_timeout(COMPILES)],
            forbidden: &[
                Forbidden {
                    path: "c::kernel",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
                Forbidden {
                    path: "c::module",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
                Forbidden {
                    path: "scalar_spelling",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
                Forbidden {
                    path: "Spelling",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
            ],
        },
        Exercise {
            name: "pointwise_cuda",
            file: "src/pointwise.rs",
            section: "pointwise_cuda",
            stretch: false,
            hints: &[
                "The statements print exactly as in C (with `Dialect::Cuda`); what changes is the signature \
                 and the loop.",
                "Signature: `extern \"C\" __global__ void NAME(const float* in_ptr0, ..., float* out_ptr0, \
                 long long xnumel)`, one parameter per `kernel.args` entry, in order.",
                "The loop: `for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < xnumel; \
                 x += (long long)blockDim.x * gridDim.x)`. Consecutive threads take consecutive `x`, so a \
                 warp's loads are coalesced.",
            ],
            checks: crate::checks![
                pointwise::pointwise_cuda_matches_eager.with_timeout(COMPILES).on_gpu(),
                pointwise::pointwise_cuda_bandwidth.with_timeout(COMPILES).timed_on_gpu(),
            ],
            forbidden: &[
                Forbidden {
                    path: "cuda::kernel",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
                Forbidden {
                    path: "cuda::module",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
            ],
        },
        Exercise {
            name: "reduction_c",
            file: "src/reduction.rs",
            section: "reduction_c",
            stretch: true,
            hints: &[
                "Same signature and argument lines as `pointwise_c`; the outer loop is over rows, \
                 `for (int64_t x = 0; x < xnumel; x++)`.",
                "Inside, walk `phases`: a `Phase::Row` prints its statements once; a `Phase::Loop` declares \
                 `float tmpN = identity(r.combine, Dialect::C);` for each reduction before \
                 `for (int64_t r = 0; r < row_len; r++) {`.",
                "At the end of the loop body fold each value in: `tmpN = tmpN + tmpV;` for a sum, \
                 `tmpN = maximum(tmpN, tmpV);` for a max. Statements after the loop read `tmpN` as the row's \
                 result.",
            ],
            checks: crate::checks![reduction::reduction_c_matches_eager.with_timeout(COMPILES)],
            forbidden: &[],
        },
        Exercise {
            name: "layer_norm_backward",
            file: "src/derivative.rs",
            section: "layer_norm_backward",
            stretch: false,
            hints: &[
                "Name the pieces of the forward first: `centered = x - mean(x)`, `std = sqrt(mean(centered^2) + \
                 eps)`, `normed = centered / std`, all with `mean(-1, true)` so that they broadcast back over the \
                 row.",
                "The easy two: `grad_bias` sums `grad_y` over every row, `grad_weight` sums `grad_y * normed`; \
                 reshape to `[rows, d]` and `sum(0, false)`.",
                "For `grad_x`, let `g = grad_y * weight`. The mean and the variance each depend on every element \
                 of the row, which takes away two components: `grad_x = (g - mean(g) - normed * mean(g * normed)) \
                 / std`.",
            ],
            checks: crate::checks![derivative::layer_norm_backward_matches_finite_differences],
            forbidden: &[
                Forbidden { path: ".backward", everywhere: true, why: ASK_AUTOGRAD },
                Forbidden { path: "autograd", everywhere: true, why: ASK_AUTOGRAD },
            ],
        },
        Exercise {
            name: "save_or_recompute",
            file: "src/partition.rs",
            section: "save_or_recompute",
            stretch: false,
            hints: &[
                "`plan_cost` first: walk back from the values the backward reads. A value that is an input or \
                 saved stops the walk; any other is recomputed (once: keep a flag per value), and the values it \
                 reads are wanted in turn. A banned value reached that way, and the plan does not work. Memory is \
                 `price * bytes` for each distinct saved value that is not an input.",
                "For `choose_saved`, forget plans and think of sides: each value is either left in the forward \
                 or computed again in the backward. Which costs come from one value's side, which from two \
                 related values landing on different sides, and which combinations are forbidden? A cost paid \
                 when something is on one side and something it depends on on the other is what a cut counts.",
                "Give each value two vertices, as PyTorch's partitioner does: \"computed in the forward\" and \
                 \"the backward has it\". Source to the first costs `cost` (cut: recomputed), first to second costs \
                 `price * bytes` (cut: saved); never-cut edges forbid the rest. A maximum flow (Edmonds-Karp) \
                 gives a minimum cut; read the plan off the vertices the source still reaches. The picture \
                 `book/src/images/save-or-recompute-cut.svg` draws the network and its cut for a small graph.",
            ],
            checks: crate::checks![
                partition::plans_are_costed,
                partition::plans_are_optimal.with_timeout(CHOSEN_PLAN),
                partition::telling_plans_are_optimal.with_timeout(CHOSEN_PLAN),
            ],
            forbidden: &[
                Forbidden { path: "aot::partition", everywhere: true, why: DECIDE_YOURSELF },
                Forbidden { path: "aot::Network", everywhere: true, why: DECIDE_YOURSELF },
            ],
        },
    ],
    mutants: MUTANTS,
};

/// Why `layer_norm_backward` may not call autograd.
const ASK_AUTOGRAD: &str = "this exercise asks you to write the derivative yourself, not to ask autograd for it";

/// Why `save_or_recompute` may not call the engine's partitioner.
const DECIDE_YOURSELF: &str = "this exercise asks you to make the save-or-recompute decision yourself";

/// Where `choose_saved`'s solution starts: its mutants put their own method there.
const CUT: &str = "    // ANCHOR: solution\n    // A minimum cut.";

/// Deliberately wrong variants of the solutions, and the checks that catch each one.
const MUTANTS: &[Mutant] = &[
    Mutant::new(
        "parse_kernel_name reads per_ as a looped reduction",
        "src/inspect.rs",
        r#""per" => KernelKind::PersistentReduction,"#,
        r#""per" => KernelKind::LoopedReduction,"#,
    )
    .fails(crate::check_ids![inspect::names_are_read, inspect::kernels_are_summarised]),
    Mutant::new(
        "parse_kernel_name keeps the kernel's position as an op",
        "src/inspect.rs",
        "let (ops, position) = rest.rsplit_once('_')?;",
        r#"let (ops, position) = (rest, "0");"#,
    )
    .fails(crate::check_ids![inspect::names_are_read, inspect::kernels_are_summarised]),
    Mutant::new(
        "inspect counts only the bytes read",
        "src/inspect.rs",
        "bytes: kernel.args.iter().map(|a| a.elements * 4).sum(),",
        "bytes: kernel.args.iter().filter(|a| !a.output).map(|a| a.elements * 4).sum(),",
    )
    .fails(crate::check_ids![inspect::kernels_are_summarised]),
    Mutant::new(
        "can_fuse ignores how the group's buffers are read",
        "src/fusion.rs",
        "if let Some(read) = c.reads.iter().find(|r| r.access == Access::Other) {",
        "if let Some(read) = c.reads.iter().find(|r| r.access == Access::Other && r.buffer.is_empty()) {",
    )
    .fails(crate::check_ids![
        fusion::decides_known_cases,
        fusion::refusals_give_reasons,
        fusion::fuses_as_much_as_inductor
    ]),
    Mutant::new(
        "can_fuse never puts a second reduction in a kernel",
        "src/fusion.rs",
        "if own == shape && d == dim =>",
        "if own == shape && d == dim && c.reads.is_empty() =>",
    )
    .fails(crate::check_ids![fusion::decides_known_cases, fusion::fuses_as_much_as_inductor]),
    Mutant::new(
        "the C loop skips the first element",
        "src/pointwise.rs",
        "for (int64_t x = 0; x < xnumel; x++) {",
        "for (int64_t x = 1; x < xnumel; x++) {",
    )
    .fails(crate::check_ids![pointwise::pointwise_c_matches_eager, reduction::reduction_c_matches_eager]),
    Mutant::new(
        "the C loop runs one element past the end",
        "src/pointwise.rs",
        "for (int64_t x = 0; x < xnumel; x++) {",
        "for (int64_t x = 0; x <= xnumel; x++) {",
    )
    .fails(crate::check_ids![pointwise::pointwise_c_matches_eager, reduction::reduction_c_matches_eager]),
    Mutant::new(
        "the CUDA loop runs one element past the end",
        "src/pointwise.rs",
        "x < xnumel; x += stride) {",
        "x <= xnumel; x += stride) {",
    )
    .fails(crate::check_ids![pointwise::pointwise_cuda_matches_eager])
    .may_fail(crate::check_ids![pointwise::pointwise_cuda_bandwidth]),
    Mutant::new(
        "a reduction's accumulator starts at 0 whatever it combines",
        "src/reduction.rs",
        "identity(r.combine, Dialect::C)",
        "\"0.0f\"",
    )
    .fails(crate::check_ids![reduction::reduction_c_matches_eager]),
    Mutant::new(
        "every load reads element x, ignoring broadcasts and strides",
        "src/pointwise.rs",
        r#"format!("float tmp{tmp} = {}[{}];", kernel.args[*arg].name, index.to_c())"#,
        r#"format!("float tmp{tmp} = {}[x];", kernel.args[*arg].name)"#,
    )
    .fails(crate::check_ids![pointwise::pointwise_c_matches_eager, reduction::reduction_c_matches_eager]),
    Mutant::new(
        "a max reduction takes the minimum",
        "src/reduction.rs",
        "tmp{0} = maximum(tmp{0}, {value});",
        "tmp{0} = fminf(tmp{0}, {value});",
    )
    .fails(crate::check_ids![reduction::reduction_c_matches_eager]),
    Mutant::new(
        "can_fuse delegates to the scheduler",
        "src/fusion.rs",
        "pub fn can_fuse(c: &FusionCandidate) -> Decision {\n",
        "pub fn can_fuse(c: &FusionCandidate) -> Decision {\n    return engine::inductor::scheduler::can_fuse(c);\n",
    )
    .refused(),
    Mutant::new(
        "pointwise_c prints with the engine's printer",
        "src/pointwise.rs",
        "pub fn pointwise_c(kernel: &Kernel) -> String {\n",
        "pub fn pointwise_c(kernel: &Kernel) -> String {\n    return engine::inductor::codegen::c::kernel(kernel);\n",
    )
    .refused(),
    Mutant::new(
        "layer_norm_backward forgets that the mean depends on x",
        "src/derivative.rs",
        "let through_mean = g.sub(&g.mean(-1, true)?)?;",
        "let through_mean = g.clone();",
    )
    .fails(crate::check_ids![derivative::layer_norm_backward_matches_finite_differences]),
    Mutant::new(
        "layer_norm_backward forgets that the variance depends on x",
        "src/derivative.rs",
        "let grad_x = through_mean.sub(&through_variance)?.div(&std)?;",
        "let grad_x = through_mean.div(&std)?;",
    )
    .fails(crate::check_ids![derivative::layer_norm_backward_matches_finite_differences]),
    Mutant::new(
        "layer_norm_backward's weight gradient uses x, not the normalised x",
        "src/derivative.rs",
        "let grad_weight = rows(&grad_y.mul(&normed)?)?.sum(0, false)?;",
        "let grad_weight = rows(&grad_y.mul(x)?)?.sum(0, false)?;",
    )
    .fails(crate::check_ids![derivative::layer_norm_backward_matches_finite_differences]),
    Mutant::new(
        "layer_norm_backward asks autograd",
        "src/derivative.rs",
        "    // ANCHOR: solution\n    let d = x.shape()[x.rank() - 1];",
        "    // ANCHOR: solution\n    let _ = grad_y.sum_all()?.backward();\n    let d = x.shape()[x.rank() - 1];",
    )
    .refused(),
    Mutant::new(
        "plan_cost forgets the price of memory",
        "src/partition.rs",
        ".map(|v| values[v].bytes * problem.price).sum();",
        ".map(|v| values[v].bytes).sum();",
    )
    .fails(crate::check_ids![partition::plans_are_costed]),
    Mutant::new(
        "plan_cost charges for keeping inputs",
        "src/partition.rs",
        "is_saved[v] = values[v].kind != Kind::Input;",
        "is_saved[v] = true;",
    )
    .fails(crate::check_ids![partition::plans_are_costed]),
    Mutant::new(
        "plan_cost computes banned values again",
        "src/partition.rs",
        "if values[v].kind == Kind::Banned {",
        "if values[v].kind == Kind::Banned && values[v].bytes == 0 {",
    )
    .fails(crate::check_ids![partition::plans_are_costed]),
    Mutant::new(
        "plan_cost forgets what a recomputed value is computed from",
        "src/partition.rs",
        "wanted.extend(&values[v].inputs);",
        "wanted.extend(values[v].inputs.iter().filter(|&&i| values[i].needed));",
    )
    .fails(crate::check_ids![partition::plans_are_costed]),
    Mutant::new(
        "choose_saved saves everything the backward reads",
        "src/partition.rs",
        CUT,
        "    // ANCHOR: solution\n    return (0..problem.values.len()).filter(|&v| problem.values[v].needed).collect();\n    // A minimum cut.",
    )
    .fails(crate::check_ids![partition::plans_are_optimal, partition::telling_plans_are_optimal]),
    Mutant::new(
        "choose_saved recomputes all it may and saves the banned values that takes",
        "src/partition.rs",
        CUT,
        "    // ANCHOR: solution
    let (mut plan, mut seen) = (Vec::new(), vec![false; problem.values.len()]);
    let mut wanted: Vec<usize> = (0..problem.values.len()).filter(|&v| problem.values[v].needed).collect();
    while let Some(v) = wanted.pop() {
        if std::mem::replace(&mut seen[v], true) {
            continue;
        }
        match problem.values[v].kind {
            Kind::Banned => plan.push(v),
            Kind::Recomputable => wanted.extend(&problem.values[v].inputs),
            Kind::Input => {}
        }
    }
    return plan;
    // A minimum cut.",
    )
    .fails(crate::check_ids![partition::plans_are_optimal, partition::telling_plans_are_optimal]),
    Mutant::new(
        "choose_saved decides each value the backward reads on its own",
        "src/partition.rs",
        CUT,
        "    // ANCHOR: solution
    let (values, mut plan) = (&problem.values, Vec::new());
    for v in (0..values.len()).filter(|&v| values[v].needed && values[v].kind != Kind::Input) {
        // What recomputing v alone would take: its recomputable ancestors, and saving the banned ones.
        let (mut again, mut frontier, mut seen, mut wanted) = (0, Vec::new(), vec![false; values.len()], vec![v]);
        while let Some(u) = wanted.pop() {
            if std::mem::replace(&mut seen[u], true) {
                continue;
            }
            match values[u].kind {
                Kind::Recomputable => {
                    again += values[u].cost;
                    wanted.extend(&values[u].inputs);
                }
                Kind::Banned => {
                    again += values[u].bytes * problem.price;
                    frontier.push(u);
                }
                Kind::Input => {}
            }
        }
        if values[v].kind == Kind::Banned || values[v].bytes * problem.price <= again {
            plan.push(v);
        } else {
            plan.extend(frontier);
        }
    }
    return plan;
    // A minimum cut.",
    )
    .fails(crate::check_ids![partition::plans_are_optimal, partition::telling_plans_are_optimal]),
    Mutant::new(
        "choose_saved tries every plan, when there are few enough",
        "src/partition.rs",
        CUT,
        "    // ANCHOR: solution
    let candidates: Vec<usize> = (0..problem.values.len()).filter(|&v| problem.values[v].kind != Kind::Input).collect();
    if candidates.len() > 20 {
        return (0..problem.values.len()).filter(|&v| problem.values[v].needed).collect();
    }
    return (0u32..1 << candidates.len())
        .map(|mask| candidates.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &v)| v).collect())
        .filter_map(|plan: Vec<usize>| plan_cost(problem, &plan).map(|cost| (cost, plan)))
        .min()
        .map(|(_, plan)| plan)
        .unwrap_or_default();
    // A minimum cut.",
    )
    .fails(crate::check_ids![partition::plans_are_optimal, partition::telling_plans_are_optimal]),
    Mutant::new(
        "choose_saved improves a plan one value at a time until no change helps",
        "src/partition.rs",
        CUT,
        "    // ANCHOR: solution
    let n = problem.values.len();
    let mut saved: Vec<bool> = problem.values.iter().map(|v| v.needed && v.kind != Kind::Input).collect();
    let plan_of = |saved: &[bool]| (0..n).filter(|&v| saved[v]).collect::<Vec<usize>>();
    let mut best = plan_cost(problem, &plan_of(&saved)).expect(\"saving all that is read works\");
    let mut improved = true;
    while improved {
        improved = false;
        for v in 0..n {
            saved[v] = !saved[v];
            match plan_cost(problem, &plan_of(&saved)) {
                Some(cost) if cost < best => {
                    best = cost;
                    improved = true;
                }
                _ => saved[v] = !saved[v],
            }
        }
    }
    return plan_of(&saved);
    // A minimum cut.",
    )
    .fails(crate::check_ids![partition::plans_are_optimal, partition::telling_plans_are_optimal]),
    Mutant::new(
        "choose_saved charges a saved value's memory once for each value recomputed from it",
        "src/partition.rs",
        "network.add(2 * i + 1, 2 * v, never);",
        "network.add(2 * i, 2 * v, values[i].bytes * problem.price);",
    )
    .fails(crate::check_ids![partition::plans_are_optimal, partition::telling_plans_are_optimal]),
    Mutant::new(
        "choose_saved counts recomputation as free, as the engine's partitioner does",
        "src/partition.rs",
        "let recompute = if value.kind == Kind::Banned { never } else { value.cost };",
        "let recompute = if value.kind == Kind::Banned { never } else { 0 };",
    )
    .fails(crate::check_ids![partition::plans_are_optimal, partition::telling_plans_are_optimal]),
    Mutant::new(
        "choose_saved puts the price on recomputation, not on memory",
        "src/partition.rs",
        "network.add(source, 2 * v, recompute);\n        network.add(2 * v, 2 * v + 1, value.bytes * problem.price);",
        "network.add(source, 2 * v, recompute.saturating_mul(problem.price));\n        network.add(2 * v, 2 * v + 1, value.bytes);",
    )
    .fails(crate::check_ids![partition::plans_are_optimal, partition::telling_plans_are_optimal]),
    Mutant::new(
        "choose_saved asks the engine's partitioner",
        "src/partition.rs",
        CUT,
        "    // ANCHOR: solution\n    let _ = engine::aot::partition;\n    // A minimum cut.",
    )
    .refused(),
];
