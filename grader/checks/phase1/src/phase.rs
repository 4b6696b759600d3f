//! Phase 1 (backends): everything the grader knows about the phase, declared once (see
//! `grader_harness::declare`): its exercises, their hints and book sections, the checks grading
//! each one, named by their functions in `src/checks/`, and the mistakes those checks must catch.

use grader_harness::{Exercise, Forbidden, Mutant, Phase};

/// Phase 1: compiling with backends, and writing backends.
pub const PHASE: Phase = Phase {
    name: "phase1",
    title: "Backends",
    exercises_dir: "exercises/phase1-backends",
    solutions_dir: "solutions/phase1-backends",
    runner_package: env!("CARGO_PKG_NAME"),
    book_page: "book/src/phase1/exercises.md",
    exercises: &[
        Exercise {
            name: "compare_backends",
            file: "src/compare.rs",
            section: "compare_backends",
            stretch: false,
            hints: &[
                "Start with the reference: `let expected = mlp.forward(x)?.to_vec()?;` runs the model eagerly, \
                 outside any compiled function.",
                "For each backend: `let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(backend);` \
                 then `compiled.call(x)?`. Take the name with `backend.name().to_string()` before handing the \
                 backend over.",
                "The difference is `actual.iter().zip(&expected).map(|(a, e)| (a - e).abs()).fold(0.0, f32::max)`. \
                 Collect one `BackendDiff` per backend with `.map(...).collect::<Result<Vec<_>>>()`.",
            ],
            checks: crate::checks![compare::reports_every_backend, compare::differences_are_measured],
            forbidden: &[],
        },
        Exercise {
            name: "latency",
            file: "src/latency.rs",
            section: "latency",
            stretch: false,
            hints: &[
                "`median` first: copy the samples into a Vec, sort it, and look at the middle. With an even count \
                 there are two middles: add them and divide by 2 (`Duration` supports both).",
                "In `measure_latency`, compile once, outside the timing loop, then write one closure that times a \
                 single call: `let start = Instant::now(); compiled.call(&x)?.to_vec()?; start.elapsed()`.",
                "Call that closure once for `first_call`, then `steady_calls` times for `steady`; fill `stats` from \
                 `compiled.stats()` after the last call. The first call is slower because it traces, misses the \
                 cache and runs the backend's `compile`; later calls trace and hit the cache.",
            ],
            checks: crate::checks![
                latency::median_is_the_middle,
                latency::one_compile_then_cache_hits,
                latency::timings_are_real,
                latency::waits_for_the_device,
            ],
            forbidden: &[Forbidden {
                path: "engine::bench",
                everywhere: true,
                why: "this exercise asks you to time calls and take the median yourself",
            }],
        },
        Exercise {
            name: "interpreter",
            file: "src/interpreter.rs",
            section: "interpreter",
            stretch: false,
            hints: &[
                "The environment is a `HashMap<NodeId, Tensor>`. Fill it first from `graph.placeholders()` zipped \
                 with `inputs` (check their lengths match first, and return an `Error::Backend` if not).",
                "Walk `graph.ids()`; skip placeholders with `let NodeKind::Call { op, args } = &node.kind else { \
                 continue };`. Turn each `Arg` into an `Operand`: `Arg::Node(id)` is `Operand::Tensor(&env[id])`, \
                 `Arg::Scalar(s)` is `Operand::Scalar(s.0)`.",
                "Run the node with `op.apply(&operands, node.location.unwrap_or(SourceLocation::caller()))?` and \
                 store the result under its id. For the backend, clone the graph into a closure: \
                 `Ok(Box::new(move |inputs: &[Tensor]| interpret(&graph, inputs)))`.",
                "Failing only on dynamic graphs (`f32[s0, ...]`) at a new batch size? A reshape's op still holds \
                 the traced sizes. Before the loop, `let bindings = graph.bind_symbols(&shapes)` (the inputs' \
                 shapes); in it, take `graph.concrete_op(node, &bindings)` instead of `node.op()`.",
            ],
            checks: crate::checks![
                interpreter::runs_the_mlp_graph,
                interpreter::matches_fx_interpreter_on_random_graphs,
                interpreter::rejects_a_wrong_input_count,
                interpreter::backend_runs_compiled_functions,
            ],
            forbidden: &[
                Forbidden {
                    path: "fx::Interpreter",
                    everywhere: true,
                    why: "this exercise asks you to write the interpreter yourself, node by node",
                },
                Forbidden {
                    path: "Eager",
                    everywhere: false,
                    why: "an interpreter that hands the graph to another backend interprets nothing: run each node yourself",
                },
                Forbidden {
                    path: "AotEager",
                    everywhere: false,
                    why: "an interpreter that hands the graph to another backend interprets nothing: run each node yourself",
                },
                Forbidden {
                    path: "Inductor",
                    everywhere: false,
                    why: "an interpreter that hands the graph to another backend interprets nothing: run each node yourself",
                },
            ],
        },
        Exercise {
            name: "recording",
            file: "src/recording.rs",
            section: "recording",
            stretch: false,
            hints: &[
                "The caller keeps one clone and the compiled function owns another, so both must point at the same \
                 list: a field of type `Arc<Mutex<Vec<Graph>>>` does that (cloning an `Arc` shares, it does not copy).",
                "`new()` can be `RecordingBackend::default()` once the field exists; `graphs()` locks the mutex and \
                 clones the Vec.",
                "In `compile`, push `graph.clone()` into the list, then hand the graph on: `Eager.compile(graph, \
                 example_inputs)`.",
            ],
            checks: crate::checks![
                recording::keeps_one_graph_per_compile,
                recording::graphs_print_as_captured,
                recording::separate_backends_do_not_share,
            ],
            forbidden: &[],
        },
        Exercise {
            name: "partitioner",
            file: "src/partitioner.rs",
            section: "partitioner",
            stretch: false,
            hints: &[
                "Draw the failing graph on paper, with the supported nodes coloured. A partition is legal exactly \
                 when the graph can be run in some order in which the partition's nodes come one after another, \
                 with nothing between them. How many times must such an order switch from unsupported nodes to \
                 supported ones?",
                "The graph's own order is only one order. Which unsupported nodes could run *before* a supported node \
                 you are about to put in a partition, so that it can wait and join a later one? Think in rounds: \
                 everything that can run outside a partition, then everything that can run inside one, and so on.",
                "For the backend: a partition's graph takes as inputs the values its nodes read from outside it, and \
                 returns the values read outside it, the graph's outputs among them. A partition cannot run where \
                 its first node was: it runs once all its inputs exist, so put the steps (partitions and eager \
                 nodes) in an order of the contracted graph.",
            ],
            checks: crate::checks![
                partitioner::partitions_are_legal_and_fewest,
                partitioner::backend_runs_partitions_through_the_compiler,
            ],
            forbidden: &[],
        },
        Exercise {
            name: "deny_ops",
            file: "src/deny_ops.rs",
            section: "deny_ops",
            stretch: true,
            hints: &[
                "Store the names as a `Vec<String>`. In `compile`, look at every node: `node.op()` is `Some(op)` for \
                 calls, and `op.name()` is the name graphs print.",
                "Return `Err(Error::Backend { backend: ..., message: ... })` naming the op and `node.location` \
                 (`location.short()` gives `file:line`); otherwise `Eager.compile(graph, example_inputs)`. Which \
                 ops does a backend see: the ones you wrote, or their decompositions?",
            ],
            checks: crate::checks![deny_ops::refuses_a_denied_op, deny_ops::allows_graphs_without_denied_ops],
            forbidden: &[],
        },
    ],
    mutants: MUTANTS,
};

/// Deliberately wrong variants of the solutions, and the checks that catch each one.
const MUTANTS: &[Mutant] = &[
    Mutant::new(
        "compare_backends reports 0 whatever the outputs",
        "src/compare.rs",
        ".fold(0.0, f32::max)",
        ".fold(0.0, f32::min)",
    )
    .fails(crate::check_ids![compare::differences_are_measured, compare::reports_every_backend]),
    Mutant::new(
        "compare_backends keeps the sign of the difference",
        "src/compare.rs",
        ".map(|(a, e)| (a - e).abs())",
        ".map(|(a, e)| a - e)",
    )
    .fails(crate::check_ids![compare::differences_are_measured, compare::reports_every_backend]),
    Mutant::new(
        "compare_backends compiles with Eager whatever backend it is given",
        "src/compare.rs",
        ".backend(backend);",
        ".backend(engine::backends::Eager);",
    )
    .fails(crate::check_ids![compare::differences_are_measured, compare::reports_every_backend]),
    Mutant::new(
        "median does not sort",
        "src/latency.rs",
        "    sorted.sort();\n",
        "",
    )
    .fails(crate::check_ids![latency::median_is_the_middle])
    .may_fail(crate::check_ids![latency::timings_are_real]),
    Mutant::new(
        "median of an even count takes one middle",
        "src/latency.rs",
        "n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,",
        "n => sorted[n / 2],",
    )
    .fails(crate::check_ids![latency::median_is_the_middle])
    .may_fail(crate::check_ids![latency::timings_are_real]),
    Mutant::new(
        "measure_latency compiles a new function for every call",
        "src/latency.rs",
        "        let start = Instant::now();\n        compiled.call(&x)?.to_vec()?;",
        "        let start = Instant::now();\n        dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(engine::backends::Eager).call(&x)?.to_vec()?;",
    )
    .fails(crate::check_ids![latency::one_compile_then_cache_hits, latency::timings_are_real])
    .may_fail(crate::check_ids![latency::waits_for_the_device]),
    Mutant::new(
        "steady_median is the first sample",
        "src/latency.rs",
        "steady_median: median(&steady)",
        "steady_median: steady[0]",
    )
    .fails(crate::check_ids![latency::timings_are_real]),
    Mutant::new(
        "measure_latency warms up before timing the first call",
        "src/latency.rs",
        "    let first_call = timed_call()?;",
        "    timed_call()?;\n    let first_call = timed_call()?;",
    )
    .fails(crate::check_ids![latency::one_compile_then_cache_hits, latency::timings_are_real]),
    Mutant::new(
        "measure_latency stops the clock before the GPU has finished",
        "src/latency.rs",
        "        compiled.call(&x)?.to_vec()?;\n        Ok(start.elapsed())",
        "        let output = compiled.call(&x)?;\n        let elapsed = start.elapsed();\n        output.to_vec()?;\n        Ok(elapsed)",
    )
    .fails(crate::check_ids![latency::waits_for_the_device]),
    Mutant::new(
        "interpret binds the inputs in reverse",
        "src/interpreter.rs",
        "graph.placeholders().iter().copied().zip(inputs.iter().cloned())",
        "graph.placeholders().iter().copied().zip(inputs.iter().rev().cloned())",
    )
    .fails(crate::check_ids![interpreter::runs_the_mlp_graph, interpreter::matches_fx_interpreter_on_random_graphs, interpreter::backend_runs_compiled_functions]),
    Mutant::new(
        "interpret does not check the number of inputs",
        "src/interpreter.rs",
        "    if inputs.len() != graph.placeholders().len() {",
        "    if false {",
    )
    .fails(crate::check_ids![interpreter::rejects_a_wrong_input_count]),
    Mutant::new(
        "interpret returns only the first output",
        "src/interpreter.rs",
        "Ok(graph.outputs().iter().map(|id| env[id].clone()).collect())",
        "Ok(graph.outputs().iter().take(1).map(|id| env[id].clone()).collect())",
    )
    .fails(crate::check_ids![interpreter::matches_fx_interpreter_on_random_graphs]),
    Mutant::new(
        "RecordingBackend::graphs returns only the first graph",
        "src/recording.rs",
        r#"        self.graphs.lock().expect("no panic while recording").clone()"#,
        r#"        let g = self.graphs.lock().expect("no panic while recording").clone(); g.into_iter().take(1).collect::<Vec<_>>()"#,
    )
    .fails(crate::check_ids![recording::keeps_one_graph_per_compile]),
    Mutant::new(
        "RecordingBackend records the decomposed graph",
        "src/recording.rs",
        r#"        self.graphs.lock().expect("no panic while recording").push(graph.clone());"#,
        r#"        self.graphs.lock().expect("no panic while recording").push(engine::aot::decompose(graph)?);"#,
    )
    .fails(crate::check_ids![recording::graphs_print_as_captured]),
    Mutant::new(
        "every RecordingBackend shares one global record",
        "src/recording.rs",
        "        RecordingBackend::default()",
        "        static SHARED: std::sync::OnceLock<Arc<Mutex<Vec<Graph>>>> = std::sync::OnceLock::new(); RecordingBackend { graphs: SHARED.get_or_init(Default::default).clone() }",
    )
    .fails(crate::check_ids![recording::separate_backends_do_not_share]),
    Mutant::new(
        "partition puts every supported node in one partition",
        "src/partitioner.rs",
        "            let index = r / 2;\n",
        "            let index = 0;\n",
    )
    .fails(crate::check_ids![
        partitioner::partitions_are_legal_and_fewest,
        partitioner::backend_runs_partitions_through_the_compiler,
    ]),
    Mutant::new(
        "partition groups the runs of supported nodes in the graph's order",
        "src/partitioner.rs",
        "let earliest = node.inputs().map(|input| round[input.index()]).max().unwrap_or(0);",
        "let earliest = round[..id.index()].iter().copied().max().unwrap_or(0);",
    )
    .fails(crate::check_ids![
        partitioner::partitions_are_legal_and_fewest,
        partitioner::backend_runs_partitions_through_the_compiler,
    ]),
    Mutant::new(
        "partition starts with a partition before running what is ready outside",
        "src/partitioner.rs",
        "let r = if supported == (earliest % 2 == 1) { earliest } else { earliest + 1 };",
        "let r = if node.op().is_none() { 0 } else if supported == (earliest % 2 == 0) { earliest } else { earliest + 1 };",
    )
    .fails(crate::check_ids![
        partitioner::partitions_are_legal_and_fewest,
        partitioner::backend_runs_partitions_through_the_compiler,
    ]),
    Mutant::new(
        "partition takes in every call node, supported or not",
        "src/partitioner.rs",
        "let supported = node.op().is_some_and(supports);",
        "let supported = node.op().is_some();",
    )
    .fails(crate::check_ids![
        partitioner::partitions_are_legal_and_fewest,
        partitioner::backend_runs_partitions_through_the_compiler,
    ]),
    Mutant::new(
        "partition merges greedily, as PyTorch's partitioner does: a pair at a time while no cycle appears",
        "src/partitioner.rs",
        "    partitions.retain(|p| !p.is_empty());\n    partitions\n",
        r#"    let _ = partitions;
    let n = graph.nodes().len();
    // Whether the graph, each partition of `assign` contracted, has no cycle.
    let acyclic = |assign: &[Option<usize>]| {
        let unit = |i: usize| assign[i].map_or(n + i, |p| p);
        let mut edges = vec![Vec::new(); 2 * n];
        for id in graph.ids() {
            for input in graph.node(id).inputs() {
                if unit(input.index()) != unit(id.index()) {
                    edges[unit(input.index())].push(unit(id.index()));
                }
            }
        }
        fn dfs(u: usize, edges: &[Vec<usize>], state: &mut [u8]) -> bool {
            state[u] = 1;
            let ok = edges[u].iter().all(|&w| state[w] == 2 || (state[w] == 0 && dfs(w, edges, state)));
            state[u] = 2;
            ok
        }
        let mut state = vec![0u8; 2 * n];
        (0..2 * n).all(|u| state[u] != 0 || dfs(u, &edges, &mut state))
    };
    let mut assign: Vec<Option<usize>> = vec![None; n];
    let mut made = 0;
    for id in graph.ids() {
        if !graph.node(id).op().is_some_and(supports) {
            continue;
        }
        assign[id.index()] = Some(made);
        for other in 0..made {
            let merged: Vec<Option<usize>> =
                assign.iter().map(|a| if *a == Some(other) { Some(made) } else { *a }).collect();
            if acyclic(&merged) {
                assign = merged;
            }
        }
        made += 1;
    }
    (0..made)
        .map(|p| graph.ids().filter(|id| assign[id.index()] == Some(p)).collect::<Vec<_>>())
        .filter(|p| !p.is_empty())
        .collect()
"#,
    )
    .fails(crate::check_ids![
        partitioner::partitions_are_legal_and_fewest,
        partitioner::backend_runs_partitions_through_the_compiler,
    ]),
    Mutant::new(
        "CapabilityBackend drops a value only the graph's outputs read",
        "src/partitioner.rs",
        "graph.outputs().contains(&id) || graph.users(id)",
        "graph.users(id)",
    )
    .fails(crate::check_ids![partitioner::backend_runs_partitions_through_the_compiler]),
    Mutant::new(
        "CapabilityBackend runs each partition where its first node was",
        "src/partitioner.rs",
        "let steps = schedule(graph, &owner, partitions.len());",
        "let mut seen = vec![false; partitions.len()];\n        let steps: Vec<Step> = graph.ids().filter_map(|id| match owner[id.index()] { Some(p) => (!std::mem::replace(&mut seen[p], true)).then_some(Step::Partition(p)), None => graph.node(id).op().is_some().then_some(Step::Eager(id)) }).collect();\n        let _ = schedule;",
    )
    .fails(crate::check_ids![partitioner::backend_runs_partitions_through_the_compiler]),
    Mutant::new(
        "CapabilityBackend compiles each supported node alone",
        "src/partitioner.rs",
        "let partitions = partition(graph, &*self.supports);",
        "let partitions: Vec<Vec<NodeId>> = partition(graph, &*self.supports).into_iter().flatten().map(|id| vec![id]).collect();",
    )
    .fails(crate::check_ids![partitioner::backend_runs_partitions_through_the_compiler]),
    Mutant::new(
        "CapabilityBackend runs every node eagerly",
        "src/partitioner.rs",
        "let partitions = partition(graph, &*self.supports);",
        "let partitions: Vec<Vec<NodeId>> = { let _ = partition; Vec::new() };",
    )
    .fails(crate::check_ids![partitioner::backend_runs_partitions_through_the_compiler]),
    Mutant::new(
        "DenyOps does not name the source line",
        "src/deny_ops.rs",
        "(node %{}, at {place})",
        "(node %{})",
    )
    .fails(crate::check_ids![deny_ops::refuses_a_denied_op]),
    Mutant::new(
        "DenyOps denies every op whose name holds a denied one",
        "src/deny_ops.rs",
        "self.denied.iter().any(|d| d == op.name())",
        "self.denied.iter().any(|d| op.name().contains(d.as_str()))",
    )
    .fails(crate::check_ids![deny_ops::allows_graphs_without_denied_ops]),
    Mutant::new(
        "DenyOps denies every op named within a denied name",
        "src/deny_ops.rs",
        "self.denied.iter().any(|d| d == op.name())",
        "self.denied.iter().any(|d| d.contains(op.name()))",
    )
    .fails(crate::check_ids![deny_ops::allows_graphs_without_denied_ops]),
    Mutant::new(
        "DenyOps looks at the decomposed graph",
        "src/deny_ops.rs",
        "for node in graph.nodes() {",
        "for node in engine::aot::decompose(graph)?.nodes() {",
    )
    .fails(crate::check_ids![deny_ops::refuses_a_denied_op, deny_ops::allows_graphs_without_denied_ops]),
    Mutant::new(
        "interpret applies each op with the sizes it was traced with",
        "src/interpreter.rs",
        "graph.concrete_op(node, &bindings)",
        "node.op().map(std::borrow::Cow::Borrowed)",
    )
    .fails(crate::check_ids![interpreter::matches_fx_interpreter_on_random_graphs]),
    Mutant::new(
        "interpret delegates to fx::Interpreter",
        "src/interpreter.rs",
        "    let here = SourceLocation::caller();\n",
        "    return engine::fx::Interpreter::new(graph.clone()).run(inputs);\n    let here = SourceLocation::caller();\n",
    )
    .refused(),
    Mutant::new(
        "the interpreter backend hands the graph to Eager",
        "src/interpreter.rs",
        "Ok(Box::new(move |inputs: &[Tensor]| interpret(&graph, inputs)))",
        "engine::backends::Eager.compile(&graph, _example_inputs)",
    )
    .refused(),
];
