//! Phase 2 (capture): everything the grader knows about the phase, in one place.
//!
//! The checks themselves are in `src/checks/`, compiled into two runner binaries,
//! `phase2-exercises` and `phase2-solutions`, that differ only in the crate they test (`subject`).
//! See the grader's crate documentation for how to add a phase.

use grader_harness::{CheckSpec, Exercise, Forbidden, Phase};

/// Phase 2: reading what capture produces, shape propagation and graph passes.
pub const PHASE: Phase = Phase {
    name: "phase2",
    title: "Graph capture",
    exercises_dir: "exercises/phase2-capture",
    solutions_dir: "solutions/phase2-capture",
    runner_package: "checks-phase2",
    book_page: "book/src/phase2/exercises.md",
    exercises: &[
        Exercise {
            name: "explain_report",
            file: "src/explain_report.rs",
            section: "explain_report",
            stretch: false,
            hints: &[
                "`let report = dynamo::explain(f).call(x)?;` runs `f` once under capture. `report.graphs` holds \
                 the graphs in order and `report.breaks` the breaks: the counts are yours to take from them.",
                "For the op names, walk each graph's `nodes()`: `node.op()` is `Some(op)` for a call and `None` \
                 for a placeholder, and `op.name()` is the name graphs print.",
                "The inputs are the first graph's placeholders: `graph.placeholders()` gives their ids and \
                 `graph.node(id).name` their names. `report.graphs.first()` is `None` when nothing was captured.",
            ],
            checks: &[CheckSpec::new("summarizes_one_graph"), CheckSpec::new("summarizes_graphs_and_breaks")],
            forbidden: &[
                Forbidden {
                    path: ".op_count",
                    everywhere: true,
                    why: "this exercise asks you to count the ops yourself, from the graphs' nodes",
                },
                Forbidden {
                    path: ".ops_per_graph",
                    everywhere: true,
                    why: "this exercise asks you to list each graph's ops yourself, from its nodes",
                },
                Forbidden {
                    path: ".graph_count",
                    everywhere: true,
                    why: "this exercise asks you to count the graphs yourself: `report.graphs` holds them",
                },
                Forbidden {
                    path: ".graph_break_count",
                    everywhere: true,
                    why: "this exercise asks you to count the breaks yourself: `report.breaks` holds them",
                },
            ],
        },
        Exercise {
            name: "line_table",
            file: "src/line_table.rs",
            section: "line_table",
            stretch: false,
            hints: &[
                "Skip every node whose `node.op()` or `node.location` is `None`; `location.short()` gives the \
                 `file:line` text to group by.",
                "Keep the rows in a Vec, not a HashMap: the order must be that of each line's first node. For each \
                 node, look for a row with the same location (`rows.iter_mut().find(...)`) and push the op name \
                 there, or push a new row.",
            ],
            checks: &[
                CheckSpec::new("groups_the_captured_graph"),
                CheckSpec::new("groups_the_decomposed_graph"),
                CheckSpec::new("groups_random_graphs"),
            ],
            forbidden: &[],
        },
        Exercise {
            name: "shape_propagation",
            file: "src/shape_prop.rs",
            section: "shape_propagation",
            stretch: false,
            hints: &[
                "`broadcast`: the result has `max(a.len(), b.len())` dims. Read a size with a helper that returns 1 \
                 for the missing leading dims of the shorter shape; then at each position the sizes are equal, or \
                 one is 1 and the result is the other, or it is an error.",
                "`propagate`: keep one shape per node in a Vec indexed like the nodes (`id.index()`). A placeholder \
                 takes the next input shape; for a call, turn each `Arg` into `Option<&[usize]>`: \
                 `Arg::Node(id)` is `Some(&shapes[id.index()])`, `Arg::Scalar(_)` is `None`.",
                "For `Op::Unary(_) | Op::Binary(_) | Op::Where`, fold `broadcast` over the `Some` operands starting \
                 from `vec![]` (a 0-d shape broadcasts with anything). For every other op, \
                 `shape_rule(op, &operands, location)?` (given, in `model.rs`) returns the engine's shape or an error.",
            ],
            checks: &[
                CheckSpec::new("broadcast_follows_the_rules"),
                CheckSpec::new("propagates_every_node"),
                CheckSpec::new("propagates_new_input_shapes"),
                CheckSpec::new("rejects_bad_input_shapes"),
            ],
            forbidden: &[
                Forbidden {
                    path: "broadcast_shapes",
                    everywhere: true,
                    why: "this exercise asks you to write broadcasting yourself",
                },
                Forbidden {
                    path: "infer_shape",
                    everywhere: true,
                    why: "the engine's shape rule already broadcasts; use `shape_rule` (given) for the ops you do not write yourself",
                },
            ],
        },
        Exercise {
            name: "dead_code",
            file: "src/dead_code.rs",
            section: "dead_code",
            stretch: false,
            hints: &[
                "First find the live nodes: mark the outputs, then walk the nodes backwards (`graph.ids()` collected \
                 into a Vec, reversed) and mark the inputs (`node.inputs()`) of every live node.",
                "Then build a new graph, with a `Vec<Option<NodeId>>` mapping old ids to new. First every \
                 placeholder at once: `pass.add_placeholders_like(graph)` returns the new ids in the order of \
                 `graph.placeholders()`, and keeps symbolic sizes (`f32[s0, 8]`) symbolic. Then one forward walk \
                 adds a call only if live, with its `Arg::Node`s mapped to the new ids.",
                "`add_call(op.clone(), args, location)` needs a location: `node.location.unwrap_or(SourceLocation::\
                 caller())`. Finish with `set_outputs` on the mapped output ids.",
            ],
            checks: &[
                CheckSpec::new("removes_unused_nodes"),
                CheckSpec::new("dead_code_keeps_outputs_on_random_graphs"),
            ],
            forbidden: &[],
        },
        Exercise {
            name: "cse",
            file: "src/cse.rs",
            section: "cse",
            stretch: true,
            hints: &[
                "Walk forward building a new graph, as in `dead_code` (placeholders first, with \
                 `add_placeholders_like`), with a map from old ids to new ids. Two calls are the same expression when they have the same op and the same arguments *after* mapping: that is \
                 how a repeat of a repeat is found.",
                "`Op` and `Arg` are `Eq + Hash`, so a `HashMap<(Op, Vec<Arg>), NodeId>` finds an earlier node with \
                 the same key; map the repeat's old id to it instead of adding a node.",
            ],
            checks: &[
                CheckSpec::new("merges_repeated_expressions"),
                CheckSpec::new("cse_keeps_outputs_on_random_graphs"),
            ],
            forbidden: &[],
        },
    ],
};
