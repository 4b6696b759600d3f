//! Phase 2 (capture): everything the grader knows about the phase, declared once (see
//! `grader_harness::declare`): its exercises, their hints and book sections, the checks grading
//! each one, named by their functions in `src/checks/`, and the mistakes those checks must catch.

use grader_harness::{Exercise, Forbidden, Mutant, Phase};

/// Phase 2: reading what capture produces, shape propagation and graph passes.
pub const PHASE: Phase = Phase {
    name: "phase2",
    title: "Graph capture",
    exercises_dir: "exercises/phase2-capture",
    solutions_dir: "solutions/phase2-capture",
    runner_package: env!("CARGO_PKG_NAME"),
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
            checks: crate::checks![
                explain_report::summarizes_one_graph,
                explain_report::summarizes_graphs_and_breaks,
                explain_report::summarizes_breaks_at_the_edges,
            ],
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
            checks: crate::checks![
                line_table::groups_the_captured_graph,
                line_table::groups_the_decomposed_graph,
                line_table::groups_random_graphs,
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
                 `shape_rule(op, &operands, location)?` (given: `crate::model::shape_rule`) returns the engine's shape or an error.",
            ],
            checks: crate::checks![
                shape_prop::broadcast_follows_the_rules,
                shape_prop::propagates_every_node,
                shape_prop::propagates_new_input_shapes,
                shape_prop::rejects_bad_input_shapes,
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
            checks: crate::checks![
                dead_code::removes_unused_nodes,
                dead_code::dead_code_keeps_outputs_on_random_graphs,
            ],
            forbidden: &[],
        },
        Exercise {
            name: "recompiles",
            file: "src/recompiles.rs",
            section: "recompiles",
            stretch: false,
            hints: &[
                "Keep what the cache keeps: the graphs compiled so far, each with its dtype and, for each size of \
                 the input, either a constant or a symbol. A call hits if some graph's guards accept it. Run the \
                 scratch example with `ENGINE_LOGS=recompiles,guards` on calls of your own and read, for each new \
                 graph, which sizes became symbols, and its `specialized` and `unified` lines.",
                "Which sizes a new graph *tries* to make symbols depends only on the calls that compiled before it: \
                 try a call that changes two sizes at once, and one that changes a size and the dtype together, \
                 and read the `automatic dynamic shapes` lines. What then becomes of a marked size depends on its \
                 value in the call being compiled, and on the body.",
                "For each body, ask what each op needs of its operands' sizes: a reduction drops one, a matmul \
                 needs its inner sizes equal, broadcasting needs two sizes equal unless one of them is 1. A symbol \
                 that must equal a constant is specialized (the graph fits that size only); two symbols that must be \
                 equal become one. Write down the input's sizes in each graph, and the guards follow.",
            ],
            checks: crate::checks![recompiles::predictions_match_the_engine],
            // The cache, and the symbolic sizes it decides with: each of these items would tell which
            // sizes become symbols, which the body's ops specialize or unify, or which calls a graph's
            // guards accept. (Copying or reading symbols, `add_placeholders_like` or `symbols()`, needs a
            // graph that one of them made.)
            forbidden: &[
                Forbidden {
                    path: "dynamo::compile",
                    everywhere: false,
                    why: "this exercise asks you to predict the cache, not to run it (experiment in the scratch \
                          example instead)",
                },
                Forbidden {
                    path: ".with_dynamic_dims",
                    everywhere: true,
                    why: "this exercise asks you to work out which sizes become symbols and what the body's ops \
                          make of them, not to have the engine re-trace the body with symbolic sizes (experiment \
                          in the scratch example instead)",
                },
                Forbidden {
                    path: ".dynamic_placeholder",
                    everywhere: true,
                    why: "this exercise asks you to work out what the body's ops make of a symbolic size, not to \
                          trace the body on an input the engine made symbolic (experiment in the scratch example \
                          instead)",
                },
                Forbidden {
                    path: ".add_dynamic_placeholder",
                    everywhere: true,
                    why: "this exercise asks you to work out which marked sizes become symbols, not to have the \
                          engine make them (experiment in the scratch example instead)",
                },
                Forbidden {
                    path: ".bind_symbols",
                    everywhere: true,
                    why: "this exercise asks you to work out which calls a graph's guards accept, not to have the \
                          engine check its size guards (experiment in the scratch example instead)",
                },
            ],
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
            checks: crate::checks![cse::merges_repeated_expressions, cse::cse_keeps_outputs_on_random_graphs],
            forbidden: &[],
        },
    ],
    mutants: MUTANTS,
};

/// Deliberately wrong variants of the solutions, and the checks that catch each one.
const MUTANTS: &[Mutant] = &[
    Mutant::new(
        "recompiles: no recompile limit",
        "src/recompiles.rs",
        "} else if graphs.len() >= limit {",
        "} else if graphs.len() >= usize::MAX {",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: a graph of another dtype fits",
        "src/recompiles.rs",
        "*dtype == call.dtype && accepts(",
        "accepts(",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: a compile for a new dtype marks no size",
        "src/recompiles.rs",
        "            marked.extend((0..call.shape.len()).filter(|&d| first[d] != call.shape[d]));\n",
        "            if graphs.iter().any(|(dtype, _)| *dtype == call.dtype) {\n                marked.extend((0..call.shape.len()).filter(|&d| first[d] != call.shape[d]));\n            }\n",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: only the first size that changed is marked",
        "src/recompiles.rs",
        ".filter(|&d| first[d] != call.shape[d]));",
        ".filter(|&d| first[d] != call.shape[d]).take(1));",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: every size is marked at the first recompile",
        "src/recompiles.rs",
        ".filter(|&d| first[d] != call.shape[d]));",
        ".filter(|_| !graphs.is_empty()));",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: a marked size of 1 becomes a symbol",
        "src/recompiles.rs",
        "if marked.contains(&d) && shape[d] >= 2 {",
        "if marked.contains(&d) {",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: the body's ops constrain no symbol",
        "src/recompiles.rs",
        "        match body {\n",
        "        match Body::SumLast {\n",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: the bias leaves the last size a symbol",
        "src/recompiles.rs",
        "Body::AddBias => sizes[last] = Size::Fixed(shape[last]),",
        "Body::AddBias => {}",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: x @ x^T ties its two sizes like x + x^T",
        "src/recompiles.rs",
        "            Body::SumLast | Body::Gram => {}\n",
        "            Body::SumLast => {}\n            Body::Gram => sizes[last] = sizes[last - 1],\n",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: two tied symbols are specialized, not unified",
        "src/recompiles.rs",
        "                (Size::Symbol(a), Size::Symbol(_)) => sizes[last] = Size::Symbol(a),\n",
        "",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: a symbol tied to a constant stays a symbol",
        "src/recompiles.rs",
        "                _ => {\n                    sizes[last - 1] = Size::Fixed(shape[last - 1]);\n                    sizes[last] = Size::Fixed(shape[last]);\n                }\n",
        "                _ => {}\n",
    )
    .fails(crate::check_ids![recompiles::predictions_match_the_engine]),
    Mutant::new(
        "recompiles: the engine re-traces the body with the marked sizes symbolic",
        "src/recompiles.rs",
        "    fn trace(body: Body, shape: &[usize], marked: &BTreeSet<usize>) -> Vec<Size> {\n",
        "    fn trace(body: Body, shape: &[usize], marked: &BTreeSet<usize>) -> Vec<Size> {\n        \
         let bias = Tensor::ones(&[BIAS]);\n        \
         let traced = engine::fx::trace(&[Tensor::zeros(shape)], |xs| Ok(vec![body.run(&xs[0], &bias)?]));\n        \
         let marked_dims: Vec<usize> = marked.iter().copied().collect();\n        \
         if let Ok(graph) = traced.and_then(|t| t.graph.with_dynamic_dims(&[marked_dims])) {\n            \
         let dims = graph.node(graph.placeholders()[0]).sym_shape.dims().to_vec();\n            \
         return (0..dims.len())\n                \
         .map(|d| match dims[d].as_constant() {\n                    \
         Some(n) => Size::Fixed(n),\n                    \
         None => Size::Symbol(dims.iter().position(|s| *s == dims[d]).unwrap_or(d)),\n                \
         })\n                \
         .collect();\n        \
         }\n",
    )
    .refused(),
    Mutant::new(
        "recompiles: the body traced on an input the engine makes symbolic",
        "src/recompiles.rs",
        "    fn trace(body: Body, shape: &[usize], marked: &BTreeSet<usize>) -> Vec<Size> {\n",
        "    fn trace(body: Body, shape: &[usize], marked: &BTreeSet<usize>) -> Vec<Size> {\n        \
         let (bias, strides) = (Tensor::ones(&[BIAS]), engine::layout::contiguous_strides(shape));\n        \
         let (tracer, marked_dims) = (engine::fx::proxy::Tracer::new(), marked.iter().copied().collect::<Vec<_>>());\n        \
         let x = tracer.dynamic_placeholder(\"x\", Tensor::zeros(shape).meta(), strides, &marked_dims);\n        \
         if let Ok(traced) = body.run(&x, &bias).and_then(|y| tracer.finish(&[y])) {\n            \
         let dims = traced.graph.node(traced.graph.placeholders()[0]).sym_shape.dims().to_vec();\n            \
         return (0..dims.len())\n                \
         .map(|d| match dims[d].as_constant() {\n                    \
         Some(n) => Size::Fixed(n),\n                    \
         None => Size::Symbol(dims.iter().position(|s| *s == dims[d]).unwrap_or(d)),\n                \
         })\n                \
         .collect();\n        \
         }\n",
    )
    .refused(),
    Mutant::new(
        "recompiles: the engine's placeholder decides which marked sizes are symbols",
        "src/recompiles.rs",
        "        let mut sizes: Vec<Size> = (0..shape.len())\n            \
         .map(|d| if marked.contains(&d) && shape[d] >= 2 { Size::Symbol(d) } else { Size::Fixed(shape[d]) })\n            \
         .collect();\n",
        "        let (mut graph, strides) = (engine::fx::Graph::new(), engine::layout::contiguous_strides(shape));\n        \
         let marked_dims: Vec<usize> = marked.iter().copied().collect();\n        \
         let x = graph.add_dynamic_placeholder(\"x\", Tensor::zeros(shape).meta(), strides, &marked_dims);\n        \
         let dims = graph.node(x).sym_shape.dims().to_vec();\n        \
         let mut sizes: Vec<Size> = (0..shape.len())\n            \
         .map(|d| if dims[d].is_static() { Size::Fixed(shape[d]) } else { Size::Symbol(d) })\n            \
         .collect();\n",
    )
    .refused(),
    Mutant::new(
        "recompiles: the engine's size guards decide which graph a call hits",
        "src/recompiles.rs",
        "    for call in calls {\n        \
         if graphs.iter().any(|(dtype, sizes)| *dtype == call.dtype && accepts(sizes, &call.shape)) {\n            \
         outcomes.push(Outcome::Hit);\n        \
         } else if graphs.len() >= limit {\n            \
         outcomes.push(Outcome::Eager);\n        \
         } else {\n            \
         let first = *first.get_or_insert(&call.shape);\n            \
         marked.extend((0..call.shape.len()).filter(|&d| first[d] != call.shape[d]));\n",
        "    let fits = |graph: &engine::fx::Graph, shape: &[usize]| {\n        \
         let captured = graph.placeholders()[1..].iter().map(|&p| graph.node(p).meta.shape.as_slice());\n        \
         graph.bind_symbols(&[shape].into_iter().chain(captured).collect::<Vec<_>>()).is_ok()\n    \
         };\n    \
         let (bias, mut traced) = (Tensor::ones(&[BIAS]), Vec::<engine::fx::Graph>::new());\n    \
         for call in calls {\n        \
         if graphs.iter().zip(&traced).any(|((dtype, _), graph)| *dtype == call.dtype && fits(graph, &call.shape)) {\n            \
         outcomes.push(Outcome::Hit);\n        \
         } else if graphs.len() >= limit {\n            \
         outcomes.push(Outcome::Eager);\n        \
         } else {\n            \
         let first = *first.get_or_insert(&call.shape);\n            \
         marked.extend((0..call.shape.len()).filter(|&d| first[d] != call.shape[d]));\n            \
         let marked_dims: Vec<usize> = marked.iter().copied().collect();\n            \
         let graph = engine::fx::trace(&[Tensor::zeros(&call.shape)], |xs| Ok(vec![body.run(&xs[0], &bias)?]))\n                \
         .and_then(|t| t.graph.with_dynamic_dims(&[marked_dims]));\n            \
         traced.push(graph.expect(\"the body traces\"));\n",
    )
    .refused(),
    Mutant::new(
        "recompiles: predicts with the engine's cache",
        "src/recompiles.rs",
        "pub fn predict(body: Body, calls: &[Call], limit: usize) -> Vec<Outcome> {\n",
        "pub fn predict(body: Body, calls: &[Call], limit: usize) -> Vec<Outcome> {\n    let _ = engine::dynamo::compile(|x: engine::Tensor| x.relu()).recompile_limit(limit);\n",
    )
    .refused(),
    Mutant::new(
        "summarize counts graphs as breaks",
        "src/explain_report.rs",
        "break_count: report.breaks.len(),",
        "break_count: report.graphs.len(),",
    )
    .fails(crate::check_ids![
        explain_report::summarizes_one_graph,
        explain_report::summarizes_graphs_and_breaks,
        explain_report::summarizes_breaks_at_the_edges,
    ]),
    Mutant::new(
        "summarize counts a break between every two graphs",
        "src/explain_report.rs",
        "break_count: report.breaks.len(),",
        "break_count: report.graphs.len().saturating_sub(1),",
    )
    .fails(crate::check_ids![explain_report::summarizes_breaks_at_the_edges])
    .may_fail(crate::check_ids![explain_report::summarizes_graphs_and_breaks]),
    Mutant::new(
        "summarize assumes a first graph",
        "src/explain_report.rs",
        "report.graphs.first().map(",
        "Some(&report.graphs[0]).map(",
    )
    .fails(crate::check_ids![explain_report::summarizes_breaks_at_the_edges]),
    Mutant::new(
        "broadcast lets a size of 0 or 1 take the other size",
        "src/shape_prop.rs",
        "            (1, y) => Ok(y),\n            (x, 1) => Ok(x),\n",
        "            (x, y) if x.min(y) <= 1 => Ok(x.max(y)),\n",
    )
    .fails(crate::check_ids![shape_prop::broadcast_follows_the_rules]),
    Mutant::new(
        "summarize names the last graph's inputs",
        "src/explain_report.rs",
        "report.graphs.first()",
        "report.graphs.last()",
    )
    .fails(crate::check_ids![explain_report::summarizes_graphs_and_breaks]),
    Mutant::new(
        "summarize counts the first graph's ops only",
        "src/explain_report.rs",
        "op_count: ops.iter().map(Vec::len).sum(),",
        "op_count: ops.first().map_or(0, Vec::len),",
    )
    .fails(crate::check_ids![explain_report::summarizes_graphs_and_breaks]),
    Mutant::new(
        "line_table merges only consecutive nodes of a line",
        "src/line_table.rs",
        "rows.iter_mut().find(|row| row.location == location)",
        "rows.last_mut().filter(|row| row.location == location)",
    )
    .fails(crate::check_ids![line_table::groups_random_graphs])
    .may_fail(crate::check_ids![line_table::groups_the_captured_graph, line_table::groups_the_decomposed_graph]),
    Mutant::new(
        "line_table groups by file, not by line",
        "src/line_table.rs",
        "let location = location.short();",
        "let location = location.file().to_string();",
    )
    .fails(crate::check_ids![line_table::groups_the_captured_graph, line_table::groups_the_decomposed_graph, line_table::groups_random_graphs]),
    Mutant::new(
        "broadcast takes the larger of two different sizes",
        "src/shape_prop.rs",
        "(x, y) => Err(format!(",
        "(x, y) if x != y => Ok(x.max(y)),\n            (x, y) => Err(format!(",
    )
    .fails(crate::check_ids![shape_prop::broadcast_follows_the_rules]),
    Mutant::new(
        "broadcast aligns shapes at their first dimension",
        "src/shape_prop.rs",
        "let size = |s: &[usize], i: usize| if i < rank - s.len() { 1 } else { s[i - (rank - s.len())] };",
        "let size = |s: &[usize], i: usize| s.get(i).copied().unwrap_or(1);",
    )
    .fails(crate::check_ids![shape_prop::broadcast_follows_the_rules, shape_prop::propagates_every_node]),
    Mutant::new(
        "propagate reads the traced shapes, not the given ones",
        "src/shape_prop.rs",
        r#"NodeKind::Placeholder { .. } => next_input.next().expect("counted above").clone(),"#,
        "NodeKind::Placeholder { .. } => node.meta.shape.clone(),",
    )
    .fails(crate::check_ids![shape_prop::propagates_new_input_shapes, shape_prop::rejects_bad_input_shapes]),
    Mutant::new(
        "propagate gives a pointwise op its first operand's shape",
        "src/shape_prop.rs",
        ".try_fold(Vec::new(), |acc, s| broadcast(&acc, s))",
        ".try_fold(Vec::new(), |acc, s| if acc.is_empty() { Ok(s.to_vec()) } else { Ok(acc) })",
    )
    .fails(crate::check_ids![shape_prop::propagates_every_node]),
    Mutant::new(
        "dead_code keeps every node",
        "src/dead_code.rs",
        "NodeKind::Call { op, args } if live[id.index()] => {",
        "NodeKind::Call { op, args } => {",
    )
    .fails(crate::check_ids![dead_code::removes_unused_nodes, dead_code::dead_code_keeps_outputs_on_random_graphs]),
    Mutant::new(
        "dead_code sweeps forwards, missing inputs of inputs",
        "src/dead_code.rs",
        "for &id in ids.iter().rev() {",
        "for &id in ids.iter() {",
    )
    .fails(crate::check_ids![dead_code::removes_unused_nodes, dead_code::dead_code_keeps_outputs_on_random_graphs]),
    Mutant::new(
        "cse merges calls of one op whatever their arguments",
        "src/cse.rs",
        "let key = (op.clone(), args.clone());",
        "let key = (op.clone(), Vec::new());",
    )
    .fails(crate::check_ids![cse::cse_keeps_outputs_on_random_graphs]),
    Mutant::new(
        "cse never finds an earlier node",
        "src/cse.rs",
        "match seen.get(&key) {",
        "match None::<&NodeId> {",
    )
    .fails(crate::check_ids![cse::merges_repeated_expressions, cse::cse_keeps_outputs_on_random_graphs]),
    Mutant::new(
        "dead_code copies the inputs with static sizes",
        "src/dead_code.rs",
        "pass.add_placeholders_like(graph)",
        "graph.placeholders().iter().map(|&p| { let n = graph.node(p); let NodeKind::Placeholder { strides } = &n.kind else { unreachable!() }; pass.add_placeholder(&n.name, n.meta.clone(), strides.clone()) }).collect::<Vec<_>>()",
    )
    .fails(crate::check_ids![dead_code::dead_code_keeps_outputs_on_random_graphs]),
    Mutant::new(
        "summarize takes the report's own op count",
        "src/explain_report.rs",
        "op_count: ops.iter().map(Vec::len).sum(),",
        "op_count: report.op_count(),",
    )
    .refused(),
    Mutant::new(
        "propagate asks the engine's rule for every op",
        "src/shape_prop.rs",
        "_ => shape_rule(op, &operands, location)?,",
        "_ => op.infer_shape(&operands, location)?,",
    )
    .refused(),
];
