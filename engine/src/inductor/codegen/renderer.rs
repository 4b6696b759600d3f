//! One renderer per target behind one trait, as tinygrad keeps one renderer per backend and
//! Inductor one kernel class per device (`CppKernel`, `TritonKernel`): what compiling needs from
//! a target's code generator is the header every module starts with, each kernel's source with
//! its launch, and a custom op's element function in the target's language.
//!
//! Each codegen target (`inductor::target`) picks its renderer and puts a learner's replacement
//! printers ([`Printers`]) in front of it.

use super::{c, cuda};
use crate::error::{Error, Result};
use crate::inductor::config::Printers;
use crate::inductor::kernel::{Kernel, KernelBody};
use crate::inductor::launch::Launch;
use crate::op::CustomOp;

/// A kernel's source for one target and how it is launched (the launch matters on a GPU).
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// The kernel alone; the module puts the renderer's prelude before it.
    pub source: String,
    /// Block size and grid rule.
    pub launch: Launch,
}

/// A target's code generator.
pub trait Renderer {
    /// The header every module of this target starts with.
    fn prelude(&self) -> String;
    /// One kernel's source and launch.
    fn kernel(&self, kernel: &Kernel) -> Rendered;
    /// The custom op's element function in this target's language, or why there is none.
    fn custom_source(&self, op: &CustomOp) -> Result<String>;
}

/// C for the system C compiler ([`c`]).
pub struct CRenderer;

impl Renderer for CRenderer {
    fn prelude(&self) -> String {
        c::prelude()
    }

    fn kernel(&self, kernel: &Kernel) -> Rendered {
        Rendered { source: c::kernel(kernel), launch: Launch::GRID_STRIDE }
    }

    fn custom_source(&self, op: &CustomOp) -> Result<String> {
        Ok(op.c_source().to_string())
    }
}

/// CUDA C for NVRTC ([`cuda`]).
pub struct CudaRenderer;

impl Renderer for CudaRenderer {
    fn prelude(&self) -> String {
        cuda::prelude()
    }

    fn kernel(&self, kernel: &Kernel) -> Rendered {
        let printed = cuda::kernel(kernel);
        Rendered { source: printed.source, launch: printed.launch }
    }

    fn custom_source(&self, op: &CustomOp) -> Result<String> {
        op.cuda_source().map(str::to_string).ok_or_else(|| Error::Backend {
            backend: "inductor".into(),
            message: format!("custom op `{}` has no CUDA source, so it cannot run on a GPU", op.name()),
        })
    }
}

/// A renderer whose pointwise or reduction kernels come from replacement printers where given
/// (launched with a grid stride, as [`Printers`] documents), and from `target` otherwise.
pub struct WithPrinters<R> {
    /// The engine's renderer for the target.
    pub target: R,
    /// Prints pointwise kernels instead of `target`.
    pub pointwise: Option<fn(&Kernel) -> String>,
    /// Prints reduction kernels instead of `target`.
    pub reduction: Option<fn(&Kernel) -> String>,
}

impl<R: Renderer> Renderer for WithPrinters<R> {
    fn prelude(&self) -> String {
        self.target.prelude()
    }

    fn kernel(&self, kernel: &Kernel) -> Rendered {
        let replacement = match kernel.body {
            KernelBody::Pointwise(_) => self.pointwise,
            KernelBody::Reduction { .. } => self.reduction,
            // The engine's own printer: a replacement printer prints one loop.
            KernelBody::Foreach(_) => None,
        };
        match replacement {
            Some(print) => Rendered { source: print(kernel), launch: Launch::GRID_STRIDE },
            None => self.target.kernel(kernel),
        }
    }

    fn custom_source(&self, op: &CustomOp) -> Result<String> {
        self.target.custom_source(op)
    }
}

impl Printers {
    /// The printers a renderer for C uses.
    pub(crate) fn for_c(&self) -> WithPrinters<CRenderer> {
        WithPrinters { target: CRenderer, pointwise: self.pointwise_c, reduction: self.reduction_c }
    }

    /// The printers a renderer for CUDA C uses.
    pub(crate) fn for_cuda(&self) -> WithPrinters<CudaRenderer> {
        WithPrinters { target: CudaRenderer, pointwise: self.pointwise_cuda, reduction: None }
    }
}
