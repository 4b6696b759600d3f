//! Running a compiled graph on a GPU: kernels of one CUDA module (NVRTC-compiled to a CUBIN for
//! the device's architecture) launched on the device's stream, matmul through cuBLAS, buffers
//! from the stream-ordered allocator. A call only queues work: it returns before the GPU is done,
//! as PyTorch's does.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

use super::kept::{Kept, Lent};
use super::{KernelSpec, Program, Run, Schedule, Slots, check_inputs, guards, input_view, outputs, run_fallback};
use crate::device::Device;
use crate::device::cuda::matmul::matmul_into;
use crate::device::cuda::tuned::cublaslt::{Addends, matmul_lt};
use crate::device::cuda::tuned::extern_into;
use crate::device::cuda::{self, CudaBuffer, CudaDevice, CudaError, Module};
use crate::error::{Error, Result};
use crate::inductor::call_plan::SlotId;
use crate::inductor::ir::{BufferName, IrId, PerNode, View};
use crate::inductor::modes::gemm_choice::GemmKernel;
use crate::layout::Layout;
use crate::profiler::{self, EventKind};
use crate::tensor::{Concrete, Storage, Tensor, Writing};

/// A graph input as the plan reads it: a device buffer, and the element the input starts at.
#[derive(Clone, Copy)]
pub(crate) struct InputBuffer<'a> {
    /// The buffer (the caller's storage, or a recording's static copy of it).
    pub buffer: &'a CudaBuffer,
    /// The input's first element in `buffer`.
    pub offset: usize,
}

impl<'a> InputBuffer<'a> {
    /// The caller's tensor as it is.
    pub(crate) fn of(input: &'a Concrete) -> InputBuffer<'a> {
        let Storage::Cuda(buffer) = &*input.storage else { unreachable!("inputs were checked on the GPU") };
        InputBuffer { buffer, offset: input.layout.offset() }
    }
}

/// A kernel as launched: its name (for errors), the function, and the launch shape.
pub(crate) struct Launched {
    name: String,
    function: CudaFunction,
    config: LaunchConfig,
}

/// A compiled graph ready to run on one GPU.
pub(crate) struct CudaProgram {
    device: Arc<CudaDevice>,
    /// Keeps the kernels loaded while their functions are in the schedule.
    _modules: Vec<Arc<Module>>,
    schedule: Schedule<Launched>,
    /// The buffers of the steps kept across calls.
    kept: Kept<CudaBuffer>,
    /// The matmuls not on cuBLAS (the engine's own kernels, or cuBLASLt under max-autotune), by node.
    gemms: HashMap<IrId, GemmKernel>,
    /// Whether each kernel runs on guarded copies of its buffers ([`super::guards`]).
    guarded: bool,
}

fn failed(what: &str, e: impl Into<CudaError>) -> Error {
    Error::Backend { backend: "inductor".into(), message: format!("{what}: {}", e.into()) }
}

impl CudaProgram {
    /// Resolves each kernel of `schedule` in the module `module_of` gives for its name and fixes
    /// its launch shape for the plan's sizes; `gemms` are the matmuls not on cuBLAS. With
    /// `guarded`, each kernel runs on guarded copies of its buffers.
    pub(crate) fn new(
        device: Arc<CudaDevice>,
        schedule: Schedule<KernelSpec>,
        module_of: HashMap<String, Arc<Module>>,
        gemms: HashMap<IrId, GemmKernel>,
        guarded: bool,
    ) -> Result<CudaProgram> {
        let sm_count = device.facts().multiprocessors;
        let schedule = schedule.resolve(|k, xnumel| {
            let module = module_of.get(&k.name).ok_or_else(|| Error::Backend {
                backend: "inductor".into(),
                message: format!("no compiled module holds kernel `{}`", k.name),
            })?;
            let config = LaunchConfig {
                grid_dim: (k.launch.grid_size(xnumel as usize, sm_count), 1, 1),
                block_dim: (k.launch.block, 1, 1),
                shared_mem_bytes: 0,
            };
            Ok(Launched { function: module.function(&k.name)?, name: k.name, config })
        })?;
        let mut modules: Vec<Arc<Module>> = Vec::new();
        for module in module_of.into_values() {
            if !modules.iter().any(|m| Arc::ptr_eq(m, &module)) {
                modules.push(module);
            }
        }
        let kept = Kept::new(schedule.kept.clone(), schedule.steps.len(), schedule.slot_count);
        Ok(CudaProgram { device, _modules: modules, schedule, kept, gemms, guarded })
    }

    /// A view's buffer and its layout within that buffer.
    fn view_buffer<'s>(
        &self,
        view: &View,
        inputs: &[InputBuffer<'s>],
        slots: &'s Slots<CudaBuffer>,
    ) -> (&'s CudaBuffer, Layout) {
        match view.buffer {
            BufferName::Input(i) => {
                let l = &view.layout;
                (inputs[i].buffer, Layout::new(l.shape().to_vec(), l.strides().to_vec(), inputs[i].offset + l.offset()))
            }
            BufferName::Node(n) => {
                (slots[self.schedule.slot(n)].as_ref().expect("written before it is read"), view.layout.clone())
            }
        }
    }

    /// The inputs' buffers, checked: the traced shapes and strides, on this program's GPU.
    pub(crate) fn check<'t>(&self, inputs: &'t [Tensor]) -> Result<Vec<&'t Concrete>> {
        check_inputs(&self.schedule.inputs, inputs, Device::Cuda(self.device.ordinal()))
    }

    /// Fresh memory for every slot of the plan: what a recording keeps and writes on each replay.
    pub(crate) fn static_slots(&self) -> Result<Slots<CudaBuffer>> {
        let mut slots = Slots::new(self.schedule.slot_count);
        for step in &self.schedule.steps {
            if let Run::Alloc { slot, len, dtype } = step {
                slots[*slot] =
                    Some(CudaBuffer::alloc_of(&self.device, *dtype, *len).map_err(|e| failed("allocating", e))?);
            }
        }
        Ok(slots)
    }

    /// Queues every step, reading the graph inputs from `inputs` and keeping the memory of slots
    /// that already hold some (a recording's static slots, or kept buffers); the others are
    /// allocated as the plan says. `concrete` (the caller's tensors) is read by eager fallbacks,
    /// and by `kept`, the kept buffers lent to this call, to skip the steps whose buffers hold
    /// what they would compute. A CUDA graph recording passes no `kept`: a replay runs what was
    /// recorded without asking, so every step must be in it.
    pub(crate) fn queue(
        &self,
        concrete: &[&Concrete],
        inputs: &[InputBuffer],
        slots: &mut Slots<CudaBuffer>,
        mut kept: Option<&mut Lent<CudaBuffer>>,
    ) -> Result<()> {
        for (at, step) in self.schedule.steps.iter().enumerate() {
            if kept.as_mut().is_some_and(|kept| kept.skip(at, concrete)) {
                continue;
            }
            match step {
                Run::Alloc { slot, len, dtype } => {
                    if slots[*slot].is_none() {
                        slots[*slot] = Some(
                            CudaBuffer::alloc_of(&self.device, *dtype, *len).map_err(|e| failed("allocating", e))?,
                        );
                    }
                }
                Run::Kernel { kernel, args, xnumel } if self.guarded => {
                    self.launch_guarded(kernel, args, *xnumel, inputs, slots)?;
                }
                Run::Kernel { kernel: Launched { name, function, config }, args, xnumel } => {
                    let mut launch = self.device.stream().launch_builder(function);
                    let ptrs: Vec<u64> = args
                        .iter()
                        .map(|b| match b {
                            BufferName::Input(i) => inputs[*i].buffer.ptr_at(inputs[*i].offset),
                            BufferName::Node(n) => {
                                slots[self.schedule.slot(*n)].as_ref().expect("allocated before use").ptr()
                            }
                        })
                        .collect();
                    for ptr in &ptrs {
                        launch.arg(ptr);
                    }
                    launch.arg(xnumel);
                    let _launch =
                        profiler::launch(name, EventKind::Compiled, Device::Cuda(self.device.ordinal()), || {
                            vec![vec![*xnumel as usize]]
                        });
                    // SAFETY: the kernel takes one pointer per argument and the extent of `x`, in
                    // this order, and indexes each buffer within the shapes and strides it was
                    // generated for, which `check_inputs` and the plan's slot sizes guarantee.
                    unsafe { launch.launch(*config) }.map_err(|e| failed(&format!("launching {name}"), e))?;
                }
                Run::Matmul { a, b, epilogue, out, shape } => {
                    let slot = self.schedule.slot(*out);
                    // Taken out while the library writes it: the plan never reuses an operand's
                    // slot for the product, so the operands are read from other slots.
                    let mut product = slots[slot].take().expect("allocated before use");
                    let (ab, al) = self.view_buffer(a, inputs, slots);
                    let (bb, bl) = self.view_buffer(b, inputs, slots);
                    let a = cuda::Input::Tensor { buffer: ab, layout: &al };
                    let b = cuda::Input::Tensor { buffer: bb, layout: &bl };
                    let _launch =
                        profiler::launch("matmul", EventKind::Extern, Device::Cuda(self.device.ordinal()), || {
                            vec![al.shape().to_vec(), bl.shape().to_vec()]
                        });
                    let address = |v: &View| {
                        let (buffer, layout) = self.view_buffer(v, inputs, slots);
                        buffer.ptr_at(layout.offset())
                    };
                    let bias = epilogue.bias.as_ref().map(address);
                    let residual = epilogue.residual.as_deref().map(address);
                    let done = match self.gemms.get(out) {
                        Some(GemmKernel::Lt(gemm)) => {
                            matmul_lt(&self.device, a, b, &mut product, shape, gemm, Addends { bias, residual })
                        }
                        Some(GemmKernel::Engine(_)) if residual.is_some() => {
                            Err(CudaError::new("a residual epilogue on one of the engine's GEMM kernels"))
                        }
                        // SAFETY: the shape was planned from these views' sizes and strides, which
                        // the inputs' check and the slots' sizes guarantee; `product` is dense.
                        Some(GemmKernel::Engine(gemm)) => unsafe {
                            gemm.run(
                                &self.device,
                                ab.ptr_at(al.offset()),
                                bb.ptr_at(bl.offset()),
                                product.ptr(),
                                bias,
                                epilogue.relu,
                            )
                        },
                        None if epilogue.is_none() => matmul_into(&self.device, a, b, &mut product, shape),
                        None => Err(CudaError::new("a GEMM epilogue without the cuBLASLt GEMM that applies it")),
                    };
                    done.map_err(|e| failed("the extern matmul", e))?;
                    slots[slot] = Some(product);
                }
                Run::ExternKernel { op, inputs: views, out, layout } => {
                    let views: Vec<(&CudaBuffer, Layout)> =
                        views.iter().map(|v| self.view_buffer(v, inputs, slots)).collect();
                    let operands: Vec<cuda::Input> =
                        views.iter().map(|(buffer, layout)| cuda::Input::Tensor { buffer, layout }).collect();
                    let _launch =
                        profiler::launch(op.name(), EventKind::Extern, Device::Cuda(self.device.ordinal()), || {
                            views.iter().map(|(_, l)| l.shape().to_vec()).collect()
                        });
                    // Written into the planned buffer itself, so that under a CUDA graph
                    // recording every replay writes the same memory.
                    let slot = slots[self.schedule.slot(*out)].as_ref().expect("allocated before use");
                    extern_into(&self.device, op, &operands, slot, layout)
                        .map_err(|e| failed(&format!("the extern kernel for {}", op.name()), e))?;
                }
                Run::Fallback { op, args, out, location } => {
                    let value =
                        run_fallback(op, args, *location, |view| self.fallback_operand(view, concrete, inputs, slots))?;
                    let slot = self.schedule.slot(*out);
                    let dtype = slots[slot].as_ref().expect("allocated before use").dtype();
                    slots[slot] = Some(
                        CudaBuffer::from_bytes(&self.device, dtype, &value)
                            .map_err(|e| failed("a fallback's result", e))?,
                    );
                }
            }
        }
        Ok(())
    }

    /// Launches `kernel` on guarded copies of its arguments ([`super::guards`]), waits for it,
    /// checks every guard, and copies back the copies of the plan's buffers that the kernel
    /// changed. Slow (each argument copied twice, the guards read back): for checking printers.
    fn launch_guarded(
        &self,
        kernel: &Launched,
        args: &[BufferName],
        xnumel: i64,
        inputs: &[InputBuffer],
        slots: &Slots<CudaBuffer>,
    ) -> Result<()> {
        let Launched { name, function, config } = kernel;
        let guard = guards::GUARD;
        // Each argument's buffer and its elements from the kernel's pointer on.
        let source = |b: &BufferName| -> (&CudaBuffer, usize, usize) {
            match b {
                BufferName::Input(i) => {
                    (inputs[*i].buffer, inputs[*i].offset, inputs[*i].buffer.len() - inputs[*i].offset)
                }
                BufferName::Node(n) => {
                    let slot = slots[self.schedule.slot(*n)].as_ref().expect("allocated before use");
                    (slot, 0, slot.len())
                }
            }
        };
        let copies: Vec<(CudaBuffer, usize)> = args
            .iter()
            .enumerate()
            .map(|(arg, b)| {
                let (buffer, offset, len) = source(b);
                let dtype = buffer.dtype();
                let empty = vec![0; len * dtype.size_in_bytes()];
                let copy = CudaBuffer::from_bytes(&self.device, dtype, &guards::guarded(&empty, dtype, arg))?;
                copy.write_from(guard, buffer, offset, len)?;
                Ok((copy, len))
            })
            .collect::<std::result::Result<_, CudaError>>()
            .map_err(|e| failed("guarding a kernel's buffers", e))?;
        let mut launch = self.device.stream().launch_builder(function);
        let ptrs: Vec<u64> = copies.iter().map(|(copy, _)| copy.ptr_at(guard)).collect();
        for ptr in &ptrs {
            launch.arg(ptr);
        }
        launch.arg(&xnumel);
        let _launch = profiler::launch(name, EventKind::Compiled, Device::Cuda(self.device.ordinal()), || {
            vec![vec![xnumel as usize]]
        });
        // SAFETY: as an unguarded launch; each pointer has its argument's elements after it.
        unsafe { launch.launch(*config) }.map_err(|e| failed(&format!("launching {name}"), e))?;
        let read = |copy: &CudaBuffer, start: usize, len: usize| {
            copy.read_bytes(start, len).map_err(|e| failed(&format!("reading the guards of {name}"), e))
        };
        for (arg, (copy, len)) in copies.iter().enumerate() {
            guards::check(name, arg, copy.dtype(), *len, &read(copy, 0, guard)?, &read(copy, guard + len, guard)?)?;
        }
        // The copies the kernel changed go back to the plan's buffers (graph inputs are never
        // written), each compared with its buffer before any goes back.
        let mut changed = Vec::new();
        for (b, (copy, len)) in args.iter().zip(&copies) {
            if let BufferName::Node(_) = b {
                let (buffer, _, _) = source(b);
                let (now, before) = (read(copy, guard, *len)?, read(buffer, 0, *len)?);
                if now != before {
                    changed.push((buffer, copy, *len));
                }
            }
        }
        for (buffer, copy, len) in changed {
            buffer.write_from(0, copy, guard, len).map_err(|e| failed("copying a guarded kernel's output back", e))?;
        }
        Ok(())
    }

    /// The program's graph outputs (views of inputs or of slots).
    pub(crate) fn output_views(&self) -> &[View] {
        &self.schedule.outputs
    }

    /// The slot of each IR node.
    pub(crate) fn slot_of(&self) -> &PerNode<Option<SlotId>> {
        &self.schedule.slot_of
    }

    /// The inputs the plan writes in place.
    pub(crate) fn written_inputs(&self) -> &[usize] {
        &self.schedule.written_inputs
    }

    /// The GPU the program runs on.
    pub(crate) fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    /// A fallback's operand: graph inputs are shared, planned buffers copied (the eager kernels
    /// take tensors, not slots). Fallbacks are slow, and only for ops with no lowering.
    fn fallback_operand(
        &self,
        view: &View,
        concrete: &[&Concrete],
        inputs: &[InputBuffer],
        slots: &Slots<CudaBuffer>,
    ) -> Result<Tensor> {
        Ok(match view.buffer {
            BufferName::Input(i) => input_view(concrete[i], view),
            BufferName::Node(_) => {
                let (buffer, layout) = self.view_buffer(view, inputs, slots);
                let mut copy = CudaBuffer::alloc_of(&self.device, buffer.dtype(), buffer.len())
                    .map_err(|e| failed("a fallback's operand", e))?;
                copy.copy_from(buffer).map_err(|e| failed("a fallback's operand", e))?;
                Tensor::from_concrete(Arc::new(Storage::Cuda(copy)), layout)
            }
        })
    }
}

impl Program for CudaProgram {
    /// Queues the plan on `inputs`, which must have the traced shapes and strides and be on this
    /// program's GPU.
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let concrete = self.check(inputs)?;
        let buffers: Vec<InputBuffer> = concrete.iter().map(|c| InputBuffer::of(c)).collect();
        // Stores into inputs are writes into tensors' memory: the epoch moves after them.
        let _writing = if self.schedule.written_inputs.is_empty() { None } else { Some(Writing) };
        let mut slots: Slots<CudaBuffer> = Slots::new(self.schedule.slot_count);
        // Called inside another CUDA graph recording, every step must be recorded.
        let mut lent = if self.device.pool().is_recording() { None } else { self.kept.lend(&mut slots) };
        self.queue(&concrete, &buffers, &mut slots, lent.as_mut())?;
        if let Some(lent) = lent {
            lent.keep(&mut slots);
        }
        Ok(outputs(&self.schedule.outputs, &concrete, &self.schedule.slot_of, &mut slots, Storage::Cuda))
    }
}
