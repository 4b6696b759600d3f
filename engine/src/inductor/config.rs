//! Settings of one Inductor compilation, the analogue of `torch._inductor.config`: which fusion
//! decision to use, optionally replacement kernel printers, the compile [`Mode`] (what
//! `torch.compile(mode=...)` sets) and which GEMMs max-autotune may time ([`GemmBackends`]). The
//! defaults are the engine's own; the workbook's phase 4 plugs a learner's fusion decision and
//! printers in here.

use std::fmt;
use std::str::FromStr;

use super::kernel::Kernel;
use super::scheduler::{FusionPolicy, can_fuse};

/// Kernel printers that replace the engine's own; `None` keeps the engine's printer.
///
/// A replacement prints one kernel with the same signature the engine's printer gives it:
/// C kernels are `void NAME(float* const* args, int64_t xnumel)` with the arguments in
/// [`Kernel::args`] order; CUDA kernels are `extern "C" __global__ void NAME(<one float pointer
/// per argument>, long long xnumel)`, launched with 256-thread blocks and a capped grid, so they
/// must loop over `x` with a grid stride.
#[derive(Clone, Copy, Debug, Default)]
pub struct Printers {
    /// Prints pointwise kernels as C.
    pub pointwise_c: Option<fn(&Kernel) -> String>,
    /// Prints pointwise kernels as CUDA C.
    pub pointwise_cuda: Option<fn(&Kernel) -> String>,
    /// Prints reduction kernels as C.
    pub reduction_c: Option<fn(&Kernel) -> String>,
}

// ANCHOR: mode
/// How hard to work for a faster call, `torch.compile(mode=...)`; set it with
/// [`Compiled::mode`](crate::dynamo::Compiled::mode), where it is re-exported as
/// `engine::dynamo::Mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Fused kernels launched one by one by the call plan (`mode="default"`).
    #[default]
    Default,
    /// On a GPU, the call plan is recorded once as a CUDA graph and replayed: one launch per call
    /// instead of one per kernel (`mode="reduce-overhead"`). On a CPU it runs the default plan.
    ReduceOverhead,
    /// Matrix products choose, by timing at compile time, between cuBLAS, cuBLASLt's algorithms
    /// and the engine's own GEMM kernels, with a bias and ReLU fused into the GEMM's epilogue;
    /// choices are cached on disk.
    /// As in PyTorch, the plan is then recorded as a CUDA graph like `ReduceOverhead`'s
    /// (`mode="max-autotune"`). Compiles longer, runs faster.
    MaxAutotune,
}
// ANCHOR_END: mode

impl Mode {
    /// Every mode, in the order tables list them.
    pub const ALL: [Mode; 3] = [Mode::Default, Mode::ReduceOverhead, Mode::MaxAutotune];

    /// Whether a GPU plan is recorded as a CUDA graph and replayed (PyTorch's
    /// `triton.cudagraphs`, on in `reduce-overhead` and `max-autotune`).
    pub fn records_cuda_graphs(self) -> bool {
        matches!(self, Mode::ReduceOverhead | Mode::MaxAutotune)
    }

    /// PyTorch's name for the mode: `default`, `reduce-overhead`, `max-autotune`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::ReduceOverhead => "reduce-overhead",
            Mode::MaxAutotune => "max-autotune",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses PyTorch's names (`default`, `reduce-overhead`, `max-autotune`), for command lines.
impl FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == text)
            .ok_or_else(|| format!("unknown mode `{text}`: use {}", Mode::ALL.map(Mode::name).join(", ")))
    }
}

/// Which GEMM implementations max-autotune times for a matrix product, PyTorch's
/// `max_autotune_gemm_backends` (`"ATEN,TRITON"`). Both by default. Where no candidate of those
/// allowed fits a product, it runs on cuBLAS (cuBLASLt when it has an epilogue), as PyTorch falls
/// back to ATen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmBackends {
    /// cuBLAS and cuBLASLt's algorithms (PyTorch's `ATEN`).
    pub libraries: bool,
    /// The engine's own kernels: the few-row kernel and the tensor-core kernel (PyTorch's
    /// `TRITON` templates).
    pub engine: bool,
}

impl Default for GemmBackends {
    fn default() -> Self {
        GemmBackends { libraries: true, engine: true }
    }
}

/// How to compile: the fusion decision, the printers, the mode, max-autotune's GEMMs and whether
/// the FX graph cache may serve the compile.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Decides each fusion (the engine's [`can_fuse`] by default).
    pub fusion: FusionPolicy,
    /// Replacement printers (none by default).
    pub printers: Printers,
    /// The compile mode ([`Mode::Default`] by default).
    pub mode: Mode,
    /// The GEMMs max-autotune may time (all by default).
    pub gemm_backends: GemmBackends,
    /// Whether a compile may be served from, and stored in, the FX graph cache on disk (on by
    /// default, PyTorch's `fx_graph_cache`; `ENGINE_FX_GRAPH_CACHE=0` turns it off for the whole
    /// process). A config with replacement printers or another fusion decision is never cached
    /// whatever this says (see [`super::fx_graph_cache`]).
    pub fx_graph_cache: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            fusion: can_fuse,
            printers: Printers::default(),
            mode: Mode::Default,
            gemm_backends: GemmBackends::default(),
            fx_graph_cache: true,
        }
    }
}
