//! Phase 1 (backends): everything the grader knows about the phase, in one place.
//!
//! The checks themselves are in `src/checks/`, compiled into two runner binaries,
//! `phase1-exercises` and `phase1-solutions`, that differ only in the crate they test (`subject`).
//! See the grader's crate documentation for how to add a phase.

use grader_harness::{CheckSpec, Exercise, Forbidden, Phase};

/// Phase 1: compiling with backends, and writing backends.
pub const PHASE: Phase = Phase {
    name: "phase1",
    title: "Backends",
    exercises_dir: "exercises/phase1-backends",
    solutions_dir: "solutions/phase1-backends",
    runner_package: "checks-phase1",
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
            checks: &[CheckSpec::new("reports_every_backend"), CheckSpec::new("differences_are_measured")],
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
            checks: &[
                CheckSpec::new("median_is_the_middle"),
                CheckSpec::new("one_compile_then_cache_hits"),
                CheckSpec::new("timings_are_real"),
                CheckSpec::new("waits_for_the_gpu").on_gpu(),
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
            checks: &[
                CheckSpec::new("runs_the_mlp_graph"),
                CheckSpec::new("matches_fx_interpreter_on_random_graphs"),
                CheckSpec::new("rejects_a_wrong_input_count"),
                CheckSpec::new("backend_runs_compiled_functions"),
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
            checks: &[
                CheckSpec::new("keeps_one_graph_per_compile"),
                CheckSpec::new("graphs_print_as_captured"),
                CheckSpec::new("separate_backends_do_not_share"),
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
            checks: &[CheckSpec::new("refuses_a_denied_op"), CheckSpec::new("allows_graphs_without_denied_ops")],
            forbidden: &[],
        },
    ],
};
