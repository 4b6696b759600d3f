//! The interpreter target: kernels printed as kernel IR (the pseudo-code a [`Kernel`] displays),
//! parsed back from that text (`parse.rs`, this target's compiler) and run by the engine itself
//! (`eval.rs`), with no C compiler, no GPU and no code loaded into the process. It is tinygrad's
//! `PYTHON` device for this engine: slower than C, the same answers (it computes each function as
//! generated C does, transcendental ones with the engine's vector math), so it serves as a
//! reference for the compiled targets in tests and runs compiled graphs where no C compiler is
//! installed.
//!
//! Choose it with [`Config::target`](crate::inductor::Config::target) set to
//! [`TargetKind::Interpreter`](crate::inductor::TargetKind::Interpreter). The plan runs in host
//! memory through the same runtime as the C target's (`runtime::host`): only the kernels differ.
//! Replacement printers ([`Printers`]) print C or CUDA C, which the interpreter does not run; it
//! ignores them.

mod eval;
mod parse;

use std::sync::Arc;

use super::{Generated, ProgramSpec, Target, TargetChoices};
use crate::compile_mode::Mode;
use crate::device::Device;
use crate::error::Result;
use crate::inductor::codegen::{Rendered, Renderer};
use crate::inductor::config::{Config, Printers};
use crate::inductor::kernel::Kernel;
use crate::inductor::launch::Launch;
use crate::inductor::lowering::FoldFor;
use crate::inductor::modes::cudagraphs;
use crate::inductor::runtime::Program;
use crate::inductor::runtime::host::HostProgram;
use crate::op::CustomOp;

/// The kernel IR, interpreted on the CPU.
pub(crate) struct InterpreterTarget;

/// The first line of every module: what the text is and what runs it.
const PRELUDE: &str = "// kernel IR, run by the engine's interpreter (inductor::target::interpreter)";

impl Target for InterpreterTarget {
    fn name(&self) -> &'static str {
        "interpreter"
    }

    fn device(&self) -> Device {
        Device::Cpu
    }

    fn language(&self) -> &'static str {
        "kernel IR"
    }

    fn renderer(&self, _printers: &Printers) -> Box<dyn Renderer> {
        Box::new(KernelIr)
    }

    /// The engine's own build identity (in the cache's key already) is all a program depends on.
    fn identity(&self) -> Result<String> {
        Ok("the engine's kernel-IR interpreter".into())
    }

    /// None: the interpreter runs the graph as lowered, each bias add and ReLU a kernel of its own.
    fn gemm_epilogues(&self, _mode: Mode) -> Option<FoldFor> {
        None
    }

    fn tune(&self, _generated: &mut Generated, _config: &Config, _log: bool) -> Result<TargetChoices> {
        Ok(TargetChoices::none())
    }

    fn log_choices(&self, _choices: &TargetChoices, mode: Mode) {
        cudagraphs::log_host_skip(mode);
    }

    fn build(&self, spec: ProgramSpec, _mode: Mode) -> Result<Arc<dyn Program>> {
        let module = parse::module(&spec.module.whole(), &spec.custom_ops)?;
        let program = HostProgram::new(spec.schedule, |k| module.kernel(&k.name))?;
        Ok(Arc::new(program))
    }
}

/// Prints each kernel as its kernel IR (the text `parse.rs` reads back).
struct KernelIr;

impl Renderer for KernelIr {
    fn prelude(&self) -> String {
        PRELUDE.into()
    }

    fn kernel(&self, kernel: &Kernel) -> Rendered {
        Rendered { source: kernel.to_string(), launch: Launch::GRID_STRIDE }
    }

    /// A comment: the interpreter calls the op's compiled C function, found by its name.
    fn custom_source(&self, op: &CustomOp) -> Result<String> {
        Ok(format!("// custom op {}: its C function `{}`, called per element", op.name(), op.function()))
    }
}
