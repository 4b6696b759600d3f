//! How a GPU kernel is launched (threads per block, and the rule that sizes its grid), the
//! analogue of the launch metadata Inductor's Triton heuristics attach to each kernel. The CUDA
//! printer chooses it with the kernel's loop structure; the call plan carries it; the CUDA
//! runtime reads it, without knowing anything about printing.

/// Threads per block of pointwise kernels and of one-thread-per-row reductions.
pub(crate) const THREADS: u32 = 256;
/// How many blocks a launch needs for `xnumel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Grid {
    /// Enough blocks for `per_block` elements each (grid-stride loops take any excess).
    Elements {
        /// Elements one block covers per step.
        per_block: u32,
    },
    /// One block per row (blocks stride over rows past the cap).
    Rows,
}

/// The launch configuration a kernel was written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Launch {
    /// Threads per block.
    pub block: u32,
    /// How the grid is sized.
    pub grid: Grid,
}

impl Launch {
    /// 256-thread blocks and one element per thread up to a cap: how a kernel printed by a
    /// replacement printer (see [`crate::inductor::Printers`]) is launched; it loops over `x`
    /// with a grid stride.
    pub const GRID_STRIDE: Launch = Launch { block: THREADS, grid: Grid::Elements { per_block: THREADS } };

    /// Blocks to launch for `xnumel` on a device with `sm_count` multiprocessors: enough to
    /// cover the work, capped at a few waves (the kernels' loops stride over the rest).
    pub fn grid_size(&self, xnumel: usize, sm_count: u32) -> u32 {
        let wanted = match self.grid {
            Grid::Elements { per_block } => xnumel.div_ceil(per_block as usize),
            Grid::Rows => xnumel,
        };
        let cap = sm_count.max(1) as usize * (2048 / self.block as usize) * 4;
        wanted.clamp(1, cap) as u32
    }
}
