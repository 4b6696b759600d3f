//! Compiled artefacts and their disk cache, the analogue of `torch._inductor.codecache`:
//! generated C becomes a shared library through the system C compiler, generated CUDA C becomes
//! a CUBIN through NVRTC, and both are stored under a content-derived key so that a warm start
//! in a new process skips compilation.

mod c_compiler;
mod disk;

pub use c_compiler::{CCompiler, SharedLibrary};
pub use disk::{DiskCache, cache_key, writable};
