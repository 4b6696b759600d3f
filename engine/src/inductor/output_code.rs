//! The output code, what `TORCH_LOGS=output_code` prints for TorchInductor: every generated
//! kernel's source, annotated with the graph nodes and source lines it computes, followed by the
//! `call` plan that allocates buffers and launches kernels. Printed by `ENGINE_LOGS=output_code`
//! and readable from the API ([`super::CompiledModule::output_code`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::call_plan::{CallPlan, Step};
use super::ir::{BufferName, FallbackArg, LoweredGraph, NodeBody, View};
use super::kernel::{Kernel, Origin};
use crate::device::Device;
use crate::dtype::DType;
use crate::layout::{Layout, numel};
use crate::op::Op;

/// One pointer argument of a kernel, as the call plan passes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArgCode {
    /// The buffer passed (`arg0`, `fc1_bias`, `buf3`).
    pub buffer: String,
    /// Elements in that buffer.
    pub elements: usize,
    /// Their dtype.
    #[serde(default)]
    pub dtype: DType,
    /// Whether the kernel writes it.
    pub output: bool,
}

/// One kernel's printed source and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelCode {
    /// The kernel's name (`poi_fused_add_relu_mul_0`).
    pub name: String,
    /// Its source, exactly as compiled.
    pub source: String,
    /// The graph nodes it computes.
    pub origins: Vec<Origin>,
    /// Its pointer arguments in order: inputs, then outputs.
    pub args: Vec<ArgCode>,
}

/// The generated module: kernels and the call plan, as text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputCode {
    /// Where the kernels run.
    pub device: Device,
    /// The language the kernels are printed in (`C`, `CUDA C`, `kernel IR`): the target's.
    pub language: String,
    /// The kernels, in launch order.
    pub kernels: Vec<KernelCode>,
    /// Extern calls made by the plan (`matmul`, eager fallbacks), in order.
    pub extern_calls: Vec<String>,
    /// Sources of the custom ops the kernels call, placed before the kernels.
    pub custom_sources: Vec<String>,
    /// The `call` function.
    pub call: String,
    /// Choices made after code generation, one line each (max-autotune's GEMM library and
    /// algorithm, with the times that decided it), printed after the call.
    pub choices: Vec<String>,
}

impl OutputCode {
    /// Builds the output code for a planned graph; `sources[i]` is kernel `i`'s source.
    pub fn new(
        device: Device,
        language: &str,
        graph: &LoweredGraph,
        kernels: &[Kernel],
        sources: Vec<String>,
        custom_sources: Vec<String>,
        plan: &CallPlan,
    ) -> Self {
        let kernels_code = kernels
            .iter()
            .zip(sources)
            .map(|(k, source)| KernelCode {
                name: k.name.clone(),
                source,
                origins: k.origins.clone(),
                args: k
                    .args
                    .iter()
                    .map(|a| ArgCode {
                        buffer: graph.buffer_name(a.buffer),
                        elements: numel(graph.buffer_shape(a.buffer)),
                        dtype: a.dtype,
                        output: a.output,
                    })
                    .collect(),
            })
            .collect();
        let extern_calls = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Extern { node, .. } => Some(graph[*node].origin_name.clone()),
                _ => None,
            })
            .collect();
        OutputCode {
            device,
            language: language.to_string(),
            kernels: kernels_code,
            extern_calls,
            custom_sources,
            call: render_call(graph, kernels, plan),
            choices: Vec::new(),
        }
    }

    /// The whole source file to compile: `prelude`, the custom ops' sources, then every kernel.
    pub fn module_source(&self, prelude: &str) -> String {
        let mut parts = vec![self.module_header(prelude)];
        parts.extend(self.kernels.iter().map(|k| k.source.clone()));
        parts.join("\n")
    }

    /// What precedes the kernels in the module: `prelude`, then the custom ops' sources.
    pub fn module_header(&self, prelude: &str) -> String {
        let mut parts = vec![prelude.to_string()];
        parts.extend(self.custom_sources.iter().cloned());
        parts.join("\n")
    }

    /// The module's source in pieces (header, then each kernel), for a target to compile.
    pub(crate) fn module(&self, prelude: &str) -> ModuleSource {
        ModuleSource {
            header: self.module_header(prelude),
            kernels: self.kernels.iter().map(|k| (k.name.clone(), k.source.clone())).collect(),
        }
    }

    /// The kernels' names, in launch order.
    pub fn kernel_names(&self) -> Vec<&str> {
        self.kernels.iter().map(|k| k.name.as_str()).collect()
    }
}

/// The source of a compiled module, kept in pieces so that a target can compile it as one unit
/// or as several at once: what every kernel needs (the renderer's prelude and the custom ops'
/// sources), then each kernel.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ModuleSource {
    /// What precedes the kernels.
    pub header: String,
    /// Each kernel's name and source, in launch order.
    pub kernels: Vec<(String, String)>,
}

impl ModuleSource {
    /// The whole source file: the header, then every kernel.
    pub(crate) fn whole(&self) -> String {
        let mut parts = vec![self.header.as_str()];
        parts.extend(self.kernels.iter().map(|(_, source)| source.as_str()));
        parts.join("\n")
    }

    /// The kernels in at most `units` sources of their own, each the header and a run of
    /// consecutive kernels of about equal length (so that compiling them in parallel finishes
    /// together), with the kernels each holds: what a target compiles in parallel. With one unit,
    /// the whole source.
    pub(crate) fn units(&self, units: usize) -> Vec<(Vec<String>, String)> {
        let units = units.clamp(1, self.kernels.len().max(1));
        let total: usize = self.kernels.iter().map(|(_, s)| s.len()).sum();
        let mut out: Vec<(Vec<String>, Vec<&str>)> = Vec::new();
        let mut done = 0;
        for (name, source) in &self.kernels {
            // Start a new unit once this one holds its share of the source.
            let share = (total * out.len()).div_ceil(units);
            if out.is_empty() || (done >= share && out.len() < units) {
                out.push((Vec::new(), vec![self.header.as_str()]));
            }
            let last = out.last_mut().expect("pushed above");
            last.0.push(name.clone());
            last.1.push(source);
            done += source.len();
        }
        out.into_iter().map(|(names, parts)| (names, parts.join("\n"))).collect()
    }
}

impl fmt::Display for OutputCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "// Output code: {} kernel(s) in {} for {}, {} extern call(s)",
            self.kernels.len(),
            self.language,
            self.device,
            self.extern_calls.len()
        )?;
        for source in &self.custom_sources {
            writeln!(f, "\n// custom op source:\n{}", source.trim_end())?;
        }
        for k in &self.kernels {
            writeln!(f)?;
            writeln!(f, "// {} computes:", k.name)?;
            for line in origin_lines(&k.origins) {
                writeln!(f, "//   {line}")?;
            }
            f.write_str(&k.source)?;
        }
        writeln!(f)?;
        f.write_str(&self.call)?;
        for choice in &self.choices {
            writeln!(f, "// {choice}")?;
        }
        Ok(())
    }
}

/// Origins grouped by source line: `engine/tests/mlp.rs:24: %add, %mul (add, mul)`.
fn origin_lines(origins: &[Origin]) -> Vec<String> {
    let mut lines: Vec<(String, Vec<String>, Vec<&str>)> = Vec::new();
    for o in origins {
        let place = o.location.map(|l| l.short()).unwrap_or_else(|| "graph".into());
        match lines.iter_mut().find(|(p, _, _)| *p == place) {
            Some((_, nodes, ops)) => {
                nodes.push(format!("%{}", o.node));
                if !ops.contains(&o.op) {
                    ops.push(o.op);
                }
            }
            None => lines.push((place, vec![format!("%{}", o.node)], vec![o.op])),
        }
    }
    lines.into_iter().map(|(place, nodes, ops)| format!("{place}: {} ({})", nodes.join(", "), ops.join(", "))).collect()
}

/// A view as the plan passes it: the buffer's name, or `name.as_strided(...)` when the view is
/// not the buffer's own layout.
fn view_text(graph: &LoweredGraph, view: &View) -> String {
    let name = graph.buffer_name(view.buffer);
    let natural = match view.buffer {
        BufferName::Input(i) => Layout::new(graph.inputs[i].shape.clone(), graph.inputs[i].strides.clone(), 0),
        BufferName::Node(n) => Layout::contiguous(&graph[n].shape),
    };
    if view.layout == natural {
        return name;
    }
    let l = &view.layout;
    format!("{name}.as_strided({:?}, {:?}, {})", l.shape(), l.strides(), l.offset())
}

/// What the call plan says of a step whose outputs are kept across calls (`runtime::kept`).
const KEPT: &str = "kept across calls while its inputs are unchanged (as freezing's constant folding)";

fn render_call(graph: &LoweredGraph, kernels: &[Kernel], plan: &CallPlan) -> String {
    let params: Vec<String> = graph.inputs.iter().map(|i| format!("{}: {}{:?}", i.name, i.dtype, i.shape)).collect();
    let results: Vec<String> =
        graph.outputs.iter().map(|o| format!("{}{:?}", graph.buffer_dtype(o.buffer), o.layout.shape())).collect();
    let mut out = format!("fn call({}) -> ({},) {{\n", params.join(", "), results.join(", "));
    for step in &plan.steps {
        let line = match step {
            Step::Alloc { buffer, reuses: None } => {
                let (shape, dtype) = (&graph[*buffer].shape, graph[*buffer].dtype);
                match dtype {
                    DType::F32 => format!("let buf{buffer} = empty({shape:?});  // {} floats", numel(shape)),
                    _ => format!("let buf{buffer} = empty({shape:?}, {dtype});  // {} {dtype} elements", numel(shape)),
                }
            }
            Step::Alloc { buffer, reuses: Some(old) } => {
                format!("let buf{buffer} = buf{old};  // reuse: buf{old} is dead and has the same size")
            }
            Step::Kernel { kernel, kept } => {
                let k = &kernels[kernel.0];
                let args: Vec<String> = k.args.iter().map(|a| graph.buffer_name(a.buffer)).collect();
                let kept = if *kept { format!("  // {KEPT}") } else { String::new() };
                format!("{}({}, xnumel = {});{kept}", k.name, args.join(", "), k.xnumel)
            }
            Step::Extern { node, kept } => {
                let kept = if *kept { format!("; {KEPT}") } else { String::new() };
                let n = &graph[*node];
                let place = n.location.map(|l| format!(" at {}", l.short())).unwrap_or_default();
                match &n.body {
                    NodeBody::Matmul { a, b, epilogue } => {
                        let mut args = vec![view_text(graph, a), view_text(graph, b)];
                        args.extend(epilogue.bias.as_ref().map(|v| format!("bias = {}", view_text(graph, v))));
                        args.extend(epilogue.relu.then(|| "relu".to_string()));
                        args.extend(
                            epilogue.residual.as_deref().map(|v| format!("residual = {}", view_text(graph, v))),
                        );
                        let absorbed: String = epilogue.absorbed.iter().map(|n| format!(", %{n}")).collect();
                        let fused = if epilogue.is_none() { "" } else { " (epilogue fused into the GEMM)" };
                        format!(
                            "extern_kernels::matmul({}, out = buf{node});  // %{}{absorbed}{place}{fused}{kept}",
                            args.join(", "),
                            n.origin_name
                        )
                    }
                    NodeBody::ExternKernel { kernel, op, inputs, out_layout } => {
                        let mut texts: Vec<String> = inputs.iter().map(|v| view_text(graph, v)).collect();
                        // A fifth operand of the FP8 product is the bias folded into it.
                        let fused = if matches!(op, Op::ScaledMm { .. }) && texts.len() == 5 {
                            texts[4] = format!("bias = {}", texts[4]);
                            " (bias added in the GEMM's epilogue)"
                        } else {
                            ""
                        };
                        let params: Vec<String> = op.params().iter().map(|(k, v)| format!(", {k} = {v}")).collect();
                        let out =
                            view_text(graph, &View { buffer: BufferName::Node(*node), layout: out_layout.clone() });
                        format!(
                            "extern_kernels::{kernel}({}{}, out = {out});  // %{}{place}{fused}{kept}",
                            texts.join(", "),
                            params.concat(),
                            n.origin_name
                        )
                    }
                    NodeBody::Fallback { op, args } => {
                        let args: Vec<String> = args
                            .iter()
                            .map(|a| match a {
                                FallbackArg::Tensor(v) => view_text(graph, v),
                                FallbackArg::Scalar(s) => format!("{s:?}"),
                            })
                            .collect();
                        format!(
                            "fallback::{}({}, out = buf{node});  // %{}{place}, run eagerly: no lowering",
                            op.name(),
                            args.join(", "),
                            n.origin_name
                        )
                    }
                    _ => unreachable!("extern steps run extern nodes"),
                }
            }
        };
        out.push_str("    ");
        out.push_str(&line);
        out.push('\n');
    }
    // A value written into an input in place is returned as that input.
    let returned: Vec<String> = plan.outputs.iter().map(|o| view_text(graph, o)).collect();
    out.push_str(&format!("    return ({},);\n}}\n", returned.join(", ")));
    out
}
