//! Inductor's mode features: what `max-autotune` and `reduce-overhead` add to the pipeline, and
//! the cache that lets a warm start skip it. None of the stages a learner reads in order
//! (`lowering` → `scheduler` → `kernel` → `codegen` → `call_plan` → `runtime`) names them: the
//! GPU target plugs them in where its mode asks for them, and `compile_fx` consults the cache
//! first, as PyTorch's does.
//!
//! | TorchInductor | here |
//! | --- | --- |
//! | the `addmm` / `_addmm_activation` patterns, GEMM template epilogues | `gemm_epilogue` |
//! | `tuned_mm`: extern cuBLAS or a GEMM template, by rule | `gemm_choice` |
//! | `select_algorithm.py`, max-autotune's table | `autotune` |
//! | Triton's `CachingAutotuner` (launch configs of generated kernels) | `launch_tuning` |
//! | `cudagraph_trees` (reduce-overhead) | `cudagraphs` |
//! | `codecache.py`'s `FxGraphCache` | [`fx_graph_cache`] |

pub(crate) mod autotune;
pub(crate) mod cudagraphs;
pub mod fx_graph_cache;
pub(crate) mod gemm_choice;
pub(crate) mod gemm_epilogue;
pub(crate) mod launch_tuning;
