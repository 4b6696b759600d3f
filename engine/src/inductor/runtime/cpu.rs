//! Running a compiled graph on the CPU: kernels are C functions of a loaded shared library,
//! matmul is the CPU's sgemm writing into the planned buffer, buffers are host vectors.

use std::sync::Arc;

use super::{check_inputs, input_view, outputs};
use crate::codecache::SharedLibrary;
use crate::device::Device;
use crate::device::cpu::{self, matmul_into};
use crate::error::{Result, SourceLocation};
use crate::inductor::ir::{BufferName, FallbackArg, GraphInput, LoweredGraph, NodeBody, View};
use crate::inductor::kernel::Kernel;
use crate::inductor::wrapper::{CallPlan, Step};
use crate::layout::Layout;
use crate::op::Op;
use crate::tensor::{Concrete, Operand, Storage, Tensor};

/// The ABI of every generated C kernel: the argument pointers, then the extent of `x`.
type KernelFn = unsafe extern "C" fn(*const *mut f32, i64);

enum CpuStep {
    /// Fresh zeroed memory for a slot (a reused slot needs no step).
    Alloc {
        slot: usize,
        len: usize,
    },
    Kernel {
        func: KernelFn,
        args: Vec<BufferName>,
        xnumel: i64,
    },
    Matmul {
        a: View,
        b: View,
        out: usize,
        shape: Vec<usize>,
    },
    /// An op run by the eager dispatcher on tensors made from the planned buffers.
    Fallback {
        op: Op,
        args: Vec<FallbackArg>,
        out: usize,
        location: SourceLocation,
    },
}

/// A compiled graph ready to run on the CPU.
pub(crate) struct CpuProgram {
    /// Keeps the kernels' code loaded while their function pointers are in `steps`.
    _library: Option<SharedLibrary>,
    inputs: Vec<GraphInput>,
    steps: Vec<CpuStep>,
    slot_of: Vec<Option<usize>>,
    slot_count: usize,
    outputs: Vec<View>,
}

/// A graph input's elements from its first one on.
fn input_data(input: &Concrete) -> &[f32] {
    let Storage::Cpu(data) = &*input.storage else { unreachable!("inputs were checked to be on the CPU") };
    &data[input.layout.offset()..]
}

/// The memory of a view: graph inputs are the caller's, nodes' are the plan's slots.
fn view_data<'s>(
    view: &View,
    inputs: &[&'s Concrete],
    slot_of: &[Option<usize>],
    slots: &'s [Option<Vec<f32>>],
) -> (&'s [f32], Layout) {
    match view.buffer {
        BufferName::Input(i) => (input_data(inputs[i]), view.layout.clone()),
        BufferName::Node(n) => {
            let slot = slot_of[n].expect("buffers read from memory have a slot");
            (slots[slot].as_deref().expect("buffers are written before they are read"), view.layout.clone())
        }
    }
}

impl CpuProgram {
    /// Resolves each kernel of `plan` in `library` (compiled from the kernels' C source).
    pub(crate) fn new(
        graph: &LoweredGraph,
        kernels: &[Kernel],
        plan: &CallPlan,
        library: Option<SharedLibrary>,
    ) -> Result<CpuProgram> {
        let mut steps = Vec::new();
        for step in &plan.steps {
            steps.push(match step {
                // A reused slot already holds memory of the right size.
                Step::Alloc { reuses: Some(_), .. } => continue,
                Step::Alloc { buffer, reuses: None } => {
                    let slot = plan.slot_of[*buffer].expect("allocated buffers have a slot");
                    CpuStep::Alloc { slot, len: plan.slot_sizes[slot] }
                }
                Step::Kernel { kernel } => {
                    let k = &kernels[*kernel];
                    let library = library.as_ref().expect("a plan with kernels has a library");
                    // SAFETY: every generated kernel has exactly the `KernelFn` signature.
                    let func = unsafe { *library.get::<KernelFn>(&k.name)? };
                    CpuStep::Kernel { func, args: k.args.iter().map(|a| a.buffer).collect(), xnumel: k.xnumel as i64 }
                }
                Step::Extern { node } => {
                    let n = &graph.nodes[*node];
                    match &n.body {
                        NodeBody::Matmul { a, b } => {
                            CpuStep::Matmul { a: a.clone(), b: b.clone(), out: *node, shape: n.shape.clone() }
                        }
                        NodeBody::Fallback { op, args } => CpuStep::Fallback {
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
        Ok(CpuProgram {
            _library: library,
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

    /// Runs the plan on `inputs`, which must have the traced shapes and strides.
    pub(crate) fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let concrete = check_inputs(&self.inputs, inputs, Device::Cpu)?;
        let mut slots: Vec<Option<Vec<f32>>> = (0..self.slot_count).map(|_| None).collect();
        for step in &self.steps {
            match step {
                CpuStep::Alloc { slot, len } => slots[*slot] = Some(vec![0.0; *len]),
                CpuStep::Kernel { func, args, xnumel } => {
                    let ptrs: Vec<*mut f32> = args
                        .iter()
                        .map(|b| match b {
                            // Kernels never write their inputs: the cast only fits the uniform ABI.
                            BufferName::Input(i) => input_data(concrete[*i]).as_ptr() as *mut f32,
                            BufferName::Node(n) => {
                                slots[self.slot(*n)].as_mut().expect("allocated before use").as_mut_ptr()
                            }
                        })
                        .collect();
                    // SAFETY: the kernel indexes each argument within the shapes and strides it
                    // was generated for, which `check_inputs` and the plan's slot sizes guarantee.
                    unsafe { func(ptrs.as_ptr(), *xnumel) };
                }
                CpuStep::Matmul { a, b, out, shape } => {
                    let mut result = slots[self.slot(*out)].take().expect("allocated before use");
                    let (ad, al) = view_data(a, &concrete, &self.slot_of, &slots);
                    let (bd, bl) = view_data(b, &concrete, &self.slot_of, &slots);
                    let (a, b) =
                        (cpu::Input::Tensor { data: ad, layout: &al }, cpu::Input::Tensor { data: bd, layout: &bl });
                    matmul_into(a, b, shape, &mut result);
                    slots[self.slot(*out)] = Some(result);
                }
                CpuStep::Fallback { op, args, out, location } => {
                    let tensors: Vec<Option<Tensor>> = args
                        .iter()
                        .map(|a| match a {
                            FallbackArg::Tensor(view) => Some(match view.buffer {
                                BufferName::Input(i) => input_view(concrete[i], view),
                                // A copy: the fallback's eager kernels take tensors, not slots.
                                BufferName::Node(_) => {
                                    let (data, _) = view_data(view, &concrete, &self.slot_of, &slots);
                                    let storage = Arc::new(Storage::Cpu(data.to_vec()));
                                    Tensor::from_concrete(storage, view.layout.clone())
                                }
                            }),
                            FallbackArg::Scalar(_) => None,
                        })
                        .collect();
                    let operands: Vec<Operand> = args
                        .iter()
                        .zip(&tensors)
                        .map(|(a, t)| match (a, t) {
                            (FallbackArg::Scalar(v), _) => Operand::Scalar(*v),
                            (FallbackArg::Tensor(_), t) => Operand::Tensor(t.as_ref().expect("made above")),
                        })
                        .collect();
                    let value = op.apply(&operands, *location)?.to_vec()?;
                    slots[self.slot(*out)].as_mut().expect("allocated before use").copy_from_slice(&value);
                }
            }
        }
        Ok(outputs(&self.outputs, &concrete, &self.slot_of, &mut slots, Storage::Cpu))
    }
}
