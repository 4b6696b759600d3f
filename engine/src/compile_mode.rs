//! The compile modes, the analogue of `torch.compile(mode=...)`: one setting that dynamo takes,
//! compiler backends pass on, and Inductor acts on. It sits with the base types, below every layer
//! that reads it.

use std::fmt;
use std::str::FromStr;

// ANCHOR: mode
/// How hard to work for a faster call, `torch.compile(mode=...)`; set it with
/// [`Compiled::mode`](crate::dynamo::Compiled::mode) (it is re-exported as `engine::dynamo::Mode`
/// and `engine::inductor::Mode`).
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
