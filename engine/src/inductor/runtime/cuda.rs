//! Running a compiled graph on a GPU: kernels of one CUDA module (NVRTC-compiled to a CUBIN for
//! the device's architecture) launched on the device's stream, matmul through cuBLAS, buffers
//! from the stream-ordered allocator. A call only queues work: it returns before the GPU is done,
//! as PyTorch's does.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

use super::{check_inputs, input_view, outputs};
use crate::device::Device;
use crate::device::cuda::{self, CudaBuffer, CudaDevice, CudaError, Module};
use crate::error::{Error, Result, SourceLocation};
use crate::inductor::codegen::cuda::Launch;
use crate::inductor::ir::{BufferName, FallbackArg, GraphInput, LoweredGraph, NodeBody, View};
use crate::inductor::kernel::Kernel;
use crate::inductor::wrapper::{CallPlan, Step};
use crate::layout::Layout;
use crate::op::Op;
use crate::tensor::{Concrete, Operand, Storage, Tensor};

enum CudaStep {
    /// Fresh memory for a slot (a reused slot needs no step); every kernel writes all of its
    /// output, so it is not zeroed.
    Alloc {
        slot: usize,
        len: usize,
    },
    Launch {
        name: String,
        function: CudaFunction,
        args: Vec<BufferName>,
        xnumel: i64,
        config: LaunchConfig,
    },
    Matmul {
        a: View,
        b: View,
        out: usize,
        shape: Vec<usize>,
    },
    /// An op run by the eager dispatcher on tensors copied from the planned buffers.
    Fallback {
        op: Op,
        args: Vec<FallbackArg>,
        out: usize,
        location: SourceLocation,
    },
}

/// A compiled graph ready to run on one GPU.
pub(crate) struct CudaProgram {
    device: Arc<CudaDevice>,
    /// Keeps the kernels loaded while their functions are in `steps`.
    _module: Option<Arc<Module>>,
    inputs: Vec<GraphInput>,
    steps: Vec<CudaStep>,
    slot_of: Vec<Option<usize>>,
    slot_count: usize,
    outputs: Vec<View>,
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
        let mut steps = Vec::new();
        for step in &plan.steps {
            steps.push(match step {
                Step::Alloc { reuses: Some(_), .. } => continue,
                Step::Alloc { buffer, reuses: None } => {
                    let slot = plan.slot_of[*buffer].expect("allocated buffers have a slot");
                    CudaStep::Alloc { slot, len: plan.slot_sizes[slot] }
                }
                Step::Kernel { kernel } => {
                    let (k, launch) = (&kernels[*kernel], launches[*kernel]);
                    let module = module.as_ref().expect("a plan with kernels has a module");
                    let config = LaunchConfig {
                        grid_dim: (launch.grid_size(k.xnumel, sm_count), 1, 1),
                        block_dim: (launch.block, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    CudaStep::Launch {
                        name: k.name.clone(),
                        function: module.function(&k.name)?,
                        args: k.args.iter().map(|a| a.buffer).collect(),
                        xnumel: k.xnumel as i64,
                        config,
                    }
                }
                Step::Extern { node } => {
                    let n = &graph.nodes[*node];
                    match &n.body {
                        NodeBody::Matmul { a, b } => {
                            CudaStep::Matmul { a: a.clone(), b: b.clone(), out: *node, shape: n.shape.clone() }
                        }
                        NodeBody::Fallback { op, args } => CudaStep::Fallback {
                            op: op.clone(),
                            args: args.clone(),
                            out: *node,
                            location: n.location.unwrap_or(SourceLocation::caller()),
                        },
                        _ => unreachable!("extern steps run extern nodes"),
                    }
                }
            });
        }
        Ok(CudaProgram {
            device,
            _module: module,
            inputs: graph.inputs.clone(),
            steps,
            slot_of: plan.slot_of.clone(),
            slot_count: plan.slot_sizes.len(),
            outputs: plan.outputs.clone(),
        })
    }

    fn slot(&self, node: usize) -> usize {
        self.slot_of[node].expect("buffers read from memory have a slot")
    }

    /// A view's buffer and its layout within that buffer.
    fn view_buffer<'s>(
        &self,
        view: &View,
        inputs: &[&'s Concrete],
        slots: &'s [Option<CudaBuffer>],
    ) -> (&'s CudaBuffer, Layout) {
        match view.buffer {
            BufferName::Input(i) => {
                let Storage::Cuda(buffer) = &*inputs[i].storage else { unreachable!("inputs were checked on the GPU") };
                let l = &view.layout;
                (buffer, Layout::new(l.shape().to_vec(), l.strides().to_vec(), inputs[i].layout.offset() + l.offset()))
            }
            BufferName::Node(n) => {
                (slots[self.slot(n)].as_ref().expect("written before it is read"), view.layout.clone())
            }
        }
    }

    /// Queues the plan on `inputs`, which must have the traced shapes and strides and be on this
    /// program's GPU.
    pub(crate) fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let concrete = check_inputs(&self.inputs, inputs, Device::Cuda(self.device.ordinal()))?;
        let mut slots: Vec<Option<CudaBuffer>> = (0..self.slot_count).map(|_| None).collect();
        for step in &self.steps {
            match step {
                CudaStep::Alloc { slot, len } => {
                    slots[*slot] = Some(CudaBuffer::alloc(&self.device, *len).map_err(|e| failed("allocating", e))?);
                }
                CudaStep::Launch { name, function, args, xnumel, config } => {
                    let ptrs: Vec<u64> = args
                        .iter()
                        .map(|b| match b {
                            BufferName::Input(i) => {
                                let Storage::Cuda(buffer) = &*concrete[*i].storage else {
                                    unreachable!("inputs were checked on the GPU")
                                };
                                buffer.ptr_at(concrete[*i].layout.offset())
                            }
                            BufferName::Node(n) => slots[self.slot(*n)].as_ref().expect("allocated before use").ptr(),
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
                CudaStep::Matmul { a, b, out, shape } => {
                    let (ab, al) = self.view_buffer(a, &concrete, &slots);
                    let (bb, bl) = self.view_buffer(b, &concrete, &slots);
                    let operands = [
                        cuda::Input::Tensor { buffer: ab, layout: &al },
                        cuda::Input::Tensor { buffer: bb, layout: &bl },
                    ];
                    let product = cuda::execute(&self.device, &Op::Matmul, &operands, shape)
                        .map_err(|e| failed("the extern matmul", e))?;
                    // cuBLAS wrote a buffer of its own; it takes the planned buffer's place.
                    slots[self.slot(*out)] = Some(product);
                }
                CudaStep::Fallback { op, args, out, location } => {
                    let value = self.fallback(op, args, &concrete, &slots, *location)?;
                    slots[self.slot(*out)] = Some(
                        CudaBuffer::from_host(&self.device, &value).map_err(|e| failed("a fallback's result", e))?,
                    );
                }
            }
        }
        Ok(outputs(&self.outputs, &concrete, &self.slot_of, &mut slots, Storage::Cuda))
    }

    /// Runs `op` eagerly on copies of its operands and returns its value, read back to the host:
    /// slow, and only for ops Inductor has no lowering for.
    fn fallback(
        &self,
        op: &Op,
        args: &[FallbackArg],
        concrete: &[&Concrete],
        slots: &[Option<CudaBuffer>],
        location: SourceLocation,
    ) -> Result<Vec<f32>> {
        let tensors = args
            .iter()
            .map(|a| match a {
                FallbackArg::Tensor(view) => Ok(Some(match view.buffer {
                    BufferName::Input(i) => input_view(concrete[i], view),
                    BufferName::Node(_) => {
                        let (buffer, layout) = self.view_buffer(view, concrete, slots);
                        let mut copy = CudaBuffer::alloc(&self.device, buffer.len())
                            .map_err(|e| failed("a fallback's operand", e))?;
                        copy.copy_from(buffer).map_err(|e| failed("a fallback's operand", e))?;
                        Tensor::from_concrete(Arc::new(Storage::Cuda(copy)), layout)
                    }
                })),
                FallbackArg::Scalar(_) => Ok(None),
            })
            .collect::<Result<Vec<Option<Tensor>>>>()?;
        let operands: Vec<Operand> = args
            .iter()
            .zip(&tensors)
            .map(|(a, t)| match (a, t) {
                (FallbackArg::Scalar(v), _) => Operand::Scalar(*v),
                (FallbackArg::Tensor(_), t) => Operand::Tensor(t.as_ref().expect("made above")),
            })
            .collect();
        op.apply(&operands, location)?.to_vec()
    }
}
