//! The codegen-target seam, in the shape tinygrad gives its devices (a renderer, a compiler and a
//! runtime each): everything that depends on what the kernels are printed in and where they run,
//! behind one trait, [`Target`]. `compile_fx`, the FX graph cache, the output code and the
//! runtime ask the target; only [`for_device`] names the targets.
//!
//! | target | renders with | compiles and loads with | runs the plan with |
//! | --- | --- | --- | --- |
//! | C (`c.rs`) | [`codegen::c`](super::codegen::c) | the system C compiler, a shared library ([`crate::codecache`]) | `runtime::host` |
//! | CUDA (`cuda.rs`) | [`codegen::cuda`](super::codegen::cuda) | NVRTC, a CUBIN for the device's architecture | `runtime::cuda`; the mode features ([`super::modes`]) |
//! | interpreter (`interpreter/`) | the kernel IR's own text ([`Kernel`](super::kernel::Kernel)'s `Display`) | a parser of that text: no compiler at all | `runtime::host`, each kernel interpreted |
//!
//! A target is chosen by the graph's device and [`Config::target`]; a new one is a renderer
//! (or an existing one), a [`Target`] implementation, a runtime (or the host one), one arm in
//! [`for_device`] and one [`TargetKind`] variant (the book's phase 4 engine chapter lists the
//! files).

pub(crate) mod c;
pub(crate) mod cuda;
pub(crate) mod interpreter;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::call_plan::CallPlan;
use super::codegen::Renderer;
use super::config::{Config, Printers, TargetKind};
use super::ir::LoweredGraph;
use super::kernel::Kernel;
use super::launch::Launch;
use super::lowering::FoldFor;
pub(crate) use super::output_code::ModuleSource;
use super::output_code::OutputCode;
use super::runtime::{KernelSpec, Program, Schedule};
use super::split_reductions::SplitRule;
use crate::compile_mode::Mode;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::op::CustomOp;

/// What a codegen target provides: rendering kernel IR, compiling and loading what was rendered,
/// the decisions a mode makes after code generation, and the program that runs the call plan.
pub(crate) trait Target: Send + Sync {
    /// How logs and the cache name it: `c`, `cuda`, `interpreter`.
    fn name(&self) -> &'static str;

    /// The device whose memory the compiled program reads and writes.
    fn device(&self) -> Device;

    /// The language its kernels are printed in, as the output code names it.
    fn language(&self) -> &'static str;

    /// The renderer, with the config's replacement printers in front where the target takes them.
    fn renderer(&self, printers: &Printers) -> Box<dyn Renderer>;

    /// The toolchain and hardware a compiled artifact depends on, for the FX graph cache's key
    /// (an error bypasses the cache).
    fn identity(&self) -> Result<String>;

    /// The fold lowering offers each op to in `mode`: the GEMM epilogue where the target's matrix
    /// products apply one; `None` to lower every op as it is.
    fn gemm_epilogues(&self, mode: Mode) -> Option<FoldFor>;

    /// Which reductions to split in two where the config leaves it to the target
    /// ([`SplitReductions::Auto`](super::config::SplitReductions)): none by default, which is
    /// the CPU's choice (bench/NOTES-training.md, "Split reductions").
    fn reduction_split(&self) -> SplitRule {
        SplitRule::Never
    }

    /// What `config`'s mode decides once the code is generated (which library each matmul runs
    /// on, the launch of each kernel, whether the plan can be recorded as a CUDA graph): it may
    /// edit the generated kernels' sources, launches and notes, and returns what the program needs
    /// of it. `log` is false for a dynamic graph's later bindings, which log nothing.
    fn tune(&self, generated: &mut Generated, config: &Config, log: bool) -> Result<TargetChoices>;

    /// Logs what a compiled program's choices mean in `mode` (reduce-overhead's reason not to
    /// record a graph), for a fresh compile and a cache hit alike.
    fn log_choices(&self, _choices: &TargetChoices, _mode: Mode) {}

    /// Compiles the module (through the disk cache), loads it and resolves every kernel of the
    /// schedule: the program, ready to run, in `config`'s mode (its kernels' buffers guarded where
    /// [`Config::guard_buffers`] asks).
    fn build(&self, spec: ProgramSpec, config: &Config) -> Result<Arc<dyn Program>>;
}

/// The target for a graph whose inputs are on `device`, as `kind` asks: the device's own
/// compiled code (C on the CPU, CUDA C on a GPU), or the interpreter.
pub(crate) fn for_device(device: Device, kind: TargetKind) -> Result<Arc<dyn Target>> {
    match (kind, device) {
        (TargetKind::Native, Device::Cpu) => Ok(Arc::new(c::CTarget)),
        (TargetKind::Native, Device::Cuda(ordinal)) => Ok(Arc::new(cuda::CudaTarget { ordinal })),
        (TargetKind::Interpreter, Device::Cpu) => Ok(Arc::new(interpreter::InterpreterTarget)),
        (TargetKind::Interpreter, Device::Cuda(_)) => Err(Error::Backend {
            backend: "inductor".into(),
            message: format!(
                "the interpreter target runs on the CPU, but the graph's inputs are on {device}; move them with \
                 `.to(Device::Cpu)` or use the native target"
            ),
        }),
    }
}

/// The CUDA target for code generation alone, which needs no GPU (a warm-up of the cache for
/// another machine's GPU).
pub(crate) fn for_any_gpu(kind: TargetKind) -> Result<Arc<dyn Target>> {
    for_device(Device::Cuda(0), kind)
}

/// Compiles `module` (CUDA C) for a GPU of architecture `arch` into the disk cache as the CUDA
/// target's build would, without a GPU: a warm-up for another machine.
pub(crate) fn precompile_cuda(module: &ModuleSource, arch: &str) -> Result<crate::device::cuda::nvrtc::Warmed> {
    cuda::precompile(module, arch)
}

/// Everything code generation produces for one graph and one binding of its sizes, before
/// anything is compiled: what a target tunes and builds from.
pub(crate) struct Generated {
    /// The loop-level IR.
    pub lowered: LoweredGraph,
    /// The kernels, in launch order.
    pub kernels: Vec<Kernel>,
    /// How each kernel is launched (used on a GPU).
    pub launches: Vec<Launch>,
    /// The call plan.
    pub plan: CallPlan,
    /// What the user reads.
    pub output_code: OutputCode,
    /// The source to compile: the renderer's prelude, then every kernel.
    pub module: ModuleSource,
    /// What `ENGINE_LOGS=fusion` prints for it.
    pub fusion_log: String,
}

/// A compiled program as plain data: the module source, the schedule with each kernel named, and
/// what the target decided after code generation. Code generation makes one and the FX graph
/// cache stores it; either way [`Target::build`] makes the program from it, so a program read
/// from the cache is built exactly as a fresh one.
#[derive(Serialize, Deserialize)]
pub(crate) struct ProgramSpec {
    /// The source to compile: the renderer's prelude, then every kernel.
    pub module: ModuleSource,
    /// The call plan's steps, buffers and outputs.
    pub schedule: Schedule<KernelSpec>,
    /// The target's decisions ([`Target::tune`]).
    pub choices: TargetChoices,
    /// The custom ops the kernels call, for a target that calls them rather than compiling their
    /// source (the interpreter). Not stored: the FX graph cache never holds a graph with custom ops.
    #[serde(skip)]
    pub custom_ops: Vec<CustomOp>,
}

/// A target's decisions about one program, as the target writes them (JSON, so that the FX
/// graph cache stores them without knowing any target's types).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct TargetChoices(serde_json::Value);

impl TargetChoices {
    /// Nothing decided.
    pub(crate) fn none() -> TargetChoices {
        TargetChoices::default()
    }

    /// `choices`, written for the cache.
    pub(crate) fn of<T: Serialize>(choices: &T) -> Result<TargetChoices> {
        serde_json::to_value(choices).map(TargetChoices).map_err(|e| Error::Backend {
            backend: "inductor".into(),
            message: format!("a target's choices cannot be written: {e}"),
        })
    }

    /// The choices as the target wrote them.
    pub(crate) fn read<T: for<'de> Deserialize<'de>>(&self) -> Result<T> {
        serde_json::from_value(self.0.clone()).map_err(|e| Error::Backend {
            backend: "inductor".into(),
            message: format!("a target's stored choices cannot be read ({e}); clear the cache (ENGINE_CACHE_DIR)"),
        })
    }
}
