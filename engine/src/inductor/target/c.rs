//! The C target, the analogue of Inductor's C++ backend (`codegen/cpp.py` with `codecache.py`'s
//! `CppCodeCache`): kernels printed as C ([`codegen::c`](crate::inductor::codegen::c)), compiled
//! by the system C compiler into a shared library (cached on disk), loaded, and called by the host
//! runtime on chunks of their `x` range from the engine's thread pool.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Generated, ProgramSpec, Target, TargetChoices};
use crate::codecache::{CCompiler, SharedLibrary};
use crate::compile_mode::Mode;
use crate::compile_time;
use crate::device::Device;
use crate::device::cpu::{PARALLEL_THRESHOLD, TASK_WORK};
use crate::error::{Error, Result};
use crate::inductor::codegen::Renderer;
use crate::inductor::codegen::c::{COLUMN_BLOCK, RANGE_SUFFIX};
use crate::inductor::config::{Config, Printers};
use crate::inductor::lowering::FoldFor;
use crate::inductor::modes::{cudagraphs, gemm_epilogue};
use crate::inductor::runtime::host::{HostKernel, HostProgram};
use crate::inductor::runtime::{KernelSpec, Program};
use crate::logs::{self, Artifact};
use crate::parallel::{self, Disjoint};

/// C for the CPU.
pub(crate) struct CTarget;

impl Target for CTarget {
    fn name(&self) -> &'static str {
        "c"
    }

    fn device(&self) -> Device {
        Device::Cpu
    }

    fn language(&self) -> &'static str {
        "C"
    }

    fn renderer(&self, printers: &Printers) -> Box<dyn Renderer> {
        Box::new(printers.for_c())
    }

    fn identity(&self) -> Result<String> {
        Ok(CCompiler::detect()?.identity())
    }

    /// Always: the CPU's GEMMs apply a bias and a ReLU in their output loops.
    fn gemm_epilogues(&self, _mode: Mode) -> Option<FoldFor> {
        Some(gemm_epilogue::fold)
    }

    fn tune(&self, _generated: &mut Generated, config: &Config, log: bool) -> Result<TargetChoices> {
        if config.mode == Mode::MaxAutotune && log {
            logs::log(Artifact::Autotuning, || {
                "max-autotune on cpu: no GEMM choice to time on the CPU; the kernels compile as in the default mode"
                    .into()
            });
        }
        Ok(TargetChoices::none())
    }

    fn log_choices(&self, _choices: &TargetChoices, mode: Mode) {
        cudagraphs::log_host_skip(mode);
    }

    /// The kernels compiled as one shared library per compile thread, at once (each a run of
    /// consecutive kernels after the prelude), loaded, and run by the host runtime.
    fn build(&self, spec: ProgramSpec, config: &Config) -> Result<Arc<dyn Program>> {
        let mut library_of: HashMap<String, Arc<SharedLibrary>> = HashMap::new();
        if spec.schedule.has_kernels() {
            let (names, sources): (Vec<_>, Vec<_>) =
                spec.module.units(compile_time::compile_threads()).into_iter().unzip();
            let libraries = CCompiler::detect()?.compile_all(sources)?;
            for (names, library) in names.into_iter().zip(libraries) {
                let library = Arc::new(library);
                library_of.extend(names.into_iter().map(|name| (name, library.clone())));
            }
        }
        let program = HostProgram::new(spec.schedule, config.guard_buffers, |k| {
            let library = library_of.get(&k.name).cloned().ok_or_else(|| Error::Backend {
                backend: "inductor".into(),
                message: format!("no compiled library holds kernel `{}`", k.name),
            })?;
            CKernel::load(library, k)
        })?;
        Ok(Arc::new(program))
    }
}

/// The ABI of every generated C kernel: the argument pointers, then the extent of `x`.
type KernelFn = unsafe extern "C" fn(*const *mut f32, i64);
/// The ABI of the engine's range entry points: the argument pointers, then `x0` and `x1`.
type RangeFn = unsafe extern "C" fn(*const *mut f32, i64, i64);

/// A kernel of a loaded library, as the host runtime calls it.
struct CKernel {
    /// The whole range.
    whole: KernelFn,
    /// A range of `x`; only the engine's own printer writes it (replacement printers need not).
    range: Option<RangeFn>,
    /// Elements one `x` touches: 1 for pointwise kernels, the row length for reductions.
    work_per_x: usize,
    /// The fewest `x` one task takes: a reduction over an outer dimension reads
    /// [`COLUMN_BLOCK`] rows side by side, and a task of fewer reads a sliver of each cache line
    /// and of each page.
    min_per_task: usize,
    /// The kernel's name, as profiles list it.
    name: String,
    /// Keeps the code loaded while the function pointers above are called.
    _library: Arc<SharedLibrary>,
}

impl CKernel {
    /// Kernel `k` of `library` (compiled from the kernels' C source).
    fn load(library: Arc<SharedLibrary>, k: KernelSpec) -> Result<CKernel> {
        // SAFETY: every generated kernel has exactly the `KernelFn` signature, and a range entry
        // point, where there is one, the `RangeFn` signature.
        let whole = unsafe { *library.get::<KernelFn>(&k.name)? };
        let range = unsafe { library.get::<RangeFn>(&format!("{}{RANGE_SUFFIX}", k.name)) }.ok().map(|f| *f);
        let min_per_task = if k.strided_rows { COLUMN_BLOCK } else { 1 };
        Ok(CKernel { whole, range, work_per_x: k.work_per_x, min_per_task, name: k.name, _library: library })
    }
}

impl HostKernel for CKernel {
    fn name(&self) -> &str {
        &self.name
    }

    /// Runs the kernel over `0..xnumel`, split into tasks on the pool when there is enough work.
    unsafe fn call(&self, args: &[*mut f32], _len: &dyn Fn(usize) -> usize, xnumel: i64) {
        let n = xnumel.max(0) as usize;
        match self.range {
            Some(range) if n * self.work_per_x > PARALLEL_THRESHOLD => {
                let per_task = (TASK_WORK / self.work_per_x).max(self.min_per_task);
                // The tasks of a split kernel write disjoint ranges of `x`, and the pointers stay
                // valid until every task has returned.
                let pointers = Disjoint::new(args.as_ptr().cast_mut());
                parallel::parallel_for(n.div_ceil(per_task), |task| {
                    let start = task * per_task;
                    let end = (start + per_task).min(n);
                    // SAFETY: as for the whole range; tasks cover disjoint `x`.
                    unsafe { range(pointers.get(), start as i64, end as i64) };
                });
            }
            // SAFETY: forwarded to the caller.
            _ => unsafe { (self.whole)(args.as_ptr(), xnumel) },
        }
    }
}
