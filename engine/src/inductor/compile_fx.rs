//! The entry point, the analogue of `torch._inductor.compile_fx.compile_fx`: decompose, rewrite
//! known patterns, lower,
//! schedule and fuse, generate code, compile it, plan the call.
//!
//! A dynamic graph (sizes `s0`, `s1`, ... from dynamo) is lowered for the sizes it was traced
//! with, and again for each new binding of its symbols when one first arrives. Kernels take the
//! extent of their loop (`xnumel`) at run time, so where a size only changes how far a loop runs,
//! every binding prints the same source, and the disk cache and the loader hand back the one
//! library already compiled: the size is passed at run time. A size that changes the source (a
//! stride inside an index, or a buffer grown too large for 32-bit indices: see
//! [`codegen::cuda::index_type`](super::codegen::cuda::index_type)) is baked in, and that source is
//! compiled once for its size.
//!
//! Everything that depends on the kernels' language and device is the target's
//! ([`super::target`]): its renderer prints the kernels, its `tune` makes the mode's decisions,
//! its `build` compiles, loads and wraps the program. A static graph compiled before is read from
//! the [FX graph cache](super::modes::fx_graph_cache) instead: only its program is built, by the
//! same `Target::build` as a fresh one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::codegen::Renderer;
use super::config::Config;
use super::ir::{LoweredGraph, NodeBody, PointwiseOp};
use super::kernel::{self, Kernel};
use super::modes::fx_graph_cache;
use super::output_code::OutputCode;
use super::runtime::Program;
use super::scheduler::{self, Schedule};
use super::split_reductions::{self, Split, SplitRule};
use super::target::{self, Generated, ProgramSpec, Target};
use super::{CompiledModule, call_plan, lowering, pattern_matcher};
use crate::aot;
use crate::compile_mode::Mode;
use crate::compile_time::{self, Stage};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::fx::{Graph, SymBindings};
use crate::logs::{self, Artifact};
use crate::op::CustomOp;
use crate::tensor::Tensor;
use crate::trace_structured;
use serde_json::json;

/// Compiles a captured graph for the device its inputs are on, with the target `config` names,
/// from the FX graph cache when it holds the graph.
pub fn compile_fx(graph: &Graph, config: &Config) -> Result<CompiledModule> {
    let device = graph.placeholders().first().map(|&p| graph.node(p).meta.device).unwrap_or_default();
    let target = target::for_device(device, config.target)?;
    let looked_up = compile_time::timed(
        Stage::Loading,
        || "FX graph cache lookup".into(),
        || fx_graph_cache::lookup(graph, &*target, config),
    );
    let result = match &looked_up {
        fx_graph_cache::Lookup::Hit(_) => "hit",
        fx_graph_cache::Lookup::Miss(_) => "miss",
        fx_graph_cache::Lookup::Bypass => "bypass",
    };
    trace_structured::emit("fx_graph_cache", || json!({ "result": result }));
    let key = match looked_up {
        fx_graph_cache::Lookup::Hit(entry) => return from_cache(*entry, &*target, config),
        fx_graph_cache::Lookup::Miss(key) => Some(key),
        fx_graph_cache::Lookup::Bypass => None,
    };
    let (decomposed, matched, hints) = compile_time::timed(
        Stage::Lowering,
        || "decompose, patterns".into(),
        || {
            let (decomposed, matched) = rewrite_patterns(&aot::decompose(graph)?)?;
            let hints = hint_bindings(&decomposed)?;
            Ok::<_, Error>((decomposed, matched, hints))
        },
    )?;
    trace_structured::graph("inductor_decomposed_graph", || decomposed.to_string());
    let generated = generate_for(&decomposed, &hints, &*target, config, Some(&matched))?;
    let fusion_log = generated.fusion_log.clone();
    trace_structured::emit("fusion", || json!({ "text": &fusion_log }));
    let (output_code, spec) = finish(generated, &*target, config, true)?;
    trace_structured::emit("output_code", || json!({ "output_code": &output_code, "text": output_code.to_string() }));
    let entry = fx_graph_cache::Entry { output_code, fusion_log, program: spec };
    let encoded = key.and_then(|key| key.encode(&entry));
    let fx_graph_cache::Entry { output_code, program: spec, .. } = entry;
    let program = build(&*target, spec, config)?;
    if let Some(encoded) = encoded {
        encoded.store();
    }
    let dynamic = decomposed.is_dynamic().then(|| Specializations {
        programs: Mutex::new(HashMap::from([(binding_key(&hints), program.clone())])),
        graph: decomposed,
        target: target.clone(),
        config: *config,
    });
    Ok(CompiledModule { output_code, program, dynamic })
}

/// A compiled module from a cache entry: the logs a fresh compile prints, then the program built.
fn from_cache(entry: fx_graph_cache::Entry, target: &dyn Target, config: &Config) -> Result<CompiledModule> {
    let fx_graph_cache::Entry { output_code, fusion_log, program } = entry;
    trace_structured::emit("fusion", || json!({ "text": &fusion_log }));
    trace_structured::emit("output_code", || json!({ "output_code": &output_code, "text": output_code.to_string() }));
    logs::log(Artifact::Fusion, || fusion_log);
    if config.mode == Mode::MaxAutotune {
        logs::log(Artifact::Autotuning, || {
            "fx graph cache hit: max-autotune's choices (GEMMs, kernel launches) come with the cached graph; \
             nothing is timed"
                .into()
        });
    }
    logs::log(Artifact::OutputCode, || output_code.to_string());
    target.log_choices(&program.choices, config.mode);
    let program = build(target, program, config)?;
    Ok(CompiledModule { output_code, program, dynamic: None })
}

/// The output code Inductor would compile for `graph` on `device`, without compiling it: how
/// to read the CUDA C for a model on a machine with no GPU.
pub fn generate(graph: &Graph, device: Device, config: &Config) -> Result<OutputCode> {
    let target = target::for_device(device, config.target)?;
    let (decomposed, matched) = rewrite_patterns(&aot::decompose(graph)?)?;
    let hints = hint_bindings(&decomposed)?;
    generate_for(&decomposed, &hints, &*target, config, Some(&matched)).map(|g| g.output_code)
}

/// Compiles the CUDA C that Inductor generates for `graph` (in `config`'s mode, for its default
/// choices) for a GPU of architecture `arch` (`sm_90`) into the disk cache, without a GPU: so that
/// a machine with such a GPU and this cache compiles nothing on the graph's first call. What a
/// Docker image runs at build time for the course's models.
pub fn warm_cuda_cache(graph: &Graph, arch: &str, config: &Config) -> Result<crate::device::cuda::nvrtc::Warmed> {
    let target = target::for_any_gpu(config.target)?;
    let (decomposed, matched) = rewrite_patterns(&aot::decompose(graph)?)?;
    let hints = hint_bindings(&decomposed)?;
    let generated = generate_for(&decomposed, &hints, &*target, config, Some(&matched))?;
    target::precompile_cuda(&generated.module, arch)
}

/// The kernels Inductor generates for `graph`, in launch order, as kernel IR: what the printers
/// are handed. `println!("{kernel}")` shows one as pseudo-code.
pub fn kernels(graph: &Graph, config: &Config) -> Result<Vec<Kernel>> {
    let (decomposed, matched) = rewrite_patterns(&aot::decompose(graph)?)?;
    if !matched.is_empty() {
        logs::log(Artifact::Fusion, || matched.join("\n"));
    }
    let hints = hint_bindings(&decomposed)?;
    let lowered = lowering::lower(&decomposed, &hints)?;
    // No target here: the CPU's rule, unless the config forces one.
    let rule = SplitRule::of(config.split_reductions, SplitRule::Never);
    let (lowered, _) = split_reductions::split_reductions(lowered, rule);
    build_kernels(&lowered, &scheduler::schedule(&lowered, config.fusion)?)
}

/// The decomposed graph with Inductor's pattern rewrites applied (see [`pattern_matcher`]):
/// naive attention into the fused op, then parallel linears of one input into one matmul. Also
/// one line per match, for the fusion log (which the FX graph cache keeps, to print on a hit).
fn rewrite_patterns(graph: &Graph) -> Result<(Graph, Vec<String>)> {
    let mut matched = Vec::new();
    let attention = pattern_matcher::rewrite(graph, &pattern_matcher::attention_rewrites(), &mut matched)?;
    let graph = pattern_matcher::concat_linears(&attention, &mut matched)?;
    Ok((graph, matched))
}

/// The binding of every size symbol to the size it was traced with.
fn hint_bindings(graph: &Graph) -> Result<SymBindings> {
    let shapes: Vec<&[usize]> = graph.placeholders().iter().map(|&p| graph.node(p).meta.shape.as_slice()).collect();
    graph.symbol_bindings(&shapes).map_err(|m| Error::Backend { backend: "inductor".into(), message: m.to_string() })
}

fn binding_key(bindings: &SymBindings) -> Vec<usize> {
    bindings.iter().map(|(_, value)| value).collect()
}

/// Lowers, schedules and prints `graph` for one binding of its sizes. With `matched` (the
/// pattern rewrites' lines) the fusion log is printed, else (a dynamic graph's later bindings)
/// nothing is.
fn generate_for(
    graph: &Graph,
    bindings: &SymBindings,
    target: &dyn Target,
    config: &Config,
    matched: Option<&[String]>,
) -> Result<Generated> {
    let (lowered, splits) = compile_time::timed(
        Stage::Lowering,
        || "loop-level IR".into(),
        || {
            let lowered = lowering::lower_with(graph, bindings, target.gemm_epilogues(config.mode))?;
            let rule = SplitRule::of(config.split_reductions, target.reduction_split());
            Ok::<_, Error>(split_reductions::split_reductions(lowered, rule))
        },
    )?;
    let schedule =
        compile_time::timed(Stage::Scheduling, String::new, || scheduler::schedule(&lowered, config.fusion))?;
    let fusion_log = matched.map(|matched| fusion_log(matched, &splits, &schedule)).unwrap_or_default();
    if matched.is_some() {
        logs::log(Artifact::Fusion, || fusion_log.clone());
    }
    compile_time::timed(
        Stage::Codegen,
        || format!("{} for {}", target.language(), target.device()),
        || render(lowered, &schedule, target, config, fusion_log),
    )
}

/// Prints the kernels and the call plan of a scheduled graph with the target's renderer.
fn render(
    lowered: LoweredGraph,
    schedule: &Schedule,
    target: &dyn Target,
    config: &Config,
    fusion_log: String,
) -> Result<Generated> {
    let kernels = build_kernels(&lowered, schedule)?;
    let plan = call_plan::plan(&lowered, schedule);
    let renderer = target.renderer(&config.printers);
    let (sources, launches) = kernels.iter().map(|k| renderer.kernel(k)).map(|r| (r.source, r.launch)).unzip();
    let custom = custom_sources(&lowered, renderer.as_ref())?;
    let output_code = OutputCode::new(target.device(), target.language(), &lowered, &kernels, sources, custom, &plan);
    let module = output_code.module(&renderer.prelude());
    Ok(Generated { lowered, kernels, launches, plan, output_code, module, fusion_log })
}

/// Makes generated code runnable: the target's decisions for the mode (noted in the output code),
/// the output code logged when `log` is set. Returns the output code and the program as data.
fn finish(
    mut generated: Generated,
    target: &dyn Target,
    config: &Config,
    log: bool,
) -> Result<(OutputCode, ProgramSpec)> {
    let choices =
        compile_time::timed(Stage::Codegen, || "target choices".into(), || target.tune(&mut generated, config, log))?;
    let custom_ops = custom_ops(&generated.lowered);
    let Generated { lowered, kernels, launches, plan, output_code, module, .. } = generated;
    if log {
        logs::log(Artifact::OutputCode, || output_code.to_string());
        target.log_choices(&choices, config.mode);
    }
    let schedule = super::runtime::Schedule::new(&lowered, &plan, &kernels, &launches);
    Ok((output_code, ProgramSpec { module, schedule, choices, custom_ops }))
}

/// The program of `spec`, compiled (its compiles timed on their own) and loaded by the target.
fn build(target: &dyn Target, spec: ProgramSpec, config: &Config) -> Result<Arc<dyn Program>> {
    compile_time::timed(Stage::Loading, || format!("{} program", target.name()), || target.build(spec, config))
}

/// Every custom op the kernels call, once each.
fn custom_ops(lowered: &LoweredGraph) -> Vec<CustomOp> {
    let mut ops: Vec<CustomOp> = Vec::new();
    for node in &lowered.nodes {
        if let NodeBody::Pointwise { op: PointwiseOp::Custom(custom), .. } = &node.body
            && !ops.contains(custom)
        {
            ops.push(custom.clone());
        }
    }
    ops
}

/// The source of every custom op the kernels call, once each, in the renderer's language.
fn custom_sources(lowered: &LoweredGraph, renderer: &dyn Renderer) -> Result<Vec<String>> {
    let mut sources: Vec<String> = Vec::new();
    for custom in custom_ops(lowered) {
        let source = renderer.custom_source(&custom)?;
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    Ok(sources)
}

/// The programs of a dynamic graph, one per binding of its sizes seen so far.
pub(crate) struct Specializations {
    graph: Graph,
    target: Arc<dyn Target>,
    config: Config,
    programs: Mutex<HashMap<Vec<usize>, Arc<dyn Program>>>,
}

impl Specializations {
    /// The program for the sizes of `inputs`, built (and compiled if its source is new) on first
    /// use.
    pub(crate) fn program_for(&self, inputs: &[Tensor]) -> Result<Arc<dyn Program>> {
        let shapes: Vec<&[usize]> = inputs.iter().map(Tensor::shape).collect();
        let bindings = self
            .graph
            .symbol_bindings(&shapes)
            .map_err(|m| Error::Backend { backend: "inductor".into(), message: m.to_string() })?;
        let key = binding_key(&bindings);
        if let Some(program) = self.programs.lock().expect("programs lock").get(&key) {
            return Ok(program.clone());
        }
        let sizes: Vec<String> = bindings.iter().map(|(symbol, value)| format!("{symbol}={value}")).collect();
        let (program, record) = compile_time::record(|| {
            let generated = generate_for(&self.graph, &bindings, &*self.target, &self.config, None)?;
            build(&*self.target, finish(generated, &*self.target, &self.config, false)?.1, &self.config)
        });
        compile_time::deferred(format!("specialization for {}", sizes.join(", ")), record);
        let program = program?;
        self.programs.lock().expect("programs lock").insert(key, program.clone());
        Ok(program)
    }
}

/// One kernel per fused group, numbered by the schedule.
fn build_kernels(lowered: &LoweredGraph, schedule: &Schedule) -> Result<Vec<Kernel>> {
    let ids = schedule.kernel_ids();
    schedule
        .groups
        .iter()
        .zip(ids)
        .filter_map(|(group, id)| id.map(|id| kernel::build(lowered, schedule, group, id)))
        .collect()
}

/// The fusion log: the pattern rewrites' lines, the reductions split, each fusion decision, the
/// groups left.
fn fusion_log(matched: &[String], splits: &[Split], schedule: &Schedule) -> String {
    let mut lines: Vec<String> = matched.to_vec();
    lines.extend(splits.iter().map(ToString::to_string));
    lines.extend(schedule.decisions.iter().map(ToString::to_string));
    lines.push(format!("{} group(s) after fusion", schedule.groups.len()));
    lines.join("\n")
}
