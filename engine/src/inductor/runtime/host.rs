//! Running a compiled graph in host memory, for the targets whose kernels run on the CPU: each
//! kernel is a [`HostKernel`] (a C function of a loaded shared library, or interpreted kernel
//! IR); matmul is the CPU's GEMM writing into the planned buffer; other extern kernels and
//! fallbacks run on the eager CPU kernels; buffers are host vectors.

use std::sync::Arc;

use super::kept::Kept;
use super::{KernelSpec, Program, Run, Schedule, Slots, check_inputs, guards, input_view, outputs, run_fallback};
use crate::device::Device;
use crate::device::cpu::{self, HostBuffer, Widened, matmul_into};
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::inductor::call_plan::SlotId;
use crate::inductor::ir::{BufferName, PerNode, View};
use crate::layout::Layout;
use crate::op::Op;
use crate::profiler::{self, EventKind};
use crate::tensor::{Concrete, Storage, Tensor, Writing};

/// A kernel as the host runtime calls it: a C function of a shared library (the C target), or
/// kernel IR run by the interpreter.
pub(crate) trait HostKernel: Send + Sync {
    /// The kernel's name, as profiles list it.
    fn name(&self) -> &str;

    /// Runs the kernel over `0..xnumel` on the buffers `args` point to; `len(i)` is how many
    /// elements argument `i` has from its pointer on (the C ABI takes only the pointers).
    ///
    /// # Safety
    /// Each argument must point to `len(i)` valid elements, enough for the shapes the kernel was
    /// generated for; the kernel writes only its output arguments, which no other argument
    /// aliases.
    unsafe fn call(&self, args: &[*mut f32], len: &dyn Fn(usize) -> usize, xnumel: i64);
}

/// A compiled graph ready to run in host memory, its kernels of type `K` (each keeps its code
/// loaded).
pub(crate) struct HostProgram<K> {
    schedule: Schedule<K>,
    /// The buffers of the steps kept across calls.
    kept: Kept<HostBuffer>,
    /// Whether each kernel runs on guarded copies of its buffers ([`super::guards`]).
    guarded: bool,
}

/// A graph input's buffer, and the offset of its first element in it.
fn input_data(input: &Concrete) -> (&HostBuffer, usize) {
    let Storage::Cpu(data) = &*input.storage else { unreachable!("inputs were checked to be on the CPU") };
    (data, input.layout.offset())
}

/// The address of a graph input's first element, as a generated kernel takes it: written only
/// where the graph updates the input in place (`copy_`).
fn input_ptr(input: &Concrete) -> *mut f32 {
    let (data, offset) = input_data(input);
    // SAFETY: the offset is inside the buffer (the input's layout was checked against it).
    unsafe { data.shared_ptr_bytes().add(offset * data.dtype().size_in_bytes()).cast() }
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

impl<K: HostKernel> HostProgram<K> {
    /// The program of `schedule` with each kernel resolved by `resolve`, its kernels' buffers
    /// guarded when `guarded` is set.
    pub(crate) fn new(
        schedule: Schedule<KernelSpec>,
        guarded: bool,
        mut resolve: impl FnMut(KernelSpec) -> Result<K>,
    ) -> Result<HostProgram<K>> {
        let schedule = schedule.resolve(|k, _| resolve(k))?;
        let kept = Kept::new(schedule.kept.clone(), schedule.steps.len(), schedule.slot_count);
        Ok(HostProgram { schedule, kept, guarded })
    }
}

/// Runs `kernel` over `0..xnumel` on `copies`, each an argument's elements between two guards
/// ([`guards::guarded`]), and checks every guard.
///
/// # Safety
/// As [`HostKernel::call`]: the kernel indexes each argument within the shapes it was generated
/// for, which each copy holds.
unsafe fn call_guarded<K: HostKernel>(kernel: &K, copies: &mut [HostBuffer], xnumel: i64) -> Result<()> {
    let lens: Vec<usize> = copies.iter().map(|c| c.elements_len() - 2 * guards::GUARD).collect();
    let guard_bytes = |c: &HostBuffer| guards::GUARD * c.dtype().size_in_bytes();
    // SAFETY: byte `guard_bytes` of each copy is in bounds: a copy is its data with GUARD
    // elements each side.
    let ptrs: Vec<*mut f32> =
        copies.iter_mut().map(|c| unsafe { c.as_mut_ptr_bytes().add(guard_bytes(c)) }.cast()).collect();
    // SAFETY: the caller's promise; each pointer has its argument's elements after it.
    unsafe { kernel.call(&ptrs, &|a| lens[a], xnumel) };
    for (arg, (copy, &len)) in copies.iter().zip(&lens).enumerate() {
        let (bytes, guard) = (copy.bytes(), guard_bytes(copy));
        let (before, after) = (&bytes[..guard], &bytes[bytes.len() - guard..]);
        guards::check(kernel.name(), arg, copy.dtype(), len, before, after)?;
    }
    Ok(())
}

impl<K: HostKernel> Program for HostProgram<K> {
    /// Runs the plan on `inputs`, which must have the traced shapes and strides.
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let concrete = check_inputs(&self.schedule.inputs, inputs, Device::Cpu)?;
        // As eager refuses them (`eager::fits_in_memory`): an input whose logical size could never
        // fit in memory (a broadcast view far larger than its buffer) would have kernels loop over
        // every element of it for hours.
        for (i, input) in inputs.iter().enumerate() {
            if let Some(why) = cpu::too_large(input.numel()) {
                return Err(Error::Backend {
                    backend: "inductor".into(),
                    message: format!("input {i} (shape {:?}) cannot run on the CPU: {why}", input.shape()),
                });
            }
        }
        // Stores into inputs are writes into tensors' memory: the epoch moves after them.
        let _writing = if self.schedule.written_inputs.is_empty() { None } else { Some(Writing) };
        let mut slots: Slots<HostBuffer> = Slots::new(self.schedule.slot_count);
        let mut lent = self.kept.lend(&mut slots);
        for (at, step) in self.schedule.steps.iter().enumerate() {
            if lent.as_mut().is_some_and(|lent| lent.skip(at, &concrete)) {
                continue;
            }
            match step {
                // A kept slot lent with its buffer keeps it.
                Run::Alloc { slot, .. } if slots[*slot].is_some() => {}
                // Memory from the allocator's cache: every step writes its whole output.
                Run::Alloc { slot, len, dtype } => {
                    if let Some(why) = cpu::too_large(*len) {
                        return Err(Error::Backend {
                            backend: "inductor".into(),
                            message: format!("a planned buffer: {why}"),
                        });
                    }
                    slots[*slot] = Some(cpu::uninit_of(*dtype, *len));
                }
                Run::Kernel { kernel, args, xnumel } if self.guarded => {
                    // Each argument's elements from its first one on, as bytes, and their dtype.
                    let data = |b: &BufferName| -> (&[u8], DType) {
                        let (buffer, offset) = match b {
                            BufferName::Input(i) => input_data(concrete[*i]),
                            BufferName::Node(n) => {
                                (slots[self.schedule.slot(*n)].as_ref().expect("allocated before use"), 0)
                            }
                        };
                        (&buffer.bytes()[offset * buffer.dtype().size_in_bytes()..], buffer.dtype())
                    };
                    let mut copies: Vec<HostBuffer> = args
                        .iter()
                        .enumerate()
                        .map(|(arg, b)| {
                            let (bytes, dtype) = data(b);
                            let mut copy =
                                cpu::uninit_of(dtype, bytes.len() / dtype.size_in_bytes() + 2 * guards::GUARD);
                            copy.bytes_mut().copy_from_slice(&guards::guarded(bytes, dtype, arg));
                            copy
                        })
                        .collect();
                    let _launch = profiler::launch(kernel.name(), EventKind::Compiled, Device::Cpu, || {
                        vec![vec![*xnumel as usize]]
                    });
                    // SAFETY: as below, each argument's copy holding what its buffer holds.
                    unsafe { call_guarded(kernel, &mut copies, *xnumel) }?;
                    // The copies the kernel changed go back to the plan's buffers (graph inputs
                    // are never written), each compared with its buffer before any goes back.
                    let inside = |copy: &HostBuffer| {
                        let guard = guards::GUARD * copy.dtype().size_in_bytes();
                        copy.bytes()[guard..copy.bytes().len() - guard].to_vec()
                    };
                    let changed: Vec<bool> =
                        args.iter().zip(&copies).map(|(b, copy)| inside(copy) != data(b).0).collect();
                    for ((b, copy), changed) in args.iter().zip(&copies).zip(changed) {
                        if let (BufferName::Node(n), true) = (b, changed) {
                            let slot = slots[self.schedule.slot(*n)].as_mut().expect("allocated before use");
                            slot.bytes_mut().copy_from_slice(&inside(copy));
                        }
                    }
                }
                Run::Kernel { kernel, args, xnumel } => {
                    // Every kernel takes its buffers as `float*`s whatever their dtype (the uniform
                    // ABI); a kernel casts each to its element type.
                    let ptrs: Vec<*mut f32> = args
                        .iter()
                        .map(|b| match b {
                            // Written only where the graph updates the input in place (`copy_`).
                            BufferName::Input(i) => input_ptr(concrete[*i]),
                            BufferName::Node(n) => slots[self.schedule.slot(*n)]
                                .as_mut()
                                .expect("allocated before use")
                                .as_mut_ptr_bytes()
                                .cast(),
                        })
                        .collect();
                    let len = |a: usize| match args[a] {
                        BufferName::Input(i) => {
                            let (data, offset) = input_data(concrete[i]);
                            data.elements_len() - offset
                        }
                        BufferName::Node(n) => slots[self.schedule.slot(n)].as_ref().map_or(0, |s| s.elements_len()),
                    };
                    let _launch = profiler::launch(kernel.name(), EventKind::Compiled, Device::Cpu, || {
                        vec![vec![*xnumel as usize]]
                    });
                    // SAFETY: the kernel indexes each argument within the shapes and strides it
                    // was generated for, which `check_inputs` and the plan's slot sizes guarantee;
                    // its outputs are planned slots of their own, which no input shares, or an
                    // input it updates in place through one argument, under the contract of
                    // in-place writes (nothing else reads the tensor while the graph runs).
                    unsafe { kernel.call(&ptrs, &len, *xnumel) };
                }
                Run::Matmul { a, b, epilogue, out, shape } => {
                    // The CPU's GEMMs take a bias and a ReLU; residual adds fold only into cuBLASLt's.
                    if epilogue.residual.is_some() {
                        return Err(Error::Backend {
                            backend: "inductor".into(),
                            message: "a residual folded into a GEMM's epilogue on the CPU, whose GEMMs take none"
                                .into(),
                        });
                    }
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
                Run::ExternKernel { op, inputs, out, layout } => {
                    let views: Vec<(&HostBuffer, Layout)> =
                        inputs.iter().map(|v| view_data(v, &concrete, &self.schedule.slot_of, &slots)).collect();
                    let inputs: Vec<cpu::Input> =
                        views.iter().map(|(buffer, layout)| cpu::Input::Tensor { buffer, layout }).collect();
                    let _launch = profiler::launch(op.name(), EventKind::Extern, Device::Cpu, || {
                        views.iter().map(|(_, l)| l.shape().to_vec()).collect()
                    });
                    let dtype = slots[self.schedule.slot(*out)].as_ref().expect("allocated before use").dtype();
                    let value = cpu::execute(op, &inputs, layout.shape(), dtype);
                    slots[self.schedule.slot(*out)] = Some(in_memory_order(value, layout));
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
        if let Some(lent) = lent {
            lent.keep(&mut slots);
        }
        Ok(outputs(&self.schedule.outputs, &concrete, &self.schedule.slot_of, &mut slots, Storage::Cpu))
    }
}

/// `value`, dense, as the memory of `layout` holds it: `layout` is dense in the order of its
/// strides (attention's output in q's layout), so its memory is the dense copy of `value` seen in
/// that order. A row-major layout holds `value` itself.
fn in_memory_order(value: HostBuffer, layout: &Layout) -> HostBuffer {
    if layout.is_contiguous() {
        return value;
    }
    let seen = layout.dense_in_memory_order();
    cpu::execute(&Op::Contiguous, &[cpu::Input::Tensor { buffer: &value, layout: &seen }], seen.shape(), value.dtype())
}
