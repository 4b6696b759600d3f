//! Typed errors of the engine, each naming the op, the shapes involved and the learner's source line.
//!
//! PyTorch reports shape errors as `RuntimeError`s that name the op and the sizes; the engine does the
//! same with a typed enum so that callers can match on the kind of failure.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::panic::Location;

/// Where in the learner's code an op was called, captured through `#[track_caller]`.
#[derive(Clone, Copy, Eq)]
pub struct SourceLocation(&'static Location<'static>);

impl PartialEq for SourceLocation {
    /// The same call site is usually the very same static `Location` (a cached call's trace
    /// compares every op's line with the cached graph's): that is one pointer check, not a
    /// comparison of file names.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0) || self.0 == other.0
    }
}

impl Hash for SourceLocation {
    /// The file, line and column, as equality compares them.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl SourceLocation {
    /// The location of the caller of the `#[track_caller]` function that calls this.
    #[track_caller]
    pub fn caller() -> Self {
        SourceLocation(Location::caller())
    }

    /// The source file, as the compiler saw it (relative to the crate's workspace).
    pub fn file(&self) -> &'static str {
        self.0.file()
    }

    /// The 1-based line number.
    pub fn line(&self) -> u32 {
        self.0.line()
    }

    /// The 1-based column number.
    pub fn column(&self) -> u32 {
        self.0.column()
    }

    /// `file:line`, the short form used in graph listings and logs.
    pub fn short(&self) -> String {
        format!("{}:{}", self.file(), self.line())
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file(), self.line(), self.column())
    }
}

impl fmt::Debug for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Shapes that an op cannot combine: broadcasting, matmul inner sizes, reshape sizes.
    #[error("{op}: {message}: {} (at {location})", format_shapes(.shapes))]
    Shape {
        /// The op's name, as it appears in graphs (`add`, `matmul`).
        op: &'static str,
        /// What rule the shapes broke.
        message: String,
        /// Every input shape involved, in argument order.
        shapes: Vec<Vec<usize>>,
        /// The learner's line that called the op.
        location: SourceLocation,
    },
    /// An argument out of range: a dim past the rank, a slice past the end, a bad permutation.
    #[error("{op}: {message} (at {location})")]
    InvalidArgument {
        /// The op's name.
        op: &'static str,
        /// What was wrong and what is allowed.
        message: String,
        /// The learner's line that called the op.
        location: SourceLocation,
    },
    /// Dtypes an op does not take, or cannot combine: a matmul of `bf16` and `f32` operands, an
    /// 8-bit float anywhere but a conversion or `scaled_mm`.
    #[error("{op}: {message}, got {} (at {location})", format_dtypes(.dtypes))]
    DType {
        /// The op's name.
        op: &'static str,
        /// The rule broken, and what to do.
        message: String,
        /// The operands' dtypes, in argument order.
        dtypes: Vec<crate::dtype::DType>,
        /// The learner's line that called the op.
        location: SourceLocation,
    },
    /// An op the device cannot run: an FP8 matrix product on the CPU or on a GPU older than
    /// compute capability 8.9.
    #[error("{op} on {device}: {reason} (at {location})")]
    Unsupported {
        /// The op's name.
        op: &'static str,
        /// The device asked to run it.
        device: crate::device::Device,
        /// What the device lacks and where the op runs instead.
        reason: String,
        /// The learner's line that called the op.
        location: SourceLocation,
    },
    /// Tensors on different devices handed to one op.
    #[error(
        "{op}: expected every tensor on one device, got {devices} (at {location}); move them with `.to(device)` first"
    )]
    DeviceMismatch {
        /// The op's name.
        op: &'static str,
        /// The devices seen, for example `cpu and cuda:0`.
        devices: String,
        /// The learner's line that called the op.
        location: SourceLocation,
    },
    /// Traced code needed a concrete value (or did something with no graph form) and graph breaks
    /// were not allowed.
    #[error("graph break: {reason} (at {location})")]
    GraphBreak {
        /// Why tracing could not continue, for example `Tensor::item() needs a concrete value`.
        reason: String,
        /// The learner's line where tracing stopped.
        location: SourceLocation,
    },
    /// A compiled function was used wrongly: no tensor returned, a tensor from another trace.
    #[error("{message} (at {location})")]
    Capture {
        /// What was wrong and what to do instead.
        message: String,
        /// The learner's line where it was noticed.
        location: SourceLocation,
    },
    /// A compiler (the C compiler, NVRTC) failed or could not be run.
    #[error("{tool}: {message}")]
    Compile {
        /// Which tool: `cc`, `nvrtc`, `dlopen`.
        tool: String,
        /// Its diagnostics, or what to install.
        message: String,
    },
    /// The machine is not set up for what was asked (no C compiler, say): nothing the caller's
    /// code did wrong, and the fix is on the machine.
    #[error("set-up problem: {problem}; {fix}")]
    Setup {
        /// What is missing or broken.
        problem: String,
        /// How to fix it.
        fix: String,
    },
    /// A file could not be read or written.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file or directory.
        path: std::path::PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A CUDA call (driver, kernel launch, cuBLAS) failed while running an op. Kernels run
    /// asynchronously, so a fault inside one may surface at a later op that waits for the GPU; run
    /// with `CUDA_LAUNCH_BLOCKING=1` to make every launch wait and pin the fault on its own op.
    #[error("{op} on {device}: {message}; shapes {} (at {location})", format_shapes(.shapes))]
    Cuda {
        /// The op's name (`add`, `matmul`, `to`).
        op: &'static str,
        /// The device it ran on.
        device: crate::device::Device,
        /// What CUDA reported.
        message: String,
        /// Every input shape, in argument order.
        shapes: Vec<Vec<usize>>,
        /// The learner's line that called the op.
        location: SourceLocation,
    },
    /// A device was asked for that this machine cannot provide (no driver, no GPU, no NVRTC).
    #[error("{device} is not available: {reason}")]
    DeviceUnavailable {
        /// The device asked for.
        device: crate::device::Device,
        /// What is missing and what to do, in one line.
        reason: String,
    },
    /// An exported program that cannot be made or loaded: an op the format cannot hold, a file
    /// that is damaged, from another version, or describes a graph the engine's rules reject.
    #[error("exported program: {message} (at {location})")]
    Export {
        /// What is wrong, naming the node.
        message: String,
        /// The line that exported or loaded it.
        location: SourceLocation,
    },
    /// Autograd was asked for something it cannot do: a backward from a tensor that does not
    /// require grad, an implicit gradient for a non-scalar, a second backward through saved values
    /// already freed, an op without a derivative formula (PyTorch raises these as `RuntimeError`s).
    #[error("autograd: {message} (at {location})")]
    Autograd {
        /// What was wrong and what to do instead.
        message: String,
        /// The line that called backward (or recorded the op).
        location: SourceLocation,
    },
    /// A backend could not compile or run a graph.
    #[error("backend `{backend}`: {message}")]
    Backend {
        /// The backend's name.
        backend: String,
        /// What failed.
        message: String,
    },
}

fn format_dtypes(dtypes: &[crate::dtype::DType]) -> String {
    dtypes.iter().map(ToString::to_string).collect::<Vec<_>>().join(" and ")
}

fn format_shapes(shapes: &[Vec<usize>]) -> String {
    shapes.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(" and ")
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
