//! Keeps the numbers the book states in prose true where they come from the engine: how many ops
//! a composite decomposes into, how many kernels and extern calls a graph compiles to, how many
//! graphs and inputs a capture has. The book's code and output are included from compiled files
//! and snapshots; this test does the same for the counts written into sentences.
//!
//! Each fact names a page, a phrase with `{}` where the number stands, and the engine's count. The
//! phrase must appear on the page (whitespace and line breaks collapsed) with the count written in
//! as a word ("five") for `{}` or as digits ("16") for `{#}`. When the
//! engine changes a count, this test fails and names the sentence to update.

use std::fs;
use std::path::Path;

use engine::fx::Graph;
use engine::fx::proxy::Tracer;
use engine::inductor::split_reductions::{Split, SplitRule, parts};
use engine::inductor::{Config, kernels};
use engine::{Result, Tensor, aot, dynamo};

use book_examples::mlp::Mlp;

/// One number in the book: `phrase` on `page`, where `{}` stands for `value` in words and `{#}`
/// for it in digits.
struct Fact {
    page: &'static str,
    phrase: &'static str,
    value: usize,
}

#[test]
fn numbers_in_the_book_match_the_engine() -> Result<()> {
    let facts = facts()?;
    let mut problems = Vec::new();
    for fact in &facts {
        let text = page_text(fact.page);
        let expected = fact.phrase.replace("{}", &in_words(fact.value)).replace("{#}", &fact.value.to_string());
        if !text.contains(&expected) {
            problems.push(format!(
                "book/src/{}: expected the phrase \"{expected}\" (the engine counts {}); update the sentence",
                fact.page, fact.value
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} number(s) in the book disagree with the engine:\n{}",
        problems.len(),
        problems.join("\n")
    );
    Ok(())
}

/// How the CUDA target splits reductions on an H100.
const H100: SplitRule = SplitRule::FillGpu { multiprocessors: 132 };

/// The facts, each counted by the engine now.
fn facts() -> Result<Vec<Fact>> {
    let mlp = Mlp::new(0);
    let mlp_graph = primitive(|x| mlp.forward(x), &[2, 4])?;
    let gelu_ops = primitive(|x| x.gelu(), &[2, 8])?.op_count();
    let softmax_ops = primitive(|x| x.softmax(-1), &[2, 8])?.op_count();
    let layer_norm_ops =
        primitive(|x| x.layer_norm(&Tensor::ones(&[8]), &Tensor::zeros(&[8]), 1e-5), &[2, 8])?.op_count();
    let ops_named =
        |name: &str| mlp_graph.nodes().iter().filter(|n| n.op().is_some_and(|op| op.name() == name)).count();
    let views = ops_named("permute");
    let extern_calls = ops_named("matmul");
    let mlp_kernels = kernels(&traced(|x| mlp.forward(x), &[2, 4])?, &Config::default())?.len();
    // Values that get a buffer: one per kernel and extern call (each writes one output here).
    let in_registers = mlp_graph.op_count() - views - extern_calls - mlp_kernels;

    let attention = workbook_models::phase2::Attention::new(0);
    let attention_graphs =
        dynamo::explain(|x: Tensor| attention.forward(&x)).call(&workbook_models::phase2::example_input(8, 1))?.graphs;

    let w = book_examples::phase3::weights();
    let head = dynamo::explain(|x: Tensor| book_examples::phase3::head(&x, &w)).call(&Tensor::randn(&[3, 4], 2))?;

    Ok(vec![
        Fact { page: "tour.md", phrase: "`gelu` became `erf` and {} pointwise ops around it", value: gelu_ops - 1 },
        Fact { page: "phase1/engine.md", phrase: "it runs softmax as {} separate ops", value: softmax_ops },
        Fact { page: "phase4/engine.md", phrase: "the {} ops GELU decomposes into", value: gelu_ops },
        Fact {
            page: "phase4/engine.md",
            phrase: "The `call` plan has {} steps for",
            value: mlp_kernels + extern_calls,
        },
        Fact { page: "phase4/engine.md", phrase: "ops ({} of them `permute` views", value: views },
        Fact { page: "phase4/engine.md", phrase: "the other {} values live in registers", value: in_registers },
        Fact { page: "phase4/index.md", phrase: "decomposed, they are {} and", value: softmax_ops },
        Fact { page: "phase4/index.md", phrase: "and {} primitive ops", value: layer_norm_ops },
        Fact { page: "phase2/exercises.md", phrase: "attention block ({} graph,", value: attention_graphs.len() },
        Fact {
            page: "phase2/exercises.md",
            phrase: "{} inputs: `arg0` and the",
            value: attention_graphs[0].placeholders().len(),
        },
        Fact { page: "phase4/engine.md", phrase: "the decomposed graph's {#} ops", value: mlp_graph.op_count() },
        Fact {
            page: "phase3/index.md",
            phrase: "a model with a branch and a print, split into {} graphs",
            value: head.graphs.len(),
        },
        Fact { page: "phase3/engine.md", phrase: "graphs, {} breaks", value: head.breaks.len() },
        Fact {
            page: "phase4/engine.md",
            phrase: "over 2 M elements becomes {#} rows of 8192",
            value: parts(H100, &[1 << 21], 0).unwrap_or_default(),
        },
        Fact {
            page: "phase4/engine.md",
            phrase: "a batch of 4096 splits into {#} parts of 64",
            value: parts(H100, &[4096, 2048], 0).unwrap_or_default(),
        },
    ])
}

/// The graph `f` records for one input of `shape`, as captured (composite ops kept).
fn traced(f: impl Fn(&Tensor) -> Result<Tensor>, shape: &[usize]) -> Result<Graph> {
    let tracer = Tracer::new();
    let x = tracer.input(&Tensor::randn(shape, 0))?;
    Ok(tracer.finish(&[f(&x)?])?.graph)
}

/// The same graph after decomposition into primitive ops, as every backend but `Eager` sees it.
fn primitive(f: impl Fn(&Tensor) -> Result<Tensor>, shape: &[usize]) -> Result<Graph> {
    aot::decompose(&traced(f, shape)?)
}

/// A page's text with every run of whitespace collapsed to one space, so a phrase may wrap.
fn page_text(page: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src").join(page);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Small counts as the book writes them, in words; larger ones in digits.
fn in_words(n: usize) -> String {
    const WORDS: [&str; 13] =
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    WORDS.get(n).map_or_else(|| n.to_string(), |w| w.to_string())
}

/// Names the book's prose quotes from output code it includes (kernel, buffer and variable
/// names the printer chooses): each must still be in that output, so a change to the printer
/// fails here and names the sentence to update.
#[test]
fn names_the_book_quotes_are_in_the_output_it_includes() {
    let quoted: [(&str, &str, &[&str]); 2] = [
        (
            "phase4/engine.md",
            "phase4_output_code",
            &[
                "extern_kernels::matmul",
                "fc1_weight.as_strided([4, 8], [1, 4], 0)",
                "poi_fused_add_mul_erf_0",
                "row * 8 + col",
                "in_ptr1[col]",
                "col0",
                "col1",
                "per_fused_add_amax_sub_exp_sum_div_1",
                "tmp5_row",
                "buf0",
                "buf6",
                "buf7",
                "buf13",
                "tmp0",
                "tmp7",
            ],
        ),
        // The CUDA C of the same graph: a float4 load, a warp per softmax row.
        ("phase4/engine.md", "phase4_output_code_cuda", &["float4", "tmp0[1]", "warp_max", "warp_sum"]),
    ];
    let mut problems = Vec::new();
    for (page, snapshot, names) in quoted {
        let text = page_text(page);
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{snapshot}.snap"));
        let output = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for name in names {
            if !text.contains(&format!("`{name}`")) {
                problems.push(format!("book/src/{page} no longer quotes `{name}`: drop it from this list"));
            } else if !output.contains(name) {
                problems.push(format!("book/src/{page} quotes `{name}`, which {snapshot} no longer prints"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The Rust version the README and the setup page ask for is the workspace's `rust-version`.
#[test]
fn the_rust_version_asked_for_is_the_workspace_s() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |file: &str| fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let manifest = read("Cargo.toml");
    let version = manifest
        .lines()
        .find_map(|line| line.strip_prefix("rust-version = "))
        .expect("the workspace manifest sets rust-version")
        .trim_matches('"');
    assert!(
        page_text("setup.md").contains(&format!("**Rust**, {version} or newer")),
        "book/src/setup.md must ask for Rust {version} or newer, the workspace's rust-version"
    );
    assert!(
        read("README.md").contains(&format!("({version} or newer)")),
        "README.md must ask for Rust {version} or newer, the workspace's rust-version"
    );
}

/// The host costs the phase 5 engine page gives for PyTorch on a GPU are the engine's preset.
#[test]
fn the_split_the_book_logs_is_the_engine_s() {
    // The fusion log's line for the MSE loss's mean on an H100, as the engine writes it.
    let length = 1 << 21;
    let parts = parts(H100, &[length], 0).expect("the mean over 2 M elements splits");
    let line = Split { node: "mean".into(), outputs: 1, length, parts }.to_string();
    assert!(page_text("phase4/engine.md").contains(&line), "book/src/phase4/engine.md must quote `{line}`");
}

#[test]
fn the_python_overhead_the_book_quotes_is_the_engine_s() {
    use engine::host_overhead::HostOverhead;
    let cuda = HostOverhead::PYTHON_CUDA;
    let micros = [cuda.eager_op, cuda.graph_call, cuda.compiled_launch].map(|d| d.as_micros().to_string());
    let phrase = format!("`--host-overhead {}`", micros.join(","));
    assert!(page_text("phase5/engine.md").contains(&phrase), "book/src/phase5/engine.md must show {phrase}");
}

/// The phase list the README gives reaches the last phase the grader knows.
#[test]
fn the_readme_names_every_phase() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let last = fs::read_dir(root.join("exercises"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.split('-').next().map(str::to_string))
        .filter(|name| name.starts_with("phase"))
        .max()
        .expect("exercise crates");
    assert!(readme.contains(&format!("… `{last}`, or `all`")), "README.md's phase list must end at {last}");
}

/// The precision page's table of formats: each dtype's row states its epsilon and its largest
/// finite value as `DType` has them (`torch.finfo`'s numbers), to the digits the table prints.
#[test]
fn the_format_table_matches_the_dtypes() {
    use engine::DType;
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../src/phase5/precision.md"))
        .expect("the precision page");
    // As the table writes them: whole numbers and values from 0.1 on as they are, others as 1.2e-7.
    let short = |v: f32| {
        if (v.fract() == 0.0 && v < 1e6) || (0.1..1.0).contains(&v) { format!("{v}") } else { format!("{v:.1e}") }
    };
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F8E4M3, DType::F8E5M2] {
        let row = format!("| `{}` |", dtype.name());
        let line =
            text.lines().find(|l| l.starts_with(&row)).unwrap_or_else(|| panic!("no row for {dtype} in the table"));
        for (what, value) in [("epsilon", dtype.epsilon()), ("largest finite", dtype.max_value())] {
            let written = short(value);
            assert!(
                line.contains(&format!("| {written} |")),
                "book/src/phase5/precision.md: the {dtype} row should state its {what} as {written}: {line}"
            );
        }
    }
}

/// The sizes phase 5's exercise page says `costs_are_measured` times, on a CPU and on a GPU, are
/// the ones the check's source passes to `measure_costs`.
#[test]
fn the_break_even_sizes_the_book_quotes_are_the_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let check = fs::read_to_string(root.join("grader/checks/phase5/src/checks/break_even.rs")).unwrap();
    let line = check
        .lines()
        .find(|l| l.contains("let (rows, cols) = if device == Device::Cpu"))
        .expect("costs_are_measured chooses its sizes in one line");
    let sizes: Vec<&str> = line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).collect();
    let [cpu_rows, cpu_cols, gpu_rows, gpu_cols] = sizes[..] else { panic!("four sizes in {line:?}") };
    let phrase = format!("over {cpu_rows} x {cpu_cols} on the CPU or {gpu_rows} x {gpu_cols} on a GPU");
    assert!(page_text("phase5/exercises.md").contains(&phrase), "book/src/phase5/exercises.md must say {phrase}");
}

/// The numbers `const NAME` is given in `source` (a range's ends, a value), in order.
fn const_numbers(source: &str, name: &str) -> Vec<f64> {
    let line = source
        .lines()
        .find(|l| l.starts_with(&format!("const {name}:")))
        .unwrap_or_else(|| panic!("no `const {name}` in the check"));
    let value = line.split_once(" = ").map(|(_, v)| v).unwrap_or_default().replace("..=", " ").replace("..", " ");
    value
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or_else(|_| panic!("a number in {line:?}")))
        .collect()
}

/// The `///` comments of the source file at `path`, joined into one line.
fn doc_comments(path: &Path) -> String {
    let source = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Vec<&str> = source.lines().filter_map(|l| l.trim_start().strip_prefix("///")).map(str::trim).collect();
    doc.join(" ")
}

/// What the phase 5 page says of the work `do_bench` is judged on is what the timer check draws.
#[test]
fn the_timer_page_states_the_checks_work() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let check = fs::read_to_string(root.join("grader/checks/phase5/src/checks/timer.rs")).unwrap();
    let page = page_text("phase5/exercises.md");
    let (work, warm_up) = (const_numbers(&check, "WORK_MS"), const_numbers(&check, "WARM_UP_MS"));
    for phrase in [
        format!("drawn in secret from the run's seed ({} to {} ms;", work[0], work[1]),
        format!("whose first calls take {} ms ({} ms on a GPU)", warm_up[0], warm_up[1]),
    ] {
        assert!(page.contains(&phrase), "book/src/phase5/exercises.md must say: {phrase}");
    }
}

/// The blocks the phase 5 page says the profile questions start from are the check's.
#[test]
fn the_profile_page_states_the_checks_blocks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let check = fs::read_to_string(root.join("grader/checks/phase5/src/checks/profile.rs")).unwrap();
    let page = page_text("phase5/exercises.md");
    let shape = |name: &str| match const_numbers(&check, name)[..] {
        [batch, seq, width, heads] => format!("{batch} x {seq} x {width} with {heads} heads"),
        ref other => panic!("`{name}` should give a batch, a length, a width and heads, not {other:?}"),
    };
    let phrase = format!("from {} on the CPU, from {} on a GPU", shape("CPU_BLOCK"), shape("GPU_BLOCK"));
    assert!(page.contains(&phrase), "book/src/phase5/exercises.md must say: {phrase}");
}

/// What phase 5's `compare` stub says it is judged on (pairs, differences, costs, budgets,
/// tolerances) is what its check draws and allows, named constants in the check's source.
#[test]
fn the_compare_stub_states_the_checks_numbers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let check = fs::read_to_string(root.join("grader/checks/phase5/src/checks/compare.rs")).unwrap();
    let doc = doc_comments(&root.join("exercises/phase5-benchmarking/src/compare.rs"));
    let one = |name: &str| const_numbers(&check, name)[0];
    let two = |name: &str| {
        let n = const_numbers(&check, name);
        (n[0], n[1])
    };
    let per_kind = one("PAIRS_PER_KIND");
    let (close_low, close_high) = two("CLOSE");
    let (far_low, far_high) = two("FAR");
    let (ms_low, ms_high) = two("STEADY_MS");
    let (gpu_ms_low, gpu_ms_high) = two("STEADY_MS_ON_A_GPU");
    let (pairs_low, pairs_high) = two("BUDGET_PAIRS");
    let percent = |x: f64| format!("{}", (x * 100.0).round());
    let phrases = [
        format!("Judged on {} pairs", 3.0 * per_kind),
        format!("enough for {pairs_low} to {pairs_high} pairs of calls"),
        format!(
            "{per_kind} pairs of equal cost, {per_kind} that differ by {} to {}%, {per_kind} that differ {far_low} to \
             {far_high} fold",
            percent(close_low - 1.0),
            percent(close_high - 1.0)
        ),
        format!("taking {ms_low} to {ms_high} ms a call once warm ({gpu_ms_low} to {gpu_ms_high} ms on a GPU"),
        format!("the ratio within {}% of the true one", percent(one("RATIO_WITHIN"))),
        format!("({}% more is tolerated)", percent(one("OVERRUN"))),
        format!("a pair that differs {far_low} fold or more must be decided within {} calls of each", one("FAR_CALLS")),
        format!("takes more than {} times the work its calls queued", one("BUSY")),
    ];
    for phrase in phrases {
        assert!(doc.contains(&phrase), "exercises/phase5-benchmarking/src/compare.rs must say: {phrase}");
    }
}

/// The number of telling graphs phase 1's exercise page says the `partitioner` checks start with
/// is the number the checks build.
#[test]
fn the_partitioner_s_telling_graphs_are_counted_right() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let check = fs::read_to_string(root.join("grader/checks/phase1/src/checks/partitioner.rs")).unwrap();
    let line = check
        .lines()
        .find(|l| l.contains("].into_iter().map(|g| (g, vec!["))
        .expect("telling_cases lists its graphs in one line");
    let listed = line.split(']').next().unwrap_or_default().split(',').count();
    let phrase = format!("Two checks, on {} graphs made to tell the wrong answers above apart", in_words(listed));
    assert!(page_text("phase1/exercises.md").contains(&phrase), "book/src/phase1/exercises.md must say {phrase}");
}

/// What phase 4's `save_or_recompute` page and `choose_saved`'s stub say the checks draw (plans,
/// graphs, their sizes) and allow (seconds) is what the checks' constants say.
#[test]
fn the_save_or_recompute_page_states_the_checks_numbers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let check = fs::read_to_string(root.join("grader/checks/phase4/src/checks/partition.rs")).unwrap();
    let phase = fs::read_to_string(root.join("grader/checks/phase4/src/phase.rs")).unwrap();
    let doc = doc_comments(&root.join("exercises/phase4-codegen/src/partition.rs"));
    let one = |name: &str| const_numbers(&check, name)[0];
    let two = |name: &str| {
        let n = const_numbers(&check, name);
        format!("{} to {} values", n[0], n[1])
    };
    let (costed, chosen) = (two("COSTED_VALUES"), two("CHOSEN_VALUES"));
    let seconds = const_numbers(&phase, "CHOSEN_PLAN")[0];
    let page = page_text("phase4/exercises.md");
    for phrase in [
        format!("costs {} plans on graphs of {costed}", one("COSTED_PLANS")),
        format!("draws {} random graphs of {chosen}", one("RANDOM_GRAPHS")),
        format!("builds {} graphs of layers", one("TELLING_GRAPHS")),
        format!("Each of these two checks has {seconds} seconds"),
    ] {
        assert!(page.contains(&phrase), "book/src/phase4/exercises.md must say: {phrase}");
    }
    for phrase in [format!("Judged on graphs of {chosen}"), format!("within {seconds} seconds")] {
        assert!(doc.contains(&phrase), "exercises/phase4-codegen/src/partition.rs must say: {phrase}");
    }
}

/// What phase 3's `schedule` page and `fewest_graphs`'s stub say the checks draw (programs, their
/// sizes) and allow (seconds) is what the checks' constants and the phase's declaration say.
#[test]
fn the_schedule_page_states_the_checks_numbers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let check = fs::read_to_string(root.join("grader/checks/phase3/src/checks/schedule.rs")).unwrap();
    let doc = doc_comments(&root.join("exercises/phase3-graph-breaks/src/schedule.rs"));
    let one = |name: &str| const_numbers(&check, name)[0];
    let two = |name: &str| {
        let n = const_numbers(&check, name);
        format!("{} to {} steps", n[0], n[1])
    };
    let schedule = checks_phase3::PHASE.exercise("schedule").expect("phase 3 declares `schedule`");
    let seconds: Vec<u64> = schedule.checks.iter().map(|c| c.timeout_secs).collect();
    assert!(seconds.iter().all(|&s| s == seconds[0]), "the page gives one time limit for all: {seconds:?}");
    let (fewest, page) = (two("FEWEST_STEPS"), page_text("phase3/exercises.md"));
    for phrase in [
        format!(
            "`follows_program_order` draws {} programs of {}",
            one("PROGRAM_ORDER_PROGRAMS"),
            two("PROGRAM_ORDER_STEPS")
        ),
        format!("draws {} random programs of {fewest}", one("RANDOM_PROGRAMS")),
        format!("builds {} programs of {fewest}", one("TELLING_PROGRAMS")),
        format!("Each check has the default time limit of {} seconds", seconds[0]),
    ] {
        assert!(page.contains(&phrase), "book/src/phase3/exercises.md must say: {phrase}");
    }
    let phrase = format!("Judged on programs of {fewest}");
    assert!(doc.contains(&phrase), "exercises/phase3-graph-breaks/src/schedule.rs must say: {phrase}");
}

/// The row length up to which the phase 4 page (and its picture of the kernel shapes) says a
/// generated persistent reduction takes a warp per row, and the rows a block then takes, are the
/// CUDA code generator's.
#[test]
fn the_warp_per_row_limit_the_book_states_is_the_code_generator_s() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let codegen = fs::read_to_string(root.join("engine/src/inductor/codegen/cuda.rs")).unwrap();
    let limit = const_numbers(&codegen, "WARP_ROW_MAX")[0];
    let rows = in_words(const_numbers(&codegen, "WARP_ROWS_PER_BLOCK")[0] as usize);
    for phrase in [format!("A row longer than {limit} elements takes a whole block"), format!("{rows} rows to a block")]
    {
        assert!(page_text("phase4/engine.md").contains(&phrase), "book/src/phase4/engine.md must say: {phrase}");
    }
    let picture = fs::read_to_string(root.join("book/src/images/thread-mapping.svg")).unwrap();
    let label = format!(">{limit} takes a block)");
    assert!(picture.contains(&label), "book/src/images/thread-mapping.svg must say: a row over {limit} takes a block");
}

/// The bound under which the phase 4 page says generated CUDA indexes in `int` is the code
/// generator's.
#[test]
fn the_32_bit_index_limit_the_book_states_is_the_code_generator_s() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let codegen = fs::read_to_string(root.join("engine/src/inductor/codegen/cuda.rs")).unwrap();
    let [1.0, high, 1.0, margin] = const_numbers(&codegen, "INT_INDEX_LIMIT")[..] else {
        panic!("INT_INDEX_LIMIT is no longer (1 << a) - (1 << b): update this test and the page")
    };
    let phrase = format!("stays under 2^{high} - 2^{margin} elements");
    assert!(page_text("phase4/engine.md").contains(&phrase), "book/src/phase4/engine.md must say: {phrase}");
}

/// The Hopper attention kernel the precision page names is in the attention family's source, for
/// the head dim the page gives, and it is the one the launcher asks for; its exponentials are the
/// instruction the page names.
#[test]
fn the_hopper_attention_kernel_the_precision_page_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |file: &str| fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let page = page_text("phase5/precision.md");
    let phrase = "a Hopper kernel of its own for head dim 64, `flash_attention_wgmma` in `engine/src/device/cuda/kernels/attention.cu`";
    assert!(page.contains(phrase), "book/src/phase5/precision.md must say: {phrase}");
    let source = read("engine/src/device/cuda/kernels/attention.cu");
    for kernel in ["flash_attention_wgmma_bf16_hd64", "flash_attention_wgmma_f16_hd64"] {
        assert!(source.contains(&format!(" {kernel}(const AttnParams p)")), "attention.cu defines {kernel}");
    }
    // The page says the softmax's exponentials are `ex2.approx.ftz`, not `exp2f`.
    let phrase = "calls `ex2.approx.ftz` directly";
    assert!(page.contains(phrase), "book/src/phase5/precision.md must say: {phrase}");
    assert!(
        source.contains("ex2.approx.ftz.f32") && !source.contains("exp2f("),
        "attention.cu takes 2^x as the page says"
    );
    let launcher = read("engine/src/device/cuda/tuned/attention.rs");
    assert!(
        launcher.contains("format!(\"flash_attention_wgmma_{dtype}_hd64\")")
            && launcher.contains("sizes.head_dim == 64")
    );
    // The page says its tiles hold 128 keys: the kernels' tile is so, and the launcher sizes their
    // shared memory for the same.
    let phrase = "with tiles of 128 keys instead of 64";
    assert!(page.contains(phrase), "book/src/phase5/precision.md must say: {phrase}");
    assert!(source.contains("#define WG_KEYS 128 "), "attention.cu: 128-key tiles");
    assert!(launcher.contains("const WGMMA_KEYS: usize = 128;"), "tuned/attention.rs sizes 128-key tiles");
}

/// The modes page says a bias that only extern kernels read folds into its GEMM, attention's
/// joined query, key and value projections' among them, and the attention page why the pass
/// that joins them puts the biases first: compiled, three biased projections that
/// attention reads through the heads' views leave no kernel of their own (the weights' and biases'
/// joins, the product and attention are all extern kernels).
#[test]
fn the_bias_attention_reads_folds_as_the_modes_page_says() -> Result<()> {
    let phrase = "as does the one bias of attention's joined query, key and value projections";
    assert!(page_text("phase5/modes.md").contains(phrase), "book/src/phase5/modes.md must say: {phrase}");
    let phrase = "The biases' `cat` is placed before the matmul, so that the bias add follows the product it reads";
    assert!(page_text("phase4/attention.md").contains(phrase), "book/src/phase4/attention.md must say: {phrase}");
    let (d, heads) = (16, 2);
    let shapes = [vec![d, d], vec![d]];
    let params: Vec<Tensor> = (0..6).map(|i| Tensor::randn(&shapes[usize::from(i >= 3)], i)).collect();
    let attention = |x: &Tensor| -> Result<Tensor> {
        let split = |t: Tensor| t.reshape(&[1, 4, heads, d / heads])?.transpose(1, 2);
        let project = |i: usize| split(x.linear(&params[i], Some(&params[i + 3]))?);
        project(0)?.scaled_dot_product_attention(&project(1)?, &project(2)?, None, false, None)
    };
    let inductor = engine::backends::Inductor::default();
    dynamo::compile(|x: Tensor| attention(&x)).backend(inductor.clone()).call(&Tensor::randn(&[1, 4, d], 9))?;
    let code = inductor.output_codes()[0].clone();
    assert!(code.kernel_names().is_empty(), "the bias add stayed a kernel:\n{code}");
    Ok(())
}

/// The precision page says attention's output takes q's layout so that merging the heads is a
/// view, and that generated kernels divide as Triton's `/` while the library's divide exactly:
/// the block's CUDA output code has no kernel between attention and the output projection, and
/// NVRTC's options for the two kinds of source differ by that flag alone.
#[test]
fn the_block_s_attention_and_divisions_are_built_as_the_precision_page_says() -> Result<()> {
    use engine::device::cuda::{DTYPES, eager_source, nvrtc};
    let page = page_text("phase5/precision.md");
    for phrase in [
        "now the lowering gives attention's output the stride order of q, so merging the heads is a view",
        "generated kernels are now built with `--prec-div=false`",
        "the library's own kernels keep exact division",
    ] {
        assert!(page.contains(phrase), "book/src/phase5/precision.md must say: {phrase}");
    }
    let code = block_cuda_code(workbook_models::phase5::BlockShape::SMALL, engine::DType::F32)?;
    let attention = code.lines().position(|l| l.contains("extern_kernels::flash_attention(")).expect("attention");
    let next = &code.lines().skip(attention + 1).find(|l| l.contains("extern_kernels::") || l.contains("xnumel = "));
    assert!(
        next.is_some_and(|l| l.contains("extern_kernels::matmul(")),
        "the output projection reads attention's output with no kernel between:\n{code}"
    );
    let library = nvrtc::options("sm_90", &eager_source("cat").expect("a family"));
    let generated = nvrtc::options("sm_90", &format!("{DTYPES}\nextern \"C\" __global__ void k() {{}}\n"));
    let added: Vec<&String> = generated.iter().filter(|o| !library.contains(o)).collect();
    assert_eq!(added, ["--prec-div=false"], "generated code's options add exactly the division flag");
    Ok(())
}

/// The precision page's last three changes to the large bf16 block are in its CUDA output code:
/// the q, k and v weights' join is kept across calls, every kernel indexes in `int`, and each
/// layer norm's row of 768 takes a block of 96 threads.
#[test]
fn the_large_block_s_output_code_keeps_its_join_indexes_in_32_bits_and_gives_a_row_96_threads() -> Result<()> {
    let page = page_text("phase5/precision.md");
    for phrase in [
        "The joined weights are kept across calls",
        "Generated kernels index in 32 bits when every buffer they touch has fewer than 2^31 elements",
        "a layer norm's row of 768 takes a block of 96 threads instead of a warp",
    ] {
        assert!(page.contains(phrase), "book/src/phase5/precision.md must say: {phrase}");
    }
    let code = block_cuda_code(workbook_models::phase5::BlockShape::LARGE, engine::DType::BF16)?;
    let join = code.lines().find(|l| l.contains("extern_kernels::cat(attn_q_weight")).expect("the weights' join");
    assert!(join.contains("kept across calls"), "the join is kept: {join}");
    let kernels = code.matches("__global__").count();
    assert!(kernels >= 4, "{code}");
    assert_eq!(
        code.matches("const int xnumel = (int)xnumel64;").count(),
        kernels,
        "every kernel indexes in int:\n{code}"
    );
    assert_eq!(code.matches("96 threads share each row of 768").count(), 2, "both layer norms:\n{code}");
    assert_eq!(code.matches("__launch_bounds__(96)").count(), 2, "{code}");
    Ok(())
}

/// The CUDA output code of phase 5's naive block of `shape` with parameters and input in `dtype`
/// (printing CUDA C needs no GPU).
fn block_cuda_code(shape: workbook_models::phase5::BlockShape, dtype: engine::DType) -> Result<String> {
    let block = workbook_models::phase5::Block::new(shape, 0, engine::Device::Cpu)?.to_dtype(dtype)?;
    let x = Tensor::randn(&[shape.batch, shape.seq, shape.d_model], 1).to_dtype(dtype)?;
    let traced = engine::fx::trace(&[x], |x| Ok(vec![block.naive_forward(&x[0])?]))?;
    Ok(engine::inductor::generate(&traced.graph, engine::Device::Cuda(0), &Config::default())?.to_string())
}
