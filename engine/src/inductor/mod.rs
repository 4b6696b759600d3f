//! TorchInductor: lowers a decomposed graph to loop-level IR, fuses it into kernels, prints each
//! kernel as C (CPU) or CUDA C (GPU), compiles it, and runs a `call` plan that allocates buffers
//! and launches the kernels.
//!
//! ## The pipeline
//!
//! [`compile_fx`] runs these stages in order; each is one module, declared below in the same
//! order, and each hands the next one typed value:
//!
//! ```text
//! fx::Graph ──aot::decompose──▶ fx::Graph (primitive ops only)
//!   ──pattern_matcher::rewrite──▶ fx::Graph   known subgraphs (naive attention) → fused ops
//!   ──pattern_matcher::concat_linears──▶ fx::Graph   parallel linears of one input → one matmul
//!   ──lowering::lower──▶ ir::LoweredGraph      loop-level IR: pointwise, reduction, extern nodes
//!   ──split_reductions──▶ ir::LoweredGraph     reductions too narrow for the device in two layers
//!   ──scheduler::schedule──▶ scheduler::Schedule   nodes fused into groups, each decision logged
//!   ──kernel::build──▶ kernel::Kernel          one per group, numbered in launch order
//!   ──codegen::Renderer──▶ Rendered            the target's source (C, CUDA C, kernel IR), its launch
//!   ──call_plan::plan──▶ call_plan::CallPlan     buffers, their reuse, the calls in order
//!   ──output_code / runtime──▶ CompiledModule  the readable output code; the compiled program
//! ```
//!
//! The stages never name a device: what depends on the kernels' language and where they run is
//! the codegen target's (`target`: C, CUDA C, or an interpreter of the kernel IR, chosen by
//! [`Config::target`]), and what a mode adds is in [`modes`].
//!
//! | TorchInductor | here |
//! | --- | --- |
//! | `compile_fx.py` | [`compile_fx`] |
//! | `config.py` | [`config`] |
//! | `pattern_matcher.py`, `fx_passes/fuse_attention.py` | [`pattern_matcher`] |
//! | `lowering.py` | [`lowering`] |
//! | `ir.py` (`Pointwise`, `Reduction`, `ExternKernel`), its index expressions | [`ir`], [`index`] |
//! | `ir.py`'s `Reduction.num_splits` and `create_multilayer` | [`split_reductions`] |
//! | `scheduler.py` (`can_fuse`, `ForeachKernelSchedulerNode`) | [`scheduler`] |
//! | the kernel body a `SIMDKernel` collects | [`kernel`] |
//! | `codegen/cpp.py`, `codegen/triton.py` | [`codegen::c`], [`codegen::cuda`], behind [`codegen::Renderer`] |
//! | Triton launch metadata (block size, grid) | [`launch`] |
//! | `codegen/wrapper.py` (the `call` function) | [`call_plan`] |
//! | `TORCH_LOGS=output_code` | [`output_code`] |
//! | `codecache.py`, the loaded module's `call` | [`crate::codecache`]; `runtime` (internal) runs the plan on a CPU or GPU |
//! | a backend per device (`CppScheduling`, `TritonScheduling`); tinygrad's renderer + compiler + runtime | `target` (internal): C, CUDA C, and an interpreter of the kernel IR, chosen by [`Config::target`] |
//! | `freezing.py`'s constant folding (parameter-only subgraphs computed once) | `runtime::kept` (internal): joined weights (a `cat` of unwritten inputs that matrix products read as weight or bias) skipped while those inputs are unchanged |
//! | max-autotune, reduce-overhead, `FxGraphCache` | [`modes`]: GEMM choice and epilogues, autotuning, CUDA graphs, the FX graph cache |
//!
//! ```
//! use engine::{backends::Inductor, dynamo, Tensor};
//! let inductor = Inductor::default();
//! let f = dynamo::compile(|(x, b): (Tensor, Tensor)| x.add(&b)?.relu()?.mul(2.0)).backend(inductor.clone());
//! let y = f.call((&Tensor::randn(&[1000], 0), &Tensor::randn(&[1000], 1)))?;
//! assert_eq!(inductor.output_codes()[0].kernel_names(), ["poi_fused_add_relu_mul_0"]);
//! # Ok::<(), engine::Error>(())
//! ```

// The entry point and its settings.
mod compile_fx;
pub mod config;

// How a cached artifact writes the parts that point into the process (source lines, op names).
mod serde_refs;

// 0. Rewrites of the FX graph (naive attention into the fused op).
pub mod pattern_matcher;

// 1. Lowering to loop-level IR.
pub mod index;
pub mod ir;
pub mod lowering;
pub mod split_reductions;

// 2. Scheduling and fusion.
pub mod scheduler;

// 3. Kernel IR, one kernel per fused group.
pub mod kernel;

// 4. Rendering each kernel for its target, with its launch.
pub mod codegen;
pub mod launch;

// 5. The call plan.
pub mod call_plan;

// 6. What the user reads, and what runs.
pub mod output_code;
mod runtime;

// The codegen targets: rendering, compiling, loading and running, one per target.
mod target;

// What the modes add (GEMM choice and epilogues, autotuning, CUDA graphs) and the FX graph cache.
pub mod modes;

pub use crate::compile_mode::Mode;
pub use compile_fx::{compile_fx, generate, kernels, warm_cuda_cache};
pub use config::{Config, GemmBackends, Printers, SplitReductions, TargetKind};
pub use output_code::OutputCode;

use crate::error::Result;
use crate::tensor::Tensor;

/// A compiled graph: its output code and the program that runs it (for a dynamic graph, one
/// program per binding of its sizes).
pub struct CompiledModule {
    output_code: OutputCode,
    program: std::sync::Arc<dyn runtime::Program>,
    dynamic: Option<compile_fx::Specializations>,
}

impl CompiledModule {
    /// The generated kernels and call plan.
    pub fn output_code(&self) -> &OutputCode {
        &self.output_code
    }

    /// Runs the module: a dynamic graph first picks the program for these inputs' sizes.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        match &self.dynamic {
            None => self.program.run(inputs),
            Some(dynamic) => dynamic.program_for(inputs)?.run(inputs),
        }
    }
}
