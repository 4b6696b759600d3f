//! A compiled program as plain data: the module source, the schedule with each kernel named, the
//! GEMM choices and the CUDA-graph decision. Code generation makes one and the FX graph cache
//! stores it; either way [`ProgramSpec::build`] is the one place a runnable [`Program`] is made,
//! so a program read from the cache is built exactly as a fresh one.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::cpu::CpuProgram;
use super::cuda::CudaProgram;
use super::{KernelSpec, Program, Schedule};
use crate::codecache::CCompiler;
use crate::compile_mode::Mode;
use crate::device::Device;
use crate::device::cuda::CudaDevice;
use crate::error::Result;
use crate::inductor::ir::IrId;
use crate::inductor::modes::cudagraphs;
use crate::inductor::modes::gemm_choice::GemmSpec;

/// Everything needed to build a compiled graph's program, with nothing left to lower or choose.
#[derive(Serialize, Deserialize)]
pub(crate) struct ProgramSpec {
    /// The whole source to compile: the renderer's prelude, then every kernel.
    pub module_source: String,
    /// The call plan's steps, buffers and outputs.
    pub schedule: Schedule<KernelSpec>,
    /// The matmuls not on cuBLAS (GPU only), by node.
    pub gemms: Vec<(IrId, GemmSpec)>,
    /// Why the plan cannot be recorded as a CUDA graph; `None` when it can (decided at compile
    /// time, from the lowered graph the cache does not keep).
    pub cuda_graph_skip: Option<String>,
}

impl ProgramSpec {
    /// Compiles the module (the system C compiler, or NVRTC for the device's architecture, both
    /// through the disk cache) and resolves its kernels; under reduce-overhead and max-autotune, a
    /// GPU plan that can be recorded is wrapped to record and replay a CUDA graph.
    pub(crate) fn build(self, device: Device, mode: Mode) -> Result<Arc<dyn Program>> {
        let ProgramSpec { module_source, schedule, gemms, cuda_graph_skip } = self;
        let has_kernels = schedule.has_kernels();
        match device {
            Device::Cpu => {
                let library = if has_kernels { Some(CCompiler::detect()?.compile(&module_source)?) } else { None };
                Ok(Arc::new(CpuProgram::new(schedule, library)?))
            }
            Device::Cuda(ordinal) => {
                let gpu = CudaDevice::get(ordinal)?;
                let module = if has_kernels { Some(gpu.load(&module_source)?) } else { None };
                let gemms =
                    gemms.iter().map(|(id, spec)| Ok((*id, spec.load(&gpu)?))).collect::<Result<HashMap<_, _>>>()?;
                let program = CudaProgram::new(gpu, schedule, module, gemms)?;
                Ok(if mode.records_cuda_graphs() && cuda_graph_skip.is_none() {
                    Arc::new(cudagraphs::Graphed::new(program))
                } else {
                    Arc::new(program)
                })
            }
        }
    }
}
