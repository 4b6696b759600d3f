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
//!   ──scheduler::schedule──▶ scheduler::Schedule   nodes fused into groups, each decision logged
//!   ──kernel::build──▶ kernel::Kernel          one per group, numbered in launch order
//!   ──codegen::Renderer──▶ Rendered            C or CUDA C source, and its launch::Launch
//!   ──wrapper::plan──▶ wrapper::CallPlan       buffers, their reuse, the calls in order
//!   ──output_code / runtime──▶ CompiledModule  the readable output code; the compiled program
//! ```
//!
//! | TorchInductor | here |
//! | --- | --- |
//! | `compile_fx.py` | [`compile_fx`] |
//! | `config.py` | [`config`] |
//! | `pattern_matcher.py`, `fx_passes/fuse_attention.py` | [`pattern_matcher`] |
//! | `lowering.py` | [`lowering`] |
//! | the `addmm` / `_addmm_activation` patterns, GEMM template epilogues | `gemm_epilogue` |
//! | `ir.py` (`Pointwise`, `Reduction`, `ExternKernel`), its index expressions | [`ir`], [`index`] |
//! | `scheduler.py` (`can_fuse`) | [`scheduler`] |
//! | the kernel body a `SIMDKernel` collects | [`kernel`] |
//! | `codegen/cpp.py`, `codegen/triton.py` | [`codegen::c`], [`codegen::cuda`], behind [`codegen::Renderer`] |
//! | Triton launch metadata (block size, grid) | [`launch`] |
//! | `tuned_mm`: extern cuBLAS or a GEMM template, by rule | `gemm_choice` |
//! | `select_algorithm.py`, max-autotune's table | `autotune` |
//! | Triton's `CachingAutotuner` (launch configs of generated kernels) | `launch_tuning` |
//! | `codegen/wrapper.py` (the `call` function) | [`wrapper`] |
//! | `TORCH_LOGS=output_code` | [`output_code`] |
//! | `codecache.py`, the loaded module's `call` | [`crate::codecache`]; `runtime` (internal) runs the plan on a CPU or GPU |
//! | `codecache.py`'s `FxGraphCache` | [`fx_graph_cache`] |
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
mod stored;

// 0. Rewrites of the FX graph (naive attention into the fused op).
pub mod pattern_matcher;

// 1. Lowering to loop-level IR.
mod gemm_epilogue;
pub mod index;
pub mod ir;
pub mod lowering;

// 2. Scheduling and fusion.
pub mod scheduler;

// 3. Kernel IR, one kernel per fused group.
pub mod kernel;

// 4. Rendering each kernel for its target, with its launch.
pub mod codegen;
pub mod launch;

// 5. The call plan.
pub mod wrapper;

// 6. Which kernel each matrix product runs on (a rule by default; max-autotune's timing of it),
// and max-autotune's timing of each generated kernel's launch.
mod autotune;
mod gemm_choice;
mod launch_tuning;

// 7. What the user reads, and what runs.
pub mod output_code;
mod runtime;

// 8. The compiled artifact kept on disk per graph, so a warm start skips steps 0-6.
pub mod fx_graph_cache;

pub use compile_fx::{compile_fx, generate, kernels};
pub use config::{Config, GemmBackends, Mode, Printers};
pub use output_code::OutputCode;

use crate::error::Result;
use crate::tensor::Tensor;

/// A compiled graph: its output code and the program that runs it (for a dynamic graph, one
/// program per binding of its sizes).
pub struct CompiledModule {
    output_code: OutputCode,
    program: std::sync::Arc<runtime::Program>,
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
