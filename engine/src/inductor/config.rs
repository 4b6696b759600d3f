//! Settings of one Inductor compilation, the analogue of `torch._inductor.config`: which fusion
//! decision to use and, optionally, replacement kernel printers. The defaults are the engine's
//! own; the workbook's phase 4 plugs a learner's fusion decision and printers in here.

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

/// How to compile: the fusion decision and the printers.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Decides each fusion (the engine's [`can_fuse`] by default).
    pub fusion: FusionPolicy,
    /// Replacement printers (none by default).
    pub printers: Printers,
}

impl Default for Config {
    fn default() -> Self {
        Config { fusion: can_fuse, printers: Printers::default() }
    }
}
