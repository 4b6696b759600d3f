//! The entry point, the analogue of `torch._inductor.compile_fx.compile_fx`: decompose, lower,
//! schedule and fuse, generate code, compile it, plan the call.

use super::codegen;
use super::config::Config;
use super::ir::LoweredGraph;
use super::kernel::KernelBody;
use super::kernel::{self, Kernel};
use super::output_code::OutputCode;
use super::runtime::CpuProgram;
use super::scheduler::{self, GroupKind, Schedule};
use super::wrapper::{self, CallPlan};
use super::{CompiledModule, lowering};
use crate::aot;
use crate::codecache::CCompiler;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::fx::Graph;
use crate::logs::{self, Artifact};

/// Everything code generation produces for one graph, before anything is compiled.
pub(crate) struct Generated {
    pub lowered: LoweredGraph,
    pub kernels: Vec<Kernel>,
    pub plan: CallPlan,
    pub output_code: OutputCode,
}

/// Compiles a captured graph for the device its inputs are on.
pub fn compile_fx(graph: &Graph, config: &Config) -> Result<CompiledModule> {
    let device = graph.placeholders().first().map(|&p| graph.node(p).meta.device).unwrap_or_default();
    let generated = generate_for(graph, device, config)?;
    logs::log(Artifact::OutputCode, || generated.output_code.to_string());
    let Generated { lowered, kernels, plan, output_code } = generated;
    let program = match device {
        Device::Cpu => {
            let library = if kernels.is_empty() {
                None
            } else {
                let sources: Vec<&str> = output_code.kernels.iter().map(|k| k.source.as_str()).collect();
                let module = format!("{}\n{}", codegen::c::prelude(), sources.join("\n"));
                Some(CCompiler::detect()?.compile(&module)?)
            };
            CpuProgram::new(&lowered, &kernels, &plan, library)?
        }
        Device::Cuda(i) => {
            return Err(Error::Backend {
                backend: "inductor".into(),
                message: format!("cuda:{i} graphs need the CUDA runtime, which this build does not have yet"),
            });
        }
    };
    Ok(CompiledModule { output_code, program })
}

/// The output code Inductor would compile for `graph` on `device`, without compiling it: how
/// to read the CUDA C for a model on a machine with no GPU.
pub fn generate(graph: &Graph, device: Device, config: &Config) -> Result<OutputCode> {
    generate_for(graph, device, config).map(|g| g.output_code)
}

fn generate_for(graph: &Graph, device: Device, config: &Config) -> Result<Generated> {
    let decomposed = aot::decompose(graph)?;
    let lowered = lowering::lower(&decomposed)?;
    let schedule = scheduler::schedule(&lowered, config.fusion)?;
    logs::log(Artifact::Fusion, || fusion_log(&schedule));
    let kernels = build_kernels(&lowered, &schedule);
    let plan = wrapper::plan(&lowered, &schedule);
    let sources = kernels.iter().map(|k| print(k, device, config)).collect();
    let output_code = OutputCode::new(device, &lowered, &kernels, sources, &plan);
    Ok(Generated { lowered, kernels, plan, output_code })
}

/// A kernel's source for `device`, from the configured printer or the engine's own.
fn print(k: &Kernel, device: Device, config: &Config) -> String {
    let p = &config.printers;
    let pointwise = matches!(k.body, KernelBody::Pointwise(_));
    match device {
        Device::Cpu => match (pointwise, p.pointwise_c, p.reduction_c) {
            (true, Some(print), _) | (false, _, Some(print)) => print(k),
            _ => codegen::c::kernel(k),
        },
        Device::Cuda(_) => match (pointwise, p.pointwise_cuda) {
            (true, Some(print)) => print(k),
            _ => codegen::cuda::kernel(k).source,
        },
    }
}

/// One kernel per fused group, numbered in launch order.
fn build_kernels(lowered: &LoweredGraph, schedule: &Schedule) -> Vec<Kernel> {
    schedule
        .groups
        .iter()
        .filter(|g| g.kind != GroupKind::Extern)
        .enumerate()
        .map(|(i, g)| kernel::build(lowered, schedule, g, i))
        .collect()
}

fn fusion_log(schedule: &Schedule) -> String {
    let mut lines: Vec<String> = schedule.decisions.iter().map(ToString::to_string).collect();
    lines.push(format!("{} group(s) after fusion", schedule.groups.len()));
    lines.join("\n")
}
