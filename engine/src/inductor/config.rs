//! Settings of one Inductor compilation, the analogue of `torch._inductor.config`: which fusion
//! decision to use, optionally replacement kernel printers, the compile [`Mode`] (what
//! `torch.compile(mode=...)` sets), which GEMMs max-autotune may time ([`GemmBackends`]),
//! which codegen target compiles ([`TargetKind`]) and which reductions are split
//! ([`SplitReductions`]). The
//! defaults are the engine's own; the workbook's phase 4 plugs a learner's fusion decision and
//! printers in here.

use super::kernel::Kernel;
use super::scheduler::{FusionPolicy, can_fuse};
use crate::compile_mode::Mode;

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

// ANCHOR: target_kind
/// Which codegen target compiles a graph (see `inductor::target`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TargetKind {
    /// The device's own compiled code: C built by the system C compiler on the CPU, CUDA C built
    /// by NVRTC on a GPU.
    #[default]
    Native,
    /// An interpreter of the kernel IR on the CPU: the kernels are printed as kernel IR, parsed
    /// back and run by the engine itself, with no compiler at all. Slower than C, the same
    /// answers: a reference for tests, and a way to run compiled graphs where there is no C
    /// compiler.
    Interpreter,
}
// ANCHOR_END: target_kind

/// Whether a reduction with too few outputs to fill the device is split in two, a partial
/// result per chunk of its reduced range and then their total (see `inductor::split_reductions`),
/// as Inductor's `split_reductions` setting decides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SplitReductions {
    /// As the target decides: on a GPU, where a reduction would leave multiprocessors idle; never
    /// on the CPU.
    #[default]
    Auto,
    /// Never.
    Never,
    /// Every reduction of four elements or more, whatever its shape: for tests, so that the C
    /// code and the interpreter run the split form on small shapes.
    Always,
}

/// How to compile: the fusion decision, the printers, the mode, max-autotune's GEMMs, the target
/// and whether the FX graph cache may serve the compile.
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
    /// whatever this says (see [`super::modes::fx_graph_cache`]).
    pub fx_graph_cache: bool,
    /// The codegen target ([`TargetKind::Native`] by default).
    pub target: TargetKind,
    /// Whether each generated kernel runs on copies of its buffers that sit between poisoned
    /// guard regions, checked after every run: a kernel that writes outside a buffer (one element
    /// past its end, a vector's width before its start) is an error naming the kernel and the
    /// argument, and one that reads outside gets NaNs. The analogue of running under
    /// AddressSanitizer, or CUDA's `compute-sanitizer`: slow (a copy per argument per launch), for
    /// checking kernel printers (off by default; `inductor/runtime/guards.rs`).
    pub guard_buffers: bool,
    /// Which reductions are split in two ([`SplitReductions::Auto`] by default).
    pub split_reductions: SplitReductions,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            fusion: can_fuse,
            printers: Printers::default(),
            mode: Mode::Default,
            gemm_backends: GemmBackends::default(),
            fx_graph_cache: true,
            target: TargetKind::Native,
            guard_buffers: false,
            split_reductions: SplitReductions::Auto,
        }
    }
}
