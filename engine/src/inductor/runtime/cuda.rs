//! Running a compiled graph on a GPU: kernels of one CUDA module (NVRTC-compiled to a CUBIN for
//! the device's architecture) launched on the device's stream, matmul through cuBLAS, buffers
//! from the stream-ordered allocator. A call only queues work: it returns before the GPU is done,
//! as PyTorch's does.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

use super::{Run, Schedule, Slots, check_inputs, input_view, outputs, run_fallback};
use crate::device::Device;
use crate::device::backend::execute;
use crate::device::cuda::{self, CudaBuffer, CudaDevice, CudaError, Module};
use crate::error::{Error, Result};
use crate::inductor::ir::{BufferName, LoweredGraph, View};
use crate::inductor::kernel::Kernel;
use crate::inductor::launch::Launch;
use crate::inductor::wrapper::CallPlan;
use crate::layout::Layout;
use crate::op::Op;
use crate::tensor::{Concrete, Storage, Tensor};

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
    _module: Option<Arc<Module>>,
    schedule: Schedule<Launched>,
}

fn failed(what: &str, e: impl Into<CudaError>) -> Error {
    Error::Backend { backend: "inductor".into(), message: format!("{what}: {}", e.into()) }
}

impl CudaProgram {
    /// Resolves each kernel of `plan` in `module` and fixes its launch shape for the plan's sizes.
    pub(crate) fn new(
        device: Arc<CudaDevice>,
        graph: &LoweredGraph,
        kernels: &[Kernel],
        launches: &[Launch],
        plan: &CallPlan,
        module: Option<Arc<Module>>,
    ) -> Result<CudaProgram> {
        let sm_count = device.facts().multiprocessors;
        let schedule = Schedule::new(graph, plan, |kernel| {
            let (k, launch) = (&kernels[kernel], launches[kernel]);
            let module = module.as_ref().expect("a plan with kernels has a module");
            let config = LaunchConfig {
                grid_dim: (launch.grid_size(k.xnumel, sm_count), 1, 1),
                block_dim: (launch.block, 1, 1),
                shared_mem_bytes: 0,
            };
            let launched = Launched { name: k.name.clone(), function: module.function(&k.name)?, config };
            Ok((launched, k.args.iter().map(|a| a.buffer).collect(), k.xnumel as i64))
        })?;
        Ok(CudaProgram { device, _module: module, schedule })
    }

    /// A view's buffer and its layout within that buffer.
    fn view_buffer<'s>(
        &self,
        view: &View,
        inputs: &[&'s Concrete],
        slots: &'s Slots<CudaBuffer>,
    ) -> (&'s CudaBuffer, Layout) {
        match view.buffer {
            BufferName::Input(i) => {
                let Storage::Cuda(buffer) = &*inputs[i].storage else { unreachable!("inputs were checked on the GPU") };
                let l = &view.layout;
                (buffer, Layout::new(l.shape().to_vec(), l.strides().to_vec(), inputs[i].layout.offset() + l.offset()))
            }
            BufferName::Node(n) => {
                (slots[self.schedule.slot(n)].as_ref().expect("written before it is read"), view.layout.clone())
            }
        }
    }

    /// Queues the plan on `inputs`, which must have the traced shapes and strides and be on this
    /// program's GPU.
    pub(crate) fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let concrete = check_inputs(&self.schedule.inputs, inputs, Device::Cuda(self.device.ordinal()))?;
        let mut slots: Slots<CudaBuffer> = Slots::new(self.schedule.slot_count);
        for step in &self.schedule.steps {
            match step {
                Run::Alloc { slot, len } => {
                    slots[*slot] = Some(CudaBuffer::alloc(&self.device, *len).map_err(|e| failed("allocating", e))?);
                }
                Run::Kernel { kernel: Launched { name, function, config }, args, xnumel } => {
                    let ptrs: Vec<u64> = args
                        .iter()
                        .map(|b| match b {
                            BufferName::Input(i) => {
                                let Storage::Cuda(buffer) = &*concrete[*i].storage else {
                                    unreachable!("inputs were checked on the GPU")
                                };
                                buffer.ptr_at(concrete[*i].layout.offset())
                            }
                            BufferName::Node(n) => {
                                slots[self.schedule.slot(*n)].as_ref().expect("allocated before use").ptr()
                            }
                        })
                        .collect();
                    let mut launch = self.device.stream().launch_builder(function);
                    for ptr in &ptrs {
                        launch.arg(ptr);
                    }
                    launch.arg(xnumel);
                    // SAFETY: the kernel takes one pointer per argument and the extent of `x`, in
                    // this order, and indexes each buffer within the shapes and strides it was
                    // generated for, which `check_inputs` and the plan's slot sizes guarantee.
                    unsafe { launch.launch(*config) }.map_err(|e| failed(&format!("launching {name}"), e))?;
                }
                Run::Matmul { a, b, out, shape } => {
                    let (ab, al) = self.view_buffer(a, &concrete, &slots);
                    let (bb, bl) = self.view_buffer(b, &concrete, &slots);
                    let operands = [
                        cuda::Input::Tensor { buffer: ab, layout: &al },
                        cuda::Input::Tensor { buffer: bb, layout: &bl },
                    ];
                    let product = execute(&self.device, &Op::Matmul, &operands, shape)
                        .map_err(|e| failed("the extern matmul", e))?;
                    // cuBLAS wrote a buffer of its own; it takes the planned buffer's place.
                    slots[self.schedule.slot(*out)] = Some(product);
                }
                Run::ExternKernel { op, inputs, out, shape } => {
                    let views: Vec<(&CudaBuffer, Layout)> =
                        inputs.iter().map(|v| self.view_buffer(v, &concrete, &slots)).collect();
                    let inputs: Vec<cuda::Input> =
                        views.iter().map(|(buffer, layout)| cuda::Input::Tensor { buffer, layout }).collect();
                    let value = execute(&self.device, op, &inputs, shape)
                        .map_err(|e| failed(&format!("the extern kernel for {}", op.name()), e))?;
                    // The kernel wrote a buffer of its own; it takes the planned buffer's place.
                    slots[self.schedule.slot(*out)] = Some(value);
                }
                Run::Fallback { op, args, out, location } => {
                    let value =
                        run_fallback(op, args, *location, |view| self.fallback_operand(view, &concrete, &slots))?;
                    slots[self.schedule.slot(*out)] = Some(
                        CudaBuffer::from_host(&self.device, &value).map_err(|e| failed("a fallback's result", e))?,
                    );
                }
            }
        }
        Ok(outputs(&self.schedule.outputs, &concrete, &self.schedule.slot_of, &mut slots, Storage::Cuda))
    }

    /// A fallback's operand: graph inputs are shared, planned buffers copied (the eager kernels
    /// take tensors, not slots). Fallbacks are slow, and only for ops with no lowering.
    fn fallback_operand(&self, view: &View, concrete: &[&Concrete], slots: &Slots<CudaBuffer>) -> Result<Tensor> {
        Ok(match view.buffer {
            BufferName::Input(i) => input_view(concrete[i], view),
            BufferName::Node(_) => {
                let (buffer, layout) = self.view_buffer(view, concrete, slots);
                let mut copy =
                    CudaBuffer::alloc(&self.device, buffer.len()).map_err(|e| failed("a fallback's operand", e))?;
                copy.copy_from(buffer).map_err(|e| failed("a fallback's operand", e))?;
                Tensor::from_concrete(Arc::new(Storage::Cuda(copy)), layout)
            }
        })
    }
}
