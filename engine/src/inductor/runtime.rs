//! Running a compiled graph on the CPU: what the generated `call` function does in TorchInductor's
//! output module. Every decision (buffers, slots, kernel arguments) was made at compile time; a
//! call checks its inputs, walks the steps and wraps the results as tensors.

use std::sync::Arc;

use super::ir::{BufferName, FallbackArg, GraphInput, LoweredGraph, NodeBody, View};
use super::kernel::Kernel;
use super::wrapper::{CallPlan, Step};
use crate::codecache::SharedLibrary;
use crate::device::cpu::{self, matmul_into};
use crate::error::{Error, Result, SourceLocation};
use crate::layout::Layout;
use crate::op::Op;
use crate::tensor::{Operand, Storage, Tensor};

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

    /// Runs the plan on `inputs`, which must have the traced shapes and strides.
    pub(crate) fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let data = self.check_inputs(inputs)?;
        let mut slots: Vec<Vec<f32>> = (0..self.slot_count).map(|_| Vec::new()).collect();
        for step in &self.steps {
            match step {
                CpuStep::Alloc { slot, len } => slots[*slot] = vec![0.0; *len],
                CpuStep::Kernel { func, args, xnumel } => {
                    let ptrs: Vec<*mut f32> = args
                        .iter()
                        .map(|b| match b {
                            // Kernels never write their inputs: the cast only fits the uniform ABI.
                            BufferName::Input(i) => data[*i].as_ptr() as *mut f32,
                            BufferName::Node(n) => slots[self.slot(*n)].as_mut_ptr(),
                        })
                        .collect();
                    // SAFETY: the kernel indexes each argument within the shapes and strides it
                    // was generated for, which `check_inputs` and the plan's slot sizes guarantee.
                    unsafe { func(ptrs.as_ptr(), *xnumel) };
                }
                CpuStep::Matmul { a, b, out, shape } => {
                    let mut result = std::mem::take(&mut slots[self.slot(*out)]);
                    {
                        let (ad, al) = self.view_data(a, &data, &slots);
                        let (bd, bl) = self.view_data(b, &data, &slots);
                        matmul_into(
                            cpu::Input::Tensor { data: ad, layout: &al },
                            cpu::Input::Tensor { data: bd, layout: &bl },
                            shape,
                            &mut result,
                        );
                    }
                    slots[self.slot(*out)] = result;
                }
                CpuStep::Fallback { op, args, out, location } => {
                    let tensors: Vec<Option<Tensor>> = args
                        .iter()
                        .map(|a| match a {
                            FallbackArg::Tensor(view) => Some(self.view_tensor(view, inputs, &slots)),
                            FallbackArg::Scalar(_) => None,
                        })
                        .collect();
                    let operands: Vec<Operand> = args
                        .iter()
                        .zip(&tensors)
                        .map(|(a, t)| match (a, t) {
                            (FallbackArg::Scalar(v), _) => Operand::Scalar(*v),
                            (_, Some(t)) => Operand::Tensor(t),
                            (FallbackArg::Tensor(_), None) => unreachable!("tensor arguments were made above"),
                        })
                        .collect();
                    let value = op.apply(&operands, *location)?.to_vec()?;
                    slots[self.slot(*out)].copy_from_slice(&value);
                }
            }
        }
        Ok(self.outputs(inputs, slots))
    }

    fn slot(&self, node: usize) -> usize {
        self.slot_of[node].expect("buffers read from memory have a slot")
    }

    /// The memory and layout a view reads: inputs from the caller's tensors, nodes from slots.
    fn view_data<'s>(&self, view: &View, inputs: &[&'s [f32]], slots: &'s [Vec<f32>]) -> (&'s [f32], Layout) {
        match view.buffer {
            BufferName::Input(i) => (inputs[i], view.layout.clone()),
            BufferName::Node(n) => (&slots[self.slot(n)], view.layout.clone()),
        }
    }

    /// A tensor with a view's values, for an eager fallback: inputs share the caller's storage,
    /// planned buffers are copied out of their slot.
    fn view_tensor(&self, view: &View, inputs: &[Tensor], slots: &[Vec<f32>]) -> Tensor {
        match view.buffer {
            BufferName::Input(i) => {
                let c = inputs[i].concrete().expect("checked concrete");
                let l = &view.layout;
                let layout = Layout::new(l.shape().to_vec(), l.strides().to_vec(), c.layout.offset() + l.offset());
                Tensor::from_concrete(c.storage.clone(), layout)
            }
            BufferName::Node(n) => {
                let storage = Arc::new(Storage::Cpu(slots[self.slot(n)].clone()));
                Tensor::from_concrete(storage, view.layout.clone())
            }
        }
    }

    /// Each input's elements from its first one on, after checking it is what the code expects.
    fn check_inputs<'t>(&self, inputs: &'t [Tensor]) -> Result<Vec<&'t [f32]>> {
        let mismatch = |message: String| Error::Backend { backend: "inductor".into(), message };
        if inputs.len() != self.inputs.len() {
            return Err(mismatch(format!(
                "the compiled graph takes {} inputs, got {}",
                self.inputs.len(),
                inputs.len()
            )));
        }
        inputs
            .iter()
            .zip(&self.inputs)
            .map(|(t, expected)| {
                let Some(concrete) = t.concrete() else {
                    return Err(mismatch(format!("input `{}` is symbolic; pass a concrete tensor", expected.name)));
                };
                if t.shape() != expected.shape || concrete.layout.strides() != expected.strides {
                    return Err(mismatch(format!(
                        "input `{}` has shape {:?} and strides {:?}, but the code was generated for shape {:?} and \
                         strides {:?}; compile again for this layout",
                        expected.name,
                        t.shape(),
                        concrete.layout.strides(),
                        expected.shape,
                        expected.strides
                    )));
                }
                match &*concrete.storage {
                    Storage::Cpu(data) => Ok(&data[concrete.layout.offset()..]),
                }
            })
            .collect()
    }

    /// The returned tensors: views of inputs share the caller's storage; each slot returned
    /// becomes one storage shared by every view of it.
    fn outputs(&self, inputs: &[Tensor], mut slots: Vec<Vec<f32>>) -> Vec<Tensor> {
        let mut shared: Vec<Option<Arc<Storage>>> = vec![None; slots.len()];
        self.outputs
            .iter()
            .map(|view| match view.buffer {
                BufferName::Input(_) => self.view_tensor(view, inputs, &[]),
                BufferName::Node(n) => {
                    let slot = self.slot(n);
                    let storage = shared[slot]
                        .get_or_insert_with(|| Arc::new(Storage::Cpu(std::mem::take(&mut slots[slot]))))
                        .clone();
                    Tensor::from_concrete(storage, view.layout.clone())
                }
            })
            .collect()
    }
}
