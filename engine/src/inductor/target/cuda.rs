//! The CUDA target, the analogue of Inductor's Triton backend (`codegen/triton.py` with its
//! launcher): kernels printed as CUDA C ([`codegen::cuda`](crate::inductor::codegen::cuda)),
//! compiled by NVRTC for the device's exact architecture (cached on disk), loaded as a module and
//! launched on the device's stream by the CUDA runtime.
//!
//! The GPU is where the mode features act ([`crate::inductor::modes`]): each matmul's kernel is
//! chosen by rule, or timed under max-autotune (which also times each kernel's launch and folds
//! GEMM epilogues where cuBLASLt can apply them), and under reduce-overhead and max-autotune the
//! plan is recorded as a CUDA graph and replayed.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Generated, ModuleSource, ProgramSpec, Target, TargetChoices};
use crate::compile_mode::Mode;
use crate::compile_time::{self, Stage};
use crate::device::Device;
use crate::device::cuda::CudaDevice;
use crate::device::cuda::nvrtc::{self, Warmed};
use crate::device::cuda::tuned::cublaslt::lt_version;
use crate::device::cuda::tuned::extern_family;
use crate::error::{Error, Result};
use crate::inductor::codegen::{Renderer, cuda};
use crate::inductor::config::{Config, Printers};
use crate::inductor::ir::IrId;
use crate::inductor::lowering::FoldFor;
use crate::inductor::modes::gemm_choice::{self, GemmSpec};
use crate::inductor::modes::{autotune, cudagraphs, gemm_epilogue, launch_tuning};
use crate::inductor::runtime::cuda::CudaProgram;
use crate::inductor::runtime::{Program, Run};
use crate::inductor::split_reductions::SplitRule;
use crate::logs::{self, Artifact};

/// The multiprocessors of an H100 SXM: what reductions are split for when code is generated with
/// no GPU to ask.
const H100_MULTIPROCESSORS: u32 = 132;

/// CUDA C for the GPU of this ordinal.
pub(crate) struct CudaTarget {
    /// Which GPU.
    pub ordinal: usize,
}

/// What the CUDA target decides after code generation, and the FX graph cache keeps.
#[derive(Serialize, Deserialize)]
struct CudaChoices {
    /// The matmuls not on cuBLAS, by node.
    gemms: Vec<(IrId, GemmSpec)>,
    /// Why the plan cannot be recorded as a CUDA graph; `None` when it can (decided at compile
    /// time, from the lowered graph the cache does not keep).
    cuda_graph_skip: Option<String>,
}

impl Target for CudaTarget {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    fn language(&self) -> &'static str {
        "CUDA C"
    }

    fn renderer(&self, printers: &Printers) -> Box<dyn Renderer> {
        Box::new(printers.for_cuda())
    }

    fn identity(&self) -> Result<String> {
        let gpu = CudaDevice::get(self.ordinal)?;
        let facts = gpu.facts();
        // Max-autotune's cuBLASLt algorithms, and whether epilogues fold, depend on it.
        let lt = lt_version(&gpu).ok();
        Ok(format!("{} {} cublaslt {lt:?}", facts.name, facts.arch()))
    }

    /// Reductions that would leave multiprocessors idle, for this GPU's count of them (an H100
    /// SXM's 132 where there is no GPU to ask: code generation alone).
    fn reduction_split(&self) -> SplitRule {
        let multiprocessors =
            CudaDevice::get(self.ordinal).map_or(H100_MULTIPROCESSORS, |gpu| gpu.facts().multiprocessors);
        SplitRule::FillGpu { multiprocessors: multiprocessors as usize }
    }

    /// Where cuBLASLt, which applies them, can run: under max-autotune every product's, in the
    /// other modes the half-precision products' (which run on cuBLASLt by default).
    fn gemm_epilogues(&self, mode: Mode) -> Option<FoldFor> {
        if !CudaDevice::get(self.ordinal).is_ok_and(|gpu| gpu.lt().is_ok()) {
            return None;
        }
        Some(match mode {
            Mode::MaxAutotune => gemm_epilogue::fold as FoldFor,
            _ => gemm_epilogue::fold_half_precision as FoldFor,
        })
    }

    /// Each matmul's kernel (timed under max-autotune, by rule otherwise, noted in the output
    /// code), under max-autotune each kernel's launch, and whether the plan can be recorded.
    fn tune(&self, generated: &mut Generated, config: &Config, _log: bool) -> Result<TargetChoices> {
        let gpu = CudaDevice::get(self.ordinal)?;
        let gemms = if config.mode == Mode::MaxAutotune {
            match gpu.lt() {
                Err(e) => {
                    logs::log(Artifact::Autotuning, || {
                        format!("cuBLASLt cannot run ({e}): every matmul stays on cuBLAS, untimed")
                    });
                    Vec::new()
                }
                Ok(_) => {
                    let choose = || autotune::choose_gemms(&gpu, &generated.lowered, config.gemm_backends);
                    let choices = compile_time::timed(Stage::Autotune, || "GEMM choices".into(), choose)?;
                    generated.output_code.choices.extend(choices.notes.iter().map(|n| format!("max-autotune: {n}")));
                    choices.gemms
                }
            }
        } else {
            let choices = gemm_choice::by_rule(&gpu, &generated.lowered)?;
            generated.output_code.choices.extend(choices.notes);
            choices.gemms
        };
        if config.mode == Mode::MaxAutotune {
            compile_time::timed(Stage::Autotune, || "kernel launches".into(), || tune_launches(&gpu, generated))?;
        }
        let cuda_graph_skip = cudagraphs::skip_reason(&generated.lowered);
        TargetChoices::of(&CudaChoices { gemms, cuda_graph_skip })
    }

    fn log_choices(&self, choices: &TargetChoices, mode: Mode) {
        if mode.records_cuda_graphs()
            && let Ok(CudaChoices { cuda_graph_skip: Some(reason), .. }) = choices.read()
        {
            cudagraphs::log_skip(&reason);
        }
    }

    /// Everything the program runs, made ready before its first call: each generated kernel
    /// compiled by NVRTC into a CUBIN of its own, and the extern kernel families its plan calls
    /// (flash attention, `cat`, the engine's GEMMs), all at once in parallel threads and through
    /// the disk cache, then loaded; each matmul's chosen kernel loaded, and cuBLAS's handle
    /// created if a product runs on it. Under reduce-overhead and max-autotune, a plan that can be
    /// recorded is wrapped to record and replay a CUDA graph.
    fn build(&self, spec: ProgramSpec, config: &Config) -> Result<Arc<dyn Program>> {
        let mode = config.mode;
        let CudaChoices { gemms, cuda_graph_skip } = spec.choices.read()?;
        let gpu = CudaDevice::get(self.ordinal)?;
        let (names, sources): (Vec<Vec<String>>, Vec<String>) =
            if spec.schedule.has_kernels() { units(&spec.module).into_iter().unzip() } else { Default::default() };
        let mut families: Vec<&str> = gemms.iter().filter_map(|(_, gemm)| gemm.family()).collect();
        let mut on_cublas = false;
        for step in &spec.schedule.steps {
            match step {
                Run::ExternKernel { op, .. } => families.extend(extern_family(op)),
                Run::Matmul { out, .. } => on_cublas |= !gemms.iter().any(|(id, _)| id == out),
                _ => {}
            }
        }
        families.sort_unstable();
        families.dedup();
        let modules = gpu.load_with_families(&sources, &families)?;
        if on_cublas {
            drop(
                gpu.blas()
                    .map_err(|e| Error::Backend { backend: "inductor".into(), message: format!("cuBLAS: {e}") })?,
            );
        }
        let module_of = names
            .into_iter()
            .zip(modules)
            .flat_map(|(names, module)| names.into_iter().map(move |name| (name, module.clone())))
            .collect();
        let gemms = gemms.iter().map(|(id, gemm)| Ok((*id, gemm.load(&gpu)?))).collect::<Result<HashMap<_, _>>>()?;
        let program = CudaProgram::new(gpu, spec.schedule, module_of, gemms, config.guard_buffers)?;
        // Guarded launches read their guards back between kernels, which a recording cannot hold.
        Ok(if mode.records_cuda_graphs() && cuda_graph_skip.is_none() && !config.guard_buffers {
            Arc::new(cudagraphs::Graphed::new(program))
        } else {
            Arc::new(program)
        })
    }
}

/// What NVRTC compiles for a module: each kernel after the header, in a CUBIN of its own (NVRTC
/// compiles them in parallel threads, and a kernel whose source did not change between two
/// graphs, or two sizes of one graph, comes from the disk cache).
fn units(module: &ModuleSource) -> Vec<(Vec<String>, String)> {
    module.units(module.kernels.len())
}

/// Compiles `module`'s kernels for a GPU of architecture `arch` (`sm_90`) into the disk cache, as
/// [`CudaTarget::build`] would, without a GPU.
pub(crate) fn precompile(module: &ModuleSource, arch: &str) -> Result<Warmed> {
    nvrtc::warm(units(module).into_iter().map(|(_, source)| source).collect(), arch)
}

/// Max-autotune's launch for each kernel the engine's CUDA printer wrote (a learner's printer's
/// kernels keep theirs): the chosen block size printed into the kernel's source and noted, with
/// its times, in the output code.
fn tune_launches(gpu: &Arc<CudaDevice>, generated: &mut Generated) -> Result<()> {
    let prelude = cuda::prelude();
    let header = generated.output_code.module_header(&prelude);
    for (i, k) in generated.kernels.iter().enumerate() {
        let printed = cuda::kernel(k);
        if generated.output_code.kernels[i].source != printed.source {
            continue;
        }
        let Some((launch, note)) = launch_tuning::choose_launch(gpu, k, &printed.source, &header)? else {
            continue;
        };
        generated.output_code.kernels[i].source = cuda::kernel_for(k, &k.name, launch).source;
        generated.launches[i] = launch;
        generated.output_code.choices.push(format!("max-autotune: {note}"));
    }
    generated.module = generated.output_code.module(&prelude);
    Ok(())
}
