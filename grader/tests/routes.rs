//! Routes around the grader, built as a learner would build them (changes only under
//! `exercises/*/src`, in a scratch copy of this workbook), each of which passed its check on the
//! grader as it was before the defences it now meets, or would pass it were the judgment left to
//! the learner's process, and must fail now:
//!
//! - reading the solutions at build time: `#[path]` made by a macro, `include!` of a file the
//!   audit never read, a symbolic link to a directory, assembler's `.incbin`;
//! - handing an exercise to the engine item that answers it, however it is spelled or reached: a
//!   module alias, an item named in another file, a macro, or another public item doing the same
//!   job (the fusion rule through a config value, the C printer through the renderer,
//!   broadcasting through matmul's shape rule);
//! - measurements made up rather than measured, and a timer that reads the seed from its own
//!   command line; a comparison of two functions answered without timing them, or from one call
//!   of each;
//! - a pass record with the answers written by the learner's code;
//! - a partitioned backend that compiles its partitions but runs the whole graph eagerly;
//! - answers that follow every rule but are not the best, which the learner's process (its runner
//!   built without the count of the best) cannot tell from right ones, and only the judge fails:
//!   a schedule in program order, a plan that saves everything the backward reads, a partition per
//!   supported node;
//! - the given naive block made one graph as the speed challenge's answer;
//! - on a GPU, a kernel that skips its work in some of the timed runs.
//!
//! The sandbox's routes (system calls through the 32-bit entry, datagrams, `/dev/shm`) are in
//! `isolation.rs`. The scratch copy shares this workbook's engine, models and harness (by path)
//! and target directory, so only its own crates are built; the tests take turns with it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use grader::report::{CheckReport, PhaseReport};
use grader::runners::Runners;
use grader::workbook::Workbook;
use grader_harness::{Exercise, Phase, Status, Subject};

/// The scratch copy of the workbook: its root, and the files a route changed.
struct Scratch {
    root: PathBuf,
}

/// What a route puts in place of a file of the scratch copy's, relative to its root.
enum Put {
    /// A file with this text.
    Text(&'static str, String),
    /// A symbolic link to this target.
    Link(&'static str, &'static str),
}

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("grader/ has a parent").to_path_buf()
}

/// The scratch copy, made once per test run (into the target directory, where a later run finds
/// its builds fresh) and lent to one test at a time.
fn scratch() -> MutexGuard<'static, Scratch> {
    static SCRATCH: OnceLock<Mutex<Scratch>> = OnceLock::new();
    SCRATCH.get_or_init(|| Mutex::new(Scratch::make())).lock().unwrap_or_else(|e| e.into_inner())
}

impl Scratch {
    fn make() -> Scratch {
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).parent().expect("target/tmp").to_path_buf();
        let root = target.join("route-tests").join("workbook");
        let source = here();
        for dir in ["exercises", "solutions", "grader/checks"] {
            let to = root.join(dir);
            let _ = std::fs::remove_dir_all(&to);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            // `cp -a` keeps the files' times, so that a later run's build finds them fresh.
            let copied = Command::new("cp").arg("-a").arg(source.join(dir)).arg(&to).status().unwrap();
            assert!(copied.success(), "cannot copy {dir}");
        }
        std::fs::copy(source.join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
        let manifest = std::fs::read_to_string(source.join("Cargo.toml")).unwrap();
        let members = manifest.find("members = [").unwrap();
        let end = members + manifest[members..].find(']').unwrap() + 1;
        let mut manifest = format!(
            "{}members = [\"exercises/*\", \"solutions/*\", \"grader/checks/*\"]{}",
            &manifest[..members],
            &manifest[end..]
        );
        for shared in ["engine", "models", "grader/harness"] {
            let absolute = source.join(shared);
            manifest = manifest.replace(&format!("path = \"{shared}\""), &format!("path = \"{}\"", absolute.display()));
        }
        write_if_changed(&root.join("Cargo.toml"), &manifest);
        let config = format!("[build]\ntarget-dir = \"{}\"\n", target.display());
        write_if_changed(&root.join(".cargo/config.toml"), &config);
        Scratch { root }
    }

    /// Grades `exercises` of phase `name` with `puts` in place, then puts the files back.
    fn grade(&self, name: &str, exercises: &[&str], puts: Vec<Put>) -> PhaseReport {
        let kept: Vec<(PathBuf, Option<Vec<u8>>)> = puts
            .iter()
            .map(|put| {
                let path = self.root.join(match put {
                    Put::Text(path, _) | Put::Link(path, _) => path,
                });
                let old = std::fs::read(&path).ok().filter(|_| !path.is_symlink());
                (path, old)
            })
            .collect();
        for put in &puts {
            match put {
                Put::Text(path, text) => {
                    let path = self.root.join(path);
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(path, text).unwrap();
                }
                Put::Link(path, target) => {
                    let path = self.root.join(path);
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    let _ = std::fs::remove_file(&path);
                    std::os::unix::fs::symlink(target, path).unwrap();
                }
            }
        }
        let report = self.grade_as_is(name, exercises);
        for (path, old) in kept.into_iter().rev() {
            let _ = std::fs::remove_file(&path);
            if let Some(bytes) = old {
                std::fs::write(&path, bytes).unwrap();
            }
        }
        report
    }

    fn grade_as_is(&self, name: &str, exercises: &[&str]) -> PhaseReport {
        let full = grader::phases::select(name).unwrap()[0];
        let phase = only(full, exercises);
        let workbook = Workbook::find(Some(&self.root)).unwrap();
        let runners = Runners::Cargo { workbook: workbook.clone(), release: false };
        let launcher = PathBuf::from(env!("CARGO_BIN_EXE_grader"));
        let cache = self.root.join(".grader/learner-cache");
        let seed = grader::verdict::fresh_seed();
        grader::grade::phase(&runners, Some(&workbook), phase, Subject::Exercises, seed, &launcher, &cache)
    }

    /// The text of a file of the scratch copy (a solution, to make a route from).
    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.root.join(path)).unwrap()
    }
}

fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// `phase` with only the exercises named.
fn only(phase: &'static Phase, names: &[&str]) -> &'static Phase {
    let exercises: Vec<Exercise> = phase
        .exercises
        .iter()
        .filter(|e| names.contains(&e.name))
        .map(|e| Exercise {
            name: e.name,
            file: e.file,
            section: e.section,
            stretch: e.stretch,
            hints: e.hints,
            checks: e.checks,
            forbidden: e.forbidden,
        })
        .collect();
    Box::leak(Box::new(Phase { exercises: Box::leak(exercises.into_boxed_slice()), ..*phase }))
}

fn check<'a>(report: &'a PhaseReport, id: &str) -> &'a CheckReport {
    report.checks.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("no check `{id}` in {report:#?}"))
}

/// Fails unless check `id` neither passed nor was skipped, and says `needle`.
fn caught(report: &PhaseReport, route: &str, id: &str, needle: &str) {
    let c = check(report, id);
    assert!(
        !matches!(c.status, Status::Pass | Status::Skipped) && c.message.contains(needle),
        "{route}: `{id}` is {} ({}), expected it to fail saying `{needle}`",
        c.status,
        c.message
    );
}

/// `text` with `insert` after its module's doc comment (where a macro must be defined, before its
/// uses).
fn after_module_docs(text: &str, insert: &str) -> String {
    let docs: usize = text.lines().take_while(|l| l.starts_with("//!")).map(|l| l.len() + 1).sum();
    format!("{}{insert}{}", &text[..docs], &text[docs..])
}

/// `text` with its function `name` renamed, so that a route can put its own in place.
fn renamed(text: &str, name: &str) -> String {
    text.replacen(&format!("pub fn {name}("), &format!("#[allow(dead_code)]\nfn {name}_as_solved("), 1)
}

/// The solution `solved` with the body of its function `name` (its `ANCHOR: solution` block) made
/// `body`: a learner's file whose other parts are solved and whose part `name` is the route. The
/// solution's helpers (its `ANCHOR: solution-only` block) stay when `helpers`, for the other parts
/// that call them.
fn answered(solved: &str, name: &str, body: &str, helpers: bool) -> String {
    let (start, end) = ("    // ANCHOR: solution\n", "    // ANCHOR_END: solution\n");
    let function = solved.find(&format!("pub fn {name}(")).unwrap_or_else(|| panic!("the solution has no `{name}`"));
    let from = function + solved[function..].find(start).expect("the function's solution is marked");
    let to = from + solved[from..].find(end).expect("and its end") + end.len();
    let text = format!("{}    {body}\n{}", &solved[..from], &solved[to..]);
    match (helpers, text.find("// ANCHOR: solution-only\n")) {
        (false, Some(from)) => {
            let end = "// ANCHOR_END: solution-only\n";
            let to = from + text[from..].find(end).expect("the helpers end") + end.len();
            format!("{}{}", &text[..from], &text[to..])
        }
        _ => text,
    }
}

/// Fails unless check `id` passed: the parts of a route's file that are solved are judged right.
fn passed(report: &PhaseReport, route: &str, id: &str) {
    let c = check(report, id);
    assert!(c.status == Status::Pass, "{route}: `{id}` is {} ({}), expected a pass", c.status, c.message);
}

const PHASE1_COMPARE: &str = "exercises/phase1-backends/src/compare.rs";

#[test]
fn the_build_reads_no_solution() {
    let scratch = scratch();
    let solved = scratch.read("solutions/phase1-backends/src/compare.rs");
    let routes: Vec<(&str, Vec<Put>)> = vec![
        (
            "a #[path] made by a macro, through cfg_attr and the macro's argument",
            vec![Put::Text(
                PHASE1_COMPARE,
                "macro_rules! from { ($($a:tt)*) => { #[cfg_attr(all(), $($a)*)] mod answer; }; }\n\
                 from!(path = \"../../../solutions/phase1-backends/src/compare.rs\");\npub use answer::*;\n"
                    .into(),
            )],
        ),
        (
            "include! through a macro, of a file the audit does not read",
            vec![
                Put::Text(
                    PHASE1_COMPARE,
                    "macro_rules! inc { ($m:ident, $f:literal) => { $m!($f); }; }\ninc!(include, \"answer.txt\");\n"
                        .into(),
                ),
                Put::Text(
                    "exercises/phase1-backends/src/answer.txt",
                    "#[path = \"../../../solutions/phase1-backends/src/compare.rs\"]\nmod answer;\npub use answer::*;\n"
                        .into(),
                ),
            ],
        ),
        (
            "a symbolic link to the solutions' directory",
            vec![
                Put::Text(PHASE1_COMPARE, "mod sol {\n    pub mod compare;\n}\npub use sol::compare::*;\n".into()),
                Put::Link("exercises/phase1-backends/src/compare/sol", "../../../../solutions/phase1-backends/src"),
            ],
        ),
        (
            "assembler that includes a solution's bytes",
            vec![Put::Text(
                PHASE1_COMPARE,
                format!(
                    "{solved}\ncore::arch::global_asm!(\".section .rodata\\n.incbin \\\"{}\\\"\");\n",
                    scratch.root.join("solutions/phase1-backends/src/compare.rs").display()
                ),
            )],
        ),
    ];
    for (route, puts) in routes {
        let report = scratch.grade("phase1", &["compare_backends"], puts);
        for id in ["reports_every_backend", "differences_are_measured"] {
            caught(&report, route, id, "does not compile");
        }
    }
}

#[test]
fn forbidden_items_trip_however_they_are_reached() {
    let scratch = scratch();
    let interpreter = scratch.read("solutions/phase1-backends/src/interpreter.rs");
    let alias = format!(
        "{}\nuse engine::fx as f;\n\npub fn interpret(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>> {{\n    \
         f::Interpreter::new(graph.clone()).run(inputs)\n}}\n",
        renamed(&interpreter, "interpret")
    );
    let report = scratch.grade(
        "phase1",
        &["interpreter"],
        vec![Put::Text("exercises/phase1-backends/src/interpreter.rs", alias)],
    );
    caught(&report, "a module alias", "runs_the_mlp_graph", "off limits");

    // `Eager` is refused by name in the interpreter's own file only: named in another, it ran.
    let lib = scratch.read("exercises/phase1-backends/src/lib.rs");
    let other_file = interpreter.replacen(
        "Ok(Box::new(move |inputs: &[Tensor]| interpret(&graph, inputs)))",
        "crate::helper::compile(&graph, _example_inputs)",
        1,
    );
    let report = scratch.grade(
        "phase1",
        &["interpreter"],
        vec![
            Put::Text("exercises/phase1-backends/src/lib.rs", format!("{lib}\nmod helper;\n")),
            Put::Text(
                "exercises/phase1-backends/src/helper.rs",
                "use engine::backends::{Backend, CompiledGraph, Eager};\n\
                 pub fn compile(graph: &engine::fx::Graph, inputs: &[engine::Tensor]) -> engine::Result<Box<dyn CompiledGraph>> {\n    \
                 Eager.compile(graph, inputs)\n}\n"
                    .into(),
            ),
            Put::Text("exercises/phase1-backends/src/interpreter.rs", other_file),
        ],
    );
    caught(&report, "an item named in another file", "backend_runs_compiled_functions", "off limits");

    let explain = scratch.read("solutions/phase2-capture/src/explain_report.rs").replacen(
        "op_count: ops.iter().map(Vec::len).sum(),",
        "op_count: via!(report, op_count),",
        1,
    );
    let explain = after_module_docs(&explain, "macro_rules! via { ($r:ident, $m:ident) => { $r.$m() }; }\n");
    let shapes = format!(
        "{}\n/// Broadcasting by matmul's shape rule: both shapes given a trailing 1 x 1 matrix.\n\
         pub fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {{\n    \
         let (ma, mb) = ([a, &[1, 1]].concat(), [b, &[1, 1]].concat());\n    \
         match shape_rule(&Op::Matmul, &[Some(&ma), Some(&mb)], engine::SourceLocation::caller()) {{\n        \
         Ok(mut out) => {{ out.truncate(out.len() - 2); Ok(out) }}\n        \
         Err(_) => Err(format!(\"shapes {{a:?}} and {{b:?}} do not broadcast\")),\n    }}\n}}\n",
        renamed(&scratch.read("solutions/phase2-capture/src/shape_prop.rs"), "broadcast")
    );
    let report = scratch.grade(
        "phase2",
        &["explain_report", "shape_propagation"],
        vec![
            Put::Text("exercises/phase2-capture/src/explain_report.rs", explain),
            Put::Text("exercises/phase2-capture/src/shape_prop.rs", shapes),
        ],
    );
    caught(&report, "a method called through macro_rules", "summarizes_one_graph", "off limits");
    caught(&report, "broadcasting through matmul's shape rule", "broadcast_follows_the_rules", "off limits");

    let fusion = format!(
        "{}\npub fn can_fuse(c: &FusionCandidate) -> Decision {{\n    (engine::inductor::Config::default().fusion)(c)\n}}\n",
        renamed(&scratch.read("solutions/phase4-codegen/src/fusion.rs"), "can_fuse")
    );
    let printer = format!(
        "{}\npub fn pointwise_c(kernel: &Kernel) -> String {{\n    use engine::inductor::codegen::Renderer as _;\n    \
         engine::inductor::codegen::CRenderer.kernel(kernel).source\n}}\n",
        renamed(&scratch.read("solutions/phase4-codegen/src/pointwise.rs"), "pointwise_c")
    );
    let report = scratch.grade(
        "phase4",
        &["can_fuse", "pointwise_c"],
        vec![
            Put::Text("exercises/phase4-codegen/src/fusion.rs", fusion),
            Put::Text("exercises/phase4-codegen/src/pointwise.rs", printer),
        ],
    );
    caught(&report, "the fusion rule through a config value", "decides_known_cases", "off limits");
    caught(&report, "the C printer through the renderer", "pointwise_c_matches_eager", "off limits");

    // The FP8 product handed to the engine's `scaled_mm` through macro_rules: the wire trips as it
    // is called, on the CPU (where it could not run anyway) as on a GPU.
    let fp8 = after_module_docs(
        &scratch.read("solutions/phase5-benchmarking/src/fp8.rs").replacen(
            "    let product = a.data.to_dtype(DType::F32)?",
            "    let one = Tensor::from_vec(vec![1.0], &[1])?;\n    \
             let _ = via!(a.data, scaled_mm, &b.data.t()?, &one, &one, DType::F32)?;\n    \
             let product = a.data.to_dtype(DType::F32)?",
            1,
        ),
        "macro_rules! via { ($t:expr, $m:ident, $($arg:expr),*) => { $t.$m($($arg),*) }; }\n",
    );
    let report =
        scratch.grade("phase5", &["fp8_scales"], vec![Put::Text("exercises/phase5-benchmarking/src/fp8.rs", fp8)]);
    caught(&report, "scaled_mm through macro_rules", "product_applies_the_scales", "off limits");
}

/// Phase 2's `recompiles` answered by the engine rather than predicted: its cache is wired, and so
/// are the symbolic sizes it decides with. The first three routes hand the decisions the exercise
/// asks for to the engine's own symbolic machinery (which sizes become symbols; what the body's
/// ops specialize or unify); the fourth shows the size guards wired too, on the only graphs a
/// route can still reach them with, static ones. Reached through macro_rules, which the audit
/// cannot read, each trips its wire as it runs.
#[test]
fn the_recompile_cache_is_predicted_not_asked() {
    let scratch = scratch();
    let solved = scratch.read("solutions/phase2-capture/src/recompiles.rs");
    let via = "macro_rules! via { ($t:expr, $m:ident, $($arg:expr),*) => { $t.$m($($arg),*) }; }\n";
    let trace = "    fn trace(body: Body, shape: &[usize], marked: &BTreeSet<usize>) -> Vec<Size> {\n";
    // The sizes of the traced input: a constant, or the first dim with the same symbol.
    let read_out = "            let dims = graph.node(graph.placeholders()[0]).sym_shape.dims().to_vec();\n            \
                    return (0..dims.len()).map(|d| match dims[d].as_constant() {\n                \
                    Some(n) => Size::Fixed(n),\n                \
                    None => Size::Symbol(dims.iter().position(|s| *s == dims[d]).unwrap_or(d)),\n            \
                    }).collect();\n        }\n";
    let sizes = "        let mut sizes: Vec<Size> = (0..shape.len())\n            \
                 .map(|d| if marked.contains(&d) && shape[d] >= 2 { Size::Symbol(d) } else { Size::Fixed(shape[d]) })\n";
    let routes = [
        (
            "the body re-traced by the engine with the marked sizes symbolic",
            trace,
            format!(
                "{trace}        let bias = Tensor::ones(&[BIAS]);\n        \
                 let traced = engine::fx::trace(&[Tensor::zeros(shape)], |xs| Ok(vec![body.run(&xs[0], &bias)?]));\n        \
                 let marked_dims: Vec<usize> = marked.iter().copied().collect();\n        \
                 if let Ok(graph) = traced.and_then(|t| via!(t.graph, with_dynamic_dims, &[marked_dims])) {{\n{read_out}"
            ),
            "`.with_dynamic_dims`",
        ),
        (
            "the body traced on an input the engine made symbolic",
            trace,
            format!(
                "{trace}        let (bias, strides) = (Tensor::ones(&[BIAS]), engine::layout::contiguous_strides(shape));\n        \
                 let (tracer, marked_dims) = (engine::fx::proxy::Tracer::new(), marked.iter().copied().collect::<Vec<_>>());\n        \
                 let x = via!(tracer, dynamic_placeholder, \"x\", Tensor::zeros(shape).meta(), strides, &marked_dims);\n        \
                 if let Ok(graph) = body.run(&x, &bias).and_then(|y| tracer.finish(&[y])).map(|t| t.graph) {{\n{read_out}"
            ),
            "`.dynamic_placeholder`",
        ),
        (
            "the engine's placeholder deciding which marked sizes are symbols",
            sizes,
            "        let (mut graph, strides) = (engine::fx::Graph::new(), engine::layout::contiguous_strides(shape));\n        \
             let marked_dims: Vec<usize> = marked.iter().copied().collect();\n        \
             let x = via!(graph, add_dynamic_placeholder, \"x\", Tensor::zeros(shape).meta(), strides, &marked_dims);\n        \
             let dims = graph.node(x).sym_shape.dims().to_vec();\n        \
             let mut sizes: Vec<Size> = (0..shape.len())\n            \
             .map(|d| if dims[d].is_static() { Size::Fixed(shape[d]) } else { Size::Symbol(d) })\n"
                .to_string(),
            "`.add_dynamic_placeholder`",
        ),
        (
            "the engine's size guards, checked on a traced graph",
            trace,
            format!(
                "{trace}        if let Ok(t) = engine::fx::trace(&[Tensor::zeros(shape)], |xs| Ok(vec![xs[0].relu()?])) {{\n            \
                 let _ = via!(t.graph, bind_symbols, &[shape]);\n        }}\n"
            ),
            "`.bind_symbols`",
        ),
    ];
    for (route, find, replace, needle) in routes {
        assert!(solved.contains(find), "{route}: the solution changed");
        let source = after_module_docs(&solved.replacen(find, &replace, 1), via);
        let report = scratch.grade(
            "phase2",
            &["recompiles"],
            vec![Put::Text("exercises/phase2-capture/src/recompiles.rs", source)],
        );
        caught(&report, route, "predictions_match_the_engine", needle);
    }

    // The process-wide counters, read at the first prediction: had the check observed the
    // sequence first, its calls, compiles, hits and eager runs would show there.
    let source = solved.replacen(
        "    // ANCHOR: solution\n",
        "    if engine::dynamo::counters().calls == 0 {\n        return Vec::new();\n    }\n    // ANCHOR: solution\n",
        1,
    );
    let report =
        scratch.grade("phase2", &["recompiles"], vec![Put::Text("exercises/phase2-capture/src/recompiles.rs", source)]);
    caught(&report, "an answer given once the check has observed it", "predictions_match_the_engine", "outcomes");
}

#[test]
fn measurements_are_judged_against_secret_work() {
    let scratch = scratch();
    // Compiles and calls as asked (so the counts are right), but times nothing.
    let latency = format!(
        "{}\npub fn measure_latency(backend: Box<dyn Backend>, device: Device, steady_calls: usize) -> Result<Latency> {{\n    \
         let (mlp, x) = workload(device, BATCH)?;\n    let name = backend.name().to_string();\n    \
         let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(backend);\n    \
         for _ in 0..=steady_calls {{ compiled.call(&x)?.to_vec()?; }}\n    \
         let steady = vec![Duration::from_millis(10); steady_calls];\n    \
         Ok(Latency {{ backend: name, first_call: Duration::from_millis(400), steady_median: median(&steady), steady, stats: compiled.stats() }})\n}}\n\
         #[allow(dead_code)]\nfn unused() -> Instant {{ Instant::now() }}\n",
        renamed(&scratch.read("solutions/phase1-backends/src/latency.rs"), "measure_latency")
    );
    let report =
        scratch.grade("phase1", &["latency"], vec![Put::Text("exercises/phase1-backends/src/latency.rs", latency)]);
    caught(&report, "phase 1's latency, made up", "timings_are_real", "you measured");

    let break_cost = format!(
        "{}\npub fn measure_break_cost(\n    whole: impl Fn(Tensor) -> Result<Tensor>,\n    split: impl Fn(Tensor) -> Result<Tensor>,\n    \
         x: &Tensor,\n    calls: usize,\n) -> Result<BreakCost> {{\n    \
         let graphs_whole = dynamo::explain(&whole).call(x)?.graph_count();\n    \
         let graphs_split = dynamo::explain(&split).call(x)?.graph_count();\n    \
         let (whole, split) = (dynamo::compile(&whole), dynamo::compile(&split));\n    \
         for _ in 0..=calls {{ whole.call(x)?; split.call(x)?; }}\n    \
         Ok(BreakCost {{ graphs_whole, graphs_split, whole: Duration::from_millis(1), split: Duration::from_millis(10) }})\n}}\n\
         #[allow(dead_code)]\nfn unused() -> Instant {{ Instant::now() }}\n",
        renamed(&scratch.read("solutions/phase3-graph-breaks/src/break_cost.rs"), "measure_break_cost")
    );
    let report = scratch.grade(
        "phase3",
        &["break_cost"],
        vec![Put::Text("exercises/phase3-graph-breaks/src/break_cost.rs", break_cost)],
    );
    caught(&report, "phase 3's break cost, made up", "times_are_medians_of_real_calls", "you measured");

    // The timer check's work lasted 2 ms plus 125 µs for each unit of the seed modulo 16, and the
    // seed was on the runner's command line.
    let timer = format!(
        "{}\npub fn do_bench(_device: Device, config: &TimerConfig, mut f: impl FnMut() -> Result<()>) -> Result<Measurement> {{\n    \
         let args: Vec<String> = std::env::args().collect();\n    \
         let seed: u64 = args.iter().position(|a| a == \"--seed\").and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(0);\n    \
         let wait = (2000 + (seed % 16) * 125) as f64 * 1e-6;\n    \
         let n = 2 * config.round;\n    for _ in 0..config.warmup + n {{ f()?; }}\n    \
         Ok(Measurement {{ samples: vec![wait; n] }})\n}}\n\
         #[allow(dead_code)]\nfn unused(device: Device) -> Result<(Stamp, CacheFlush)> {{ Ok((Stamp::new(device)?, CacheFlush::new(device))) }}\n",
        renamed(&scratch.read("solutions/phase5-benchmarking/src/timer.rs"), "do_bench")
    );
    let report =
        scratch.grade("phase5", &["timer"], vec![Put::Text("exercises/phase5-benchmarking/src/timer.rs", timer)]);
    caught(&report, "phase 5's timer, reading the seed", "times_known_work", "");
}

#[test]
fn comparisons_are_judged_against_secret_costs() {
    let scratch = scratch();
    let solved = scratch.read("solutions/phase5-benchmarking/src/compare.rs");
    let routes = [
        (
            "phase 5's compare, a fixed answer that calls nothing",
            "pub fn compare(_device: Device, _budget: Duration, _a: impl FnMut() -> Result<()>, \
             _b: impl FnMut() -> Result<()>) -> Result<Comparison> {\n    \
             Ok(Comparison { verdict: Verdict::Same, ratio: 1.0 })\n}\n",
        ),
        (
            "phase 5's compare, decided from one call of each",
            "pub fn compare(device: Device, _budget: Duration, mut a: impl FnMut() -> Result<()>, \
             mut b: impl FnMut() -> Result<()>) -> Result<Comparison> {\n    \
             let ratio = time_call(device, &mut a)? / time_call(device, &mut b)?;\n    \
             let verdict = if ratio > 1.025 { Verdict::Slower } else if ratio < 1.0 / 1.025 { Verdict::Faster } else { Verdict::Same };\n    \
             Ok(Comparison { verdict, ratio })\n}\n",
        ),
    ];
    for (route, compare) in routes {
        let text = format!("{}\n{compare}", renamed(&solved, "compare"));
        let report = scratch.grade(
            "phase5",
            &["compare"],
            vec![Put::Text("exercises/phase5-benchmarking/src/compare.rs", text)],
        );
        caught(&report, route, "verdicts_match_secret_costs", "you said");
    }
}

#[test]
fn answers_cannot_be_written_in_advance() {
    let scratch = scratch();
    // The answers the check records for every seed, written by the learner's code as a pass.
    let forged = format!(
        "{}\npub fn compare_backends(_mlp: &Mlp, _x: &Tensor, _backends: Vec<Box<dyn Backend>>) -> Result<Vec<BackendDiff>> {{\n    \
         let args: Vec<String> = std::env::args().collect();\n    \
         let path = args.iter().position(|a| a == \"--result\").map(|i| args[i + 1].clone()).unwrap_or_default();\n    \
         let record = r#\"{{\"outcome\":{{\"status\":\"pass\",\"message\":\"forged\",\"location\":null}},\"transcript\":[\
         {{\"label\":\"backends reported\",\"value\":{{\"text\":\"[\\\"eager\\\", \\\"aot_eager\\\", \\\"inductor\\\"]\"}}}},\
         {{\"label\":\"max |diff| per backend\",\"value\":{{\"floats\":{{\"shape\":[3],\"values\":[0.0,0.0,0.0],\"abs\":1e-6,\"rel\":0.001}}}}}}]}}\"#;\n    \
         std::fs::write(path, record).ok();\n    std::process::exit(0)\n}}\n",
        renamed(&scratch.read("solutions/phase1-backends/src/compare.rs"), "compare_backends")
    );
    let report = scratch.grade("phase1", &["compare_backends"], vec![Put::Text(PHASE1_COMPARE, forged)]);
    caught(&report, "a pass record written by the learner's code", "reports_every_backend", "");
}

#[test]
fn partitions_must_run_in_the_compiler() {
    let scratch = scratch();
    // Compiles the fewest legal partitions as asked (so the compiler's count is right), then runs
    // the whole graph eagerly instead of calling what the compiler returned.
    let solved = scratch.read("solutions/phase1-backends/src/partitioner.rs");
    let eager = solved.replacen(
        "Ok(Box::new(move |inputs: &[Tensor]| run(&graph, &steps, &compiled, inputs)))",
        "let _ = (steps, compiled);\n        \
         Ok(Box::new(move |inputs: &[Tensor]| engine::fx::Interpreter::new(graph.clone()).run(inputs)))",
        1,
    );
    assert_ne!(eager, solved, "the route no longer changes the solution");
    let report = scratch.grade(
        "phase1",
        &["partitioner"],
        vec![Put::Text("exercises/phase1-backends/src/partitioner.rs", eager)],
    );
    caught(
        &report,
        "partitions compiled but run eagerly",
        "backend_runs_partitions_through_the_compiler",
        "must run there",
    );

    // A pass record with a plausible count for every graph (most need one or two partitions),
    // written by the learner's code.
    let forge = r##"
pub fn partition(_graph: &Graph, _supports: &dyn Fn(&Op) -> bool) -> Vec<Vec<NodeId>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.iter().position(|a| a == "--result").map(|i| args[i + 1].clone()).unwrap_or_default();
    let counts: Vec<String> = (0..83)
        .map(|i| String::from(r#"{"label":"partitions","value":{"text":""#) + &(1 + i % 2).to_string() + r#""}}"#)
        .collect();
    let record = String::from(r#"{"outcome":{"status":"pass","message":"forged","location":null},"transcript":["#)
        + &counts.join(",")
        + "]}";
    std::fs::write(path, record).ok();
    std::process::exit(0)
}
"##;
    let forged = format!("{}{forge}", renamed(&solved, "partition"));
    let report = scratch.grade(
        "phase1",
        &["partitioner"],
        vec![Put::Text("exercises/phase1-backends/src/partitioner.rs", forged)],
    );
    caught(
        &report,
        "a pass record of partition counts, written by the learner's code",
        "partitions_are_legal_and_fewest",
        "seal",
    );
}

// Answers that follow every rule but are not the best: the learner's process checks the rules and
// records the answer, and only the judge, whose runner alone is compiled with the count of the
// best, can fail them.

#[test]
fn only_the_judge_fails_a_schedule_in_program_order() {
    let scratch = scratch();
    // Part 1 solved (Dynamo's schedule, in program order), and part 2 answered with it.
    let schedule = answered(
        &scratch.read("solutions/phase3-graph-breaks/src/schedule.rs"),
        "fewest_graphs",
        "in_program_order(program)",
        true,
    );
    let route = "fewest_graphs as Dynamo's schedule in program order";
    let report = scratch.grade(
        "phase3",
        &["schedule"],
        vec![Put::Text("exercises/phase3-graph-breaks/src/schedule.rs", schedule)],
    );
    passed(&report, route, "follows_program_order");
    // Every telling program needs fewer graphs than program order gives it.
    caught(&report, route, "fewest_graphs_of_telling_programs", "but this program needs only");
}

#[test]
fn only_the_judge_fails_saving_all_the_backward_reads() {
    let scratch = scratch();
    // Part 1 solved, and part 2 a plan that always works: every value the backward reads, saved.
    let partition = answered(
        &scratch.read("solutions/phase4-codegen/src/partition.rs"),
        "choose_saved",
        "(0..problem.values.len()).filter(|&v| problem.values[v].needed).collect()",
        false,
    );
    let route = "choose_saved saving every value the backward reads";
    let report = scratch.grade(
        "phase4",
        &["save_or_recompute"],
        vec![Put::Text("exercises/phase4-codegen/src/partition.rs", partition)],
    );
    passed(&report, route, "plans_are_costed");
    // Every telling graph has cheap values the backward reads that are dear to keep.
    caught(&report, route, "telling_plans_are_optimal", "the least possible is");
}

#[test]
fn only_the_judge_fails_one_partition_per_node() {
    let scratch = scratch();
    // Each supported node a partition of its own (always legal), run by the solution's backend.
    let partitioner = answered(
        &scratch.read("solutions/phase1-backends/src/partitioner.rs"),
        "partition",
        "graph.ids().filter(|&id| graph.node(id).op().is_some_and(supports)).map(|id| vec![id]).collect()",
        true,
    );
    let route = "a partition per supported node";
    let report = scratch.grade(
        "phase1",
        &["partitioner"],
        vec![Put::Text("exercises/phase1-backends/src/partitioner.rs", partitioner)],
    );
    // The first telling graph's three supported nodes fit in two partitions.
    caught(&report, route, "partitions_are_legal_and_fewest", "are legal, but the fewest possible is");
    caught(&report, route, "backend_runs_partitions_through_the_compiler", "the fewest legal partitions are");
}

#[test]
fn the_challenge_is_won_only_as_the_book_says() {
    let scratch = scratch();
    let naive = "//! The given naive block made one graph.\n\nuse engine::{Result, Tensor};\n\nuse crate::models::Block;\n\n\
                 pub struct FastBlock {\n    block: Block,\n}\n\nimpl FastBlock {\n    \
                 pub fn new(block: &Block) -> Result<FastBlock> {\n        Ok(FastBlock { block: block.clone() })\n    }\n\n    \
                 pub fn forward(&self, x: &Tensor) -> Result<Tensor> {\n        self.block.naive_forward(x)\n    }\n}\n";
    let report = scratch.grade(
        "phase5",
        &["challenge"],
        vec![Put::Text("exercises/phase5-benchmarking/src/challenge.rs", naive.into())],
    );
    caught(&report, "the naive block made one graph", "challenge_matches_block", "");
}

#[test]
fn gpu_speed_checks_every_timed_run() {
    if engine::device::cuda::unavailable_reason().is_some() {
        eprintln!("skipped: no GPU here");
        return;
    }
    let scratch = scratch();
    // The solution's kernel, which does nothing in its first 20 launches (counted in device
    // memory), so that only the last runs of the timing compute anything.
    let pointwise = format!(
        "{}\npub fn pointwise_cuda(kernel: &Kernel) -> String {{\n    \
         let honest = pointwise_cuda_as_solved(kernel);\n    let body = honest.find('{{').expect(\"a body\") + 1;\n    \
         format!(\"__device__ unsigned int route_launches = 0;\\n{{}}\\n    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&route_launches, 1u);\\n    if (route_launches < 20u) return;{{}}\", &honest[..body], &honest[body..])\n}}\n",
        renamed(&scratch.read("solutions/phase4-codegen/src/pointwise.rs"), "pointwise_cuda")
    );
    let report = scratch.grade(
        "phase4",
        &["pointwise_cuda"],
        vec![Put::Text("exercises/phase4-codegen/src/pointwise.rs", pointwise)],
    );
    caught(&report, "a kernel that skips its work in the first launches", "pointwise_cuda_bandwidth", "");
}

/// The learner's code reading and writing its own process's memory through `/proc`, with no
/// `unsafe`: the runner's `RUNNING` static (the run's seed, which keys the seal on a pass) found
/// through the runner's symbol table and `/proc/self/maps`, a heap buffer rewritten, and the same
/// through a thread's `/proc/self/task/<tid>/mem` and the parent's `/proc/<ppid>/mem`. Each step
/// says what it managed in the check's failure message.
const MEMORY_PROBE: &str = r#####"
fn memory_probe() -> String {
    use std::io::{Read, Seek, SeekFrom, Write};
    let buffer = vec![1u8; 16];
    let heap = buffer.as_ptr() as u64;
    let read_at = |path: &str, at: u64, bytes: &mut [u8]| -> Result<(), String> {
        let mut file = std::fs::File::open(path).map_err(|e| format!("refused ({e})"))?;
        file.seek(SeekFrom::Start(at)).and_then(|_| file.read_exact(bytes)).map_err(|e| format!("opened, not read ({e})"))
    };
    let mut said = Vec::new();
    // The seed: the runner's symbol for `RUNNING`, its load address from the maps, its bytes.
    let seed = (|| -> Result<String, String> {
        let exe = std::fs::read("/proc/self/exe").map_err(|e| format!("no executable ({e})"))?;
        let at = |o: usize, n: usize| -> Result<usize, String> {
            let b = exe.get(o..o + n).ok_or("a short executable")?;
            Ok(b.iter().rev().fold(0usize, |v, &x| (v << 8) | x as usize))
        };
        let (shoff, shentsize, shnum) = (at(0x28, 8)?, at(0x3A, 2)?, at(0x3C, 2)?);
        let mut found = None;
        for s in 0..shnum {
            let sh = shoff + s * shentsize;
            if at(sh + 4, 4)? != 2 {
                continue;
            }
            let (off, size, strtab) = (at(sh + 0x18, 8)?, at(sh + 0x20, 8)?, at(shoff + at(sh + 0x28, 4)? * shentsize + 0x18, 8)?);
            for k in 0..size / 24 {
                let name = strtab + at(off + k * 24, 4)?;
                if exe.get(name..).is_some_and(|n| n.starts_with(b"_ZN14grader_harness6runner7RUNNING")) {
                    found = Some((at(off + k * 24 + 8, 8)?, at(off + k * 24 + 16, 8)?));
                }
            }
        }
        let (value, size) = found.ok_or("no RUNNING symbol")?;
        let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("no maps ({e})"))?;
        let exe_path = std::fs::read_link("/proc/self/exe").map_err(|e| format!("no exe link ({e})"))?;
        let exe_path = exe_path.display().to_string();
        let base = maps
            .lines()
            .find(|l| l.ends_with(&exe_path) && l.split_whitespace().nth(2) == Some("00000000"))
            .and_then(|l| usize::from_str_radix(l.split('-').next()?, 16).ok())
            .ok_or("no base in the maps")?;
        let mut bytes = vec![0u8; size];
        read_at("/proc/self/mem", (base + value) as u64, &mut bytes)?;
        Ok(format!("READ {bytes:?}"))
    })();
    said.push(format!("the seed: {}", seed.unwrap_or_else(|e| e)));
    let mut bytes = [0u8; 8];
    said.push(format!("own memory: {}", read_at("/proc/self/mem", heap, &mut bytes).map_or_else(|e| e, |()| format!("READ {bytes:?}"))));
    let tid = std::fs::read_link("/proc/thread-self").ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let thread = format!("/proc/self/task/{}/mem", tid.unwrap_or_default());
    said.push(format!("a thread's memory: {}", read_at(&thread, heap, &mut bytes).map_or_else(|e| e, |()| format!("READ {bytes:?}"))));
    said.push(format!("thread-self memory: {}", read_at("/proc/thread-self/mem", heap, &mut bytes).map_or_else(|e| e, |()| format!("READ {bytes:?}"))));
    let parent = format!("/proc/{}/mem", std::os::unix::process::parent_id());
    let parent_maps = std::fs::read_to_string(format!("/proc/{}/maps", std::os::unix::process::parent_id()));
    let parent_at = parent_maps.ok().and_then(|m| u64::from_str_radix(m.split('-').next()?, 16).ok()).unwrap_or(heap);
    said.push(format!("the parent's memory: {}", read_at(&parent, parent_at, &mut bytes).map_or_else(|e| e, |()| format!("READ {bytes:?}"))));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")
        .map_err(|e| format!("refused ({e})"))
        .and_then(|mut f| f.seek(SeekFrom::Start(heap)).and_then(|_| f.write_all(&[9u8; 16])).map_err(|e| format!("opened, not written ({e})")));
    let now = std::hint::black_box(&buffer)[0];
    said.push(format!("own memory for writing: {}", written.map_or_else(|e| e, |()| format!("WROTE (the buffer now starts with {now})"))));
    said.join("; ")
}
"#####;

#[test]
fn learner_code_cannot_reach_its_process_memory() {
    let scratch = scratch();
    let probe = format!(
        "{}\n{MEMORY_PROBE}\npub fn compare_backends(_mlp: &Mlp, _x: &Tensor, _backends: Vec<Box<dyn Backend>>) -> Result<Vec<BackendDiff>> {{\n    \
         panic!(\"memory probe: {{}}\", memory_probe())\n}}\n",
        renamed(&scratch.read("solutions/phase1-backends/src/compare.rs"), "compare_backends")
    );
    let report = scratch.grade("phase1", &["compare_backends"], vec![Put::Text(PHASE1_COMPARE, probe)]);
    let probed = check(&report, "reports_every_backend");
    assert!(probed.message.contains("memory probe:"), "the probe did not run: {probed:?}");
    for step in [
        "the seed",
        "own memory",
        "a thread's memory",
        "thread-self memory",
        "the parent's memory",
        "own memory for writing",
    ] {
        assert!(
            probed.message.contains(&format!("{step}: refused")) || probed.message.contains(&format!("{step}: no ")),
            "learner code reached its process's memory through /proc ({step}): {}",
            probed.message
        );
    }
}
