//! Running a compiled graph on the CPU: kernels are C functions of a loaded shared library,
//! called on chunks of their `x` range from the engine's thread pool (`parallel`) when the work is
//! large enough to share; matmul is the CPU's GEMM writing into the planned buffer; buffers are host vectors.

use std::sync::Arc;

use super::{KernelSpec, Program, Run, Schedule, Slots, check_inputs, input_view, outputs, run_fallback};
use crate::codecache::SharedLibrary;
use crate::device::Device;
use crate::device::cpu::{self, HostBuffer, PARALLEL_THRESHOLD, TASK_WORK, Widened, matmul_into};
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::inductor::call_plan::SlotId;
use crate::inductor::codegen::c::RANGE_SUFFIX;
use crate::inductor::ir::{BufferName, PerNode, View};
use crate::layout::Layout;
use crate::op::Op;
use crate::parallel::{self, Disjoint};
use crate::profiler::{self, EventKind};
use crate::tensor::{Concrete, Storage, Tensor};

/// The ABI of every generated C kernel: the argument pointers, then the extent of `x`.
type KernelFn = unsafe extern "C" fn(*const *mut f32, i64);
/// The ABI of the engine's range entry points: the argument pointers, then `x0` and `x1`.
type RangeFn = unsafe extern "C" fn(*const *mut f32, i64, i64);

/// A kernel as the runtime calls it.
#[derive(Clone)]
struct CpuKernel {
    /// The whole range.
    whole: KernelFn,
    /// A range of `x`; only the engine's own printer writes it (replacement printers need not).
    range: Option<RangeFn>,
    /// Elements one `x` touches: 1 for pointwise kernels, the row length for reductions.
    work_per_x: usize,
    /// The kernel's name, as profiles list it.
    name: String,
}

impl CpuKernel {
    /// Runs the kernel over `0..xnumel`, split into tasks on the pool when there is enough work.
    ///
    /// # Safety
    /// `args` must hold valid buffers for every argument, sized for the shapes the kernel was
    /// generated for.
    unsafe fn call(&self, args: &[*mut f32], xnumel: i64) {
        let n = xnumel.max(0) as usize;
        match self.range {
            Some(range) if n * self.work_per_x > PARALLEL_THRESHOLD => {
                let per_task = (TASK_WORK / self.work_per_x).max(1);
                // The tasks of a split kernel write disjoint ranges of `x`, and the pointers stay
                // valid until every task has returned.
                let args = Disjoint::new(args.as_ptr().cast_mut());
                parallel::parallel_for(n.div_ceil(per_task), |task| {
                    let start = task * per_task;
                    let end = (start + per_task).min(n);
                    // SAFETY: as for the whole range; tasks cover disjoint `x`.
                    unsafe { range(args.get(), start as i64, end as i64) };
                });
            }
            // SAFETY: forwarded to the caller.
            _ => unsafe { (self.whole)(args.as_ptr(), xnumel) },
        }
    }
}

/// A compiled graph ready to run on the CPU.
pub(crate) struct CpuProgram {
    /// Keeps the kernels' code loaded while their function pointers are in the schedule.
    _library: Option<SharedLibrary>,
    /// Each kernel, with its name for the profiler.
    schedule: Schedule<CpuKernel>,
}

/// A graph input's buffer, and the offset of its first element in it.
fn input_data(input: &Concrete) -> (&HostBuffer, usize) {
    let Storage::Cpu(data) = &*input.storage else { unreachable!("inputs were checked to be on the CPU") };
    (data, input.layout.offset())
}

/// The address of a graph input's first element, as a generated kernel takes it.
fn input_ptr(input: &Concrete) -> *mut f32 {
    let (data, offset) = input_data(input);
    // Kernels never write their inputs: the cast only fits the uniform ABI.
    data.bytes()[offset * data.dtype().size_in_bytes()..].as_ptr() as *mut f32
}

/// The memory of a view: graph inputs are the caller's, nodes' are the plan's slots. The layout
/// is over the whole buffer.
fn view_data<'s>(
    view: &View,
    inputs: &[&'s Concrete],
    slot_of: &PerNode<Option<SlotId>>,
    slots: &'s Slots<HostBuffer>,
) -> (&'s HostBuffer, Layout) {
    match view.buffer {
        BufferName::Input(i) => {
            let (data, offset) = input_data(inputs[i]);
            let l = &view.layout;
            (data, Layout::new(l.shape().to_vec(), l.strides().to_vec(), offset + l.offset()))
        }
        BufferName::Node(n) => {
            let slot = slot_of[n].expect("buffers read from memory have a slot");
            (slots[slot].as_ref().expect("buffers are written before they are read"), view.layout.clone())
        }
    }
}

/// A view's elements as a dense vector of `f32`s (a half-precision GEMM's bias).
fn data_f32(data: &HostBuffer, layout: &Layout) -> Vec<f32> {
    let elements = data.elements();
    layout.offsets().map(|i| elements.get(i)).collect()
}

impl CpuProgram {
    /// Resolves each kernel of `schedule` in `library` (compiled from the kernels' C source).
    pub(crate) fn new(schedule: Schedule<KernelSpec>, library: Option<SharedLibrary>) -> Result<CpuProgram> {
        let schedule = schedule.resolve(|k, _| {
            let library = library.as_ref().expect("a plan with kernels has a library");
            // SAFETY: every generated kernel has exactly the `KernelFn` signature, and a range
            // entry point, where there is one, the `RangeFn` signature.
            let whole = unsafe { *library.get::<KernelFn>(&k.name)? };
            let range = unsafe { library.get::<RangeFn>(&format!("{}{RANGE_SUFFIX}", k.name)) }.ok().map(|f| *f);
            Ok(CpuKernel { whole, range, work_per_x: k.work_per_x, name: k.name })
        })?;
        Ok(CpuProgram { _library: library, schedule })
    }
}

impl Program for CpuProgram {
    /// Runs the plan on `inputs`, which must have the traced shapes and strides.
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let concrete = check_inputs(&self.schedule.inputs, inputs, Device::Cpu)?;
        let mut slots: Slots<HostBuffer> = Slots::new(self.schedule.slot_count);
        for step in &self.schedule.steps {
            match step {
                // Memory from the allocator's cache: every step writes its whole output.
                Run::Alloc { slot, len, dtype } => slots[*slot] = Some(cpu::uninit_of(*dtype, *len)),
                Run::Kernel { kernel, args, xnumel } => {
                    // Every kernel takes its buffers as `float*`s whatever their dtype (the uniform
                    // ABI); a kernel casts each to its element type.
                    let ptrs: Vec<*mut f32> = args
                        .iter()
                        .map(|b| match b {
                            BufferName::Input(i) => input_ptr(concrete[*i]),
                            BufferName::Node(n) => slots[self.schedule.slot(*n)]
                                .as_mut()
                                .expect("allocated before use")
                                .as_mut_ptr_bytes()
                                .cast(),
                        })
                        .collect();
                    let _launch = profiler::launch(&kernel.name, EventKind::Compiled, Device::Cpu, || {
                        vec![vec![*xnumel as usize]]
                    });
                    // SAFETY: the kernel indexes each argument within the shapes and strides it
                    // was generated for, which `check_inputs` and the plan's slot sizes guarantee.
                    unsafe { kernel.call(&ptrs, *xnumel) };
                }
                Run::Matmul { a, b, epilogue, out, shape } => {
                    let mut result = slots[self.schedule.slot(*out)].take().expect("allocated before use");
                    let (ad, al) = view_data(a, &concrete, &self.schedule.slot_of, &slots);
                    let (bd, bl) = view_data(b, &concrete, &self.schedule.slot_of, &slots);
                    let (a, b) = (
                        cpu::Input::Tensor { buffer: ad, layout: &al },
                        cpu::Input::Tensor { buffer: bd, layout: &bl },
                    );
                    let _launch = profiler::launch("matmul", EventKind::Extern, Device::Cpu, || {
                        vec![al.shape().to_vec(), bl.shape().to_vec()]
                    });
                    let bias = epilogue.bias.as_ref().map(|v| view_data(v, &concrete, &self.schedule.slot_of, &slots));
                    if result.dtype() == DType::F32 && [a, b].iter().all(|i| i.tensor().0.dtype() == DType::F32) {
                        let bias = bias.as_ref().map(|(data, layout)| &data[layout.offset()..][..layout.numel()]);
                        matmul_into(a, b, shape, &mut result, cpu::Epilogue { bias, relu: epilogue.relu });
                    } else {
                        // Half-precision operands: the product in float32, rounded as it is stored.
                        let widened = Widened::new::<cpu::AsWritten>(&[a, b]);
                        let [a, b] = widened.inputs()[..] else { unreachable!("two operands") };
                        let bias = bias.map(|(data, layout)| data_f32(data, &layout));
                        let mut product = cpu::uninit(result.elements_len());
                        let epilogue = cpu::Epilogue { bias: bias.as_deref(), relu: epilogue.relu };
                        matmul_into(a, b, shape, &mut product, epilogue);
                        result = product.converted::<cpu::AsWritten>(result.dtype());
                    }
                    slots[self.schedule.slot(*out)] = Some(result);
                }
                Run::ExternKernel { op: Op::ScaledMm { .. }, .. } => {
                    return Err(Error::Unsupported {
                        op: "scaled_mm",
                        device: Device::Cpu,
                        reason: "FP8 matrix products need a GPU of compute capability 8.9 or newer; on the CPU, \
                                 convert the operands to bf16 and use matmul"
                            .into(),
                        location: SourceLocation::caller(),
                    });
                }
                Run::ExternKernel { op, inputs, out, shape } => {
                    let views: Vec<(&HostBuffer, Layout)> =
                        inputs.iter().map(|v| view_data(v, &concrete, &self.schedule.slot_of, &slots)).collect();
                    let inputs: Vec<cpu::Input> =
                        views.iter().map(|(buffer, layout)| cpu::Input::Tensor { buffer, layout }).collect();
                    let _launch = profiler::launch(op.name(), EventKind::Extern, Device::Cpu, || {
                        views.iter().map(|(_, l)| l.shape().to_vec()).collect()
                    });
                    let dtype = slots[self.schedule.slot(*out)].as_ref().expect("allocated before use").dtype();
                    let value = cpu::execute(op, &inputs, shape, dtype);
                    slots[self.schedule.slot(*out)] = Some(value);
                }
                Run::Fallback { op, args, out, location } => {
                    let value = run_fallback(op, args, *location, |view| {
                        Ok(match view.buffer {
                            BufferName::Input(i) => input_view(concrete[i], view),
                            // A copy: the fallback's eager kernels take tensors, not slots.
                            BufferName::Node(_) => {
                                let (data, _) = view_data(view, &concrete, &self.schedule.slot_of, &slots);
                                let copy = HostBuffer::from_bytes(data.dtype(), data.bytes());
                                Tensor::from_concrete(Arc::new(Storage::Cpu(copy)), view.layout.clone())
                            }
                        })
                    })?;
                    slots[self.schedule.slot(*out)]
                        .as_mut()
                        .expect("allocated before use")
                        .bytes_mut()
                        .copy_from_slice(&value);
                }
            }
        }
        Ok(outputs(&self.schedule.outputs, &concrete, &self.schedule.slot_of, &mut slots, Storage::Cpu))
    }
}
