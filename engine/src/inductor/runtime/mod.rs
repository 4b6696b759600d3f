//! Running a compiled graph: what the generated `call` function does in TorchInductor's output
//! module. Every decision (buffers, slots, kernel arguments, launch shapes) was made at compile
//! time; a call checks its inputs, walks the steps and wraps the results as tensors.
//!
//! [`host`] runs a plan in host memory, calling each kernel through [`host::HostKernel`] (a C
//! function of a shared library, or the interpreter); [`cuda`] launches the kernels of a CUBIN on
//! the device's stream. What they share is here. Which runtime a program uses is its target's
//! choice (`super::target`).

pub(crate) mod cuda;
pub(crate) mod guards;
pub(crate) mod host;
pub(crate) mod kept;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::call_plan::{CallPlan, SlotId, Step};
use super::ir::{BufferName, Epilogue, FallbackArg, GraphInput, IrId, LoweredGraph, NodeBody, PerNode, View};
use super::kernel::{Kernel, KernelBody};
use super::launch::Launch;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::layout::Layout;
use crate::op::Op;
use crate::tensor::{Concrete, Operand, Storage, Tensor};
use kept::KeptStep;

/// A compiled graph ready to run on its device: what a target builds from a program spec (the
/// loaded module's `call` in TorchInductor).
pub(crate) trait Program: Send + Sync {
    /// Runs the plan on `inputs`, which must have the shapes and strides it was compiled for.
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
}

/// The memory of a running plan, one entry per [`SlotId`] (`None` until allocated), indexed by
/// slot so that a node's index cannot be used in its place.
pub(crate) struct Slots<M>(Vec<Option<M>>);

impl<M> Slots<M> {
    /// `count` slots, none allocated yet.
    pub(crate) fn new(count: usize) -> Self {
        Slots((0..count).map(|_| None).collect())
    }
}

/// The slots are given back last first: the allocators hand the buffer freed last to the next
/// request of its size, so on the next call each slot gets the very buffer it had, whose lines
/// the threads that write the same part of it on every call still hold in their caches. Freed
/// first-to-last, buffers of one size swapped roles on every call (a product's output became the
/// next call's GELU output, written by other threads).
impl<M> Drop for Slots<M> {
    fn drop(&mut self) {
        while let Some(slot) = self.0.pop() {
            drop(slot);
        }
    }
}

impl<M> std::ops::Index<SlotId> for Slots<M> {
    type Output = Option<M>;
    fn index(&self, slot: SlotId) -> &Option<M> {
        &self.0[slot.0]
    }
}

impl<M> std::ops::IndexMut<SlotId> for Slots<M> {
    fn index_mut(&mut self, slot: SlotId) -> &mut Option<M> {
        &mut self.0[slot.0]
    }
}

/// A step of the plan as a runtime runs it; `K` is the kernel: a [`KernelSpec`] as planned and
/// stored, then the device's resolved kernel.
#[derive(Serialize, Deserialize)]
pub(crate) enum Run<K> {
    /// Fresh memory of `len` elements of `dtype` for `slot` (a reused slot needs no step).
    Alloc { slot: SlotId, len: usize, dtype: DType },
    /// A generated kernel on its arguments.
    Kernel { kernel: K, args: Vec<BufferName>, xnumel: i64 },
    /// The library matmul of two views into node `out`'s buffer, with its epilogue.
    Matmul { a: View, b: View, epilogue: Epilogue, out: IrId, shape: Vec<usize> },
    /// A device kernel of the eager layer run on views into node `out`'s buffer, which it writes
    /// in `layout`.
    ExternKernel {
        #[serde(with = "crate::fx::export::op_serde")]
        op: Op,
        inputs: Vec<View>,
        out: IrId,
        layout: Layout,
    },
    /// An op run by the eager dispatcher on tensors made from the planned buffers.
    Fallback {
        #[serde(with = "crate::fx::export::op_serde")]
        op: Op,
        args: Vec<FallbackArg>,
        out: IrId,
        #[serde(with = "crate::inductor::serde_refs::location::required")]
        location: SourceLocation,
    },
}

/// A generated kernel as plain data, what each runtime resolves into a kernel it can call: the
/// part of a program that is the same whether it was just generated or read from the FX graph
/// cache.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct KernelSpec {
    /// Its name in the compiled module.
    pub name: String,
    /// Elements one `x` touches: 1 for pointwise kernels, the row length for reductions (how the
    /// CPU sizes its tasks).
    pub work_per_x: usize,
    /// Whether its rows are strided (a reduction over an outer dimension): neighbouring `x` then
    /// read neighbouring memory, so a CPU task should take many of them at once.
    pub strided_rows: bool,
    /// How a GPU launches it.
    pub launch: Launch,
}

/// What both runtimes take from the plan: the inputs to check, the steps with each kernel
/// (`K`), the buffer slots and where the outputs live.
#[derive(Serialize, Deserialize)]
pub(crate) struct Schedule<K> {
    pub inputs: Vec<GraphInput>,
    /// The inputs the plan writes in place (`copy_`), by position.
    pub written_inputs: Vec<usize>,
    pub steps: Vec<Run<K>>,
    /// The steps whose outputs are kept across calls while their inputs are unchanged.
    pub kept: Vec<KeptStep>,
    pub slot_of: PerNode<Option<SlotId>>,
    pub slot_count: usize,
    pub outputs: Vec<View>,
}

impl Schedule<KernelSpec> {
    /// The plan's schedule, kernel `i` being `kernels[i]` launched as `launches[i]`.
    pub(crate) fn new(graph: &LoweredGraph, plan: &CallPlan, kernels: &[Kernel], launches: &[Launch]) -> Self {
        let (steps, kept) = steps(graph, plan, kernels, launches);
        Schedule {
            inputs: graph.inputs.clone(),
            written_inputs: graph.written_inputs().map(|(input, _)| input).collect(),
            steps,
            kept,
            slot_of: plan.slot_of.clone(),
            slot_count: plan.slot_sizes.len(),
            outputs: plan.outputs.clone(),
        }
    }

    /// Whether any step runs a generated kernel (else there is no module to compile).
    pub(crate) fn has_kernels(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Run::Kernel { .. }))
    }

    /// The schedule with each kernel resolved for a device by `resolve(kernel, xnumel)`.
    pub(crate) fn resolve<K>(self, mut resolve: impl FnMut(KernelSpec, i64) -> Result<K>) -> Result<Schedule<K>> {
        let steps = self
            .steps
            .into_iter()
            .map(|step| {
                Ok(match step {
                    Run::Kernel { kernel, args, xnumel } => {
                        Run::Kernel { kernel: resolve(kernel, xnumel)?, args, xnumel }
                    }
                    Run::Alloc { slot, len, dtype } => Run::Alloc { slot, len, dtype },
                    Run::Matmul { a, b, epilogue, out, shape } => Run::Matmul { a, b, epilogue, out, shape },
                    Run::ExternKernel { op, inputs, out, layout } => Run::ExternKernel { op, inputs, out, layout },
                    Run::Fallback { op, args, out, location } => Run::Fallback { op, args, out, location },
                })
            })
            .collect::<Result<_>>()?;
        Ok(Schedule {
            inputs: self.inputs,
            written_inputs: self.written_inputs,
            steps,
            kept: self.kept,
            slot_of: self.slot_of,
            slot_count: self.slot_count,
            outputs: self.outputs,
        })
    }
}

impl<K> Schedule<K> {
    /// The slot holding node `node`'s buffer.
    pub(crate) fn slot(&self, node: IrId) -> SlotId {
        self.slot_of[node].expect("buffers read from memory have a slot")
    }
}

/// The plan's steps, kernel `i` being `kernels[i]` launched as `launches[i]`, and those kept
/// across calls.
fn steps(
    graph: &LoweredGraph,
    plan: &CallPlan,
    kernels: &[Kernel],
    launches: &[Launch],
) -> (Vec<Run<KernelSpec>>, Vec<KeptStep>) {
    let mut steps = Vec::new();
    let mut kept = Vec::new();
    for step in &plan.steps {
        kept.extend(kept_step(graph, plan, kernels, step, steps.len()));
        steps.push(match step {
            Step::Alloc { reuses: Some(_), .. } => continue,
            Step::Alloc { buffer, reuses: None } => {
                let slot = plan.slot_of[*buffer].expect("allocated buffers have a slot");
                Run::Alloc { slot, len: plan.slot_sizes[slot.0], dtype: plan.slot_dtypes[slot.0] }
            }
            Step::Kernel { kernel, .. } => {
                let k = &kernels[kernel.0];
                let (work_per_x, strided_rows) = match k.body {
                    KernelBody::Pointwise(_) | KernelBody::Foreach(_) => (1, false),
                    KernelBody::Reduction { row_len, innermost, .. } => (row_len.max(1), !innermost),
                };
                Run::Kernel {
                    kernel: KernelSpec { name: k.name.clone(), work_per_x, strided_rows, launch: launches[kernel.0] },
                    args: k.args.iter().map(|a| a.buffer).collect(),
                    xnumel: k.xnumel as i64,
                }
            }
            Step::Extern { node, .. } => {
                let n = &graph[*node];
                match &n.body {
                    NodeBody::Matmul { a, b, epilogue } => Run::Matmul {
                        a: a.clone(),
                        b: b.clone(),
                        epilogue: epilogue.clone(),
                        out: *node,
                        shape: n.shape.clone(),
                    },
                    NodeBody::ExternKernel { op, inputs, out_layout, .. } => Run::ExternKernel {
                        op: op.clone(),
                        inputs: inputs.clone(),
                        out: *node,
                        layout: out_layout.clone(),
                    },
                    NodeBody::Fallback { op, args } => Run::Fallback {
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
    (steps, kept)
}

/// The plan's `step`, at position `at` among the schedule's steps, as a [`KeptStep`] if its
/// outputs are kept.
fn kept_step(graph: &LoweredGraph, plan: &CallPlan, kernels: &[Kernel], step: &Step, at: usize) -> Option<KeptStep> {
    let (reads, writes): (Vec<BufferName>, Vec<BufferName>) = match step {
        Step::Kernel { kernel, kept: true } => {
            let args = &kernels[kernel.0].args;
            (
                args.iter().filter(|a| !a.output).map(|a| a.buffer).collect(),
                args.iter().filter(|a| a.output).map(|a| a.buffer).collect(),
            )
        }
        Step::Extern { node, kept: true } => {
            (graph[*node].reads().into_iter().map(|r| graph.memory(r)).collect(), vec![BufferName::Node(*node)])
        }
        _ => return None,
    };
    let mut inputs: Vec<usize> = reads
        .iter()
        .map(|r| match r {
            BufferName::Input(i) => *i,
            BufferName::Node(_) => unreachable!("a kept step reads only graph inputs"),
        })
        .collect();
    inputs.sort_unstable();
    inputs.dedup();
    let slots = writes
        .iter()
        .map(|w| match w {
            BufferName::Node(n) => plan.slot_of[*n].expect("a kept step writes planned slots"),
            BufferName::Input(_) => unreachable!("a kept step writes no graph input"),
        })
        .collect();
    Some(KeptStep { step: at, inputs, slots })
}

/// Runs a fallback's `op` eagerly and returns its value on the host, as the bytes of its dtype's
/// elements; `tensor` makes the tensor for one view argument.
pub(crate) fn run_fallback(
    op: &Op,
    args: &[FallbackArg],
    location: SourceLocation,
    mut tensor: impl FnMut(&View) -> Result<Tensor>,
) -> Result<Vec<u8>> {
    let tensors = args
        .iter()
        .map(|a| match a {
            FallbackArg::Tensor(view) => tensor(view).map(Some),
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
    let value = op.apply(&operands, location)?;
    let c = value.concrete().expect("an eager op returns a concrete tensor");
    c.storage
        .dense_bytes(&c.layout)
        .map_err(|e| e.at(op.name(), value.device(), vec![value.shape().to_vec()], location))
}

fn mismatch(message: String) -> Error {
    Error::Backend { backend: "inductor".into(), message }
}

/// Each input's concrete parts, after checking it is what the code was generated for: the
/// number of inputs, their shapes and strides (the kernels' indexing relies on them), their
/// device.
pub(crate) fn check_inputs<'t>(
    expected: &[GraphInput],
    inputs: &'t [Tensor],
    device: Device,
) -> Result<Vec<&'t Concrete>> {
    if inputs.len() != expected.len() {
        return Err(mismatch(format!("the compiled graph takes {} inputs, got {}", expected.len(), inputs.len())));
    }
    inputs
        .iter()
        .zip(expected)
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
            if t.dtype() != expected.dtype {
                return Err(mismatch(format!(
                    "input `{}` has dtype {}, but the code was generated for {}; compile again for this dtype \
                     (or convert it with `.to_dtype({})`)",
                    expected.name,
                    t.dtype(),
                    expected.dtype,
                    expected.dtype
                )));
            }
            if t.device() != device {
                return Err(mismatch(format!(
                    "input `{}` is on {}, but the code was compiled for {device}; move it with `.to({device})`",
                    expected.name,
                    t.device()
                )));
            }
            Ok(concrete)
        })
        .collect()
}

/// A view of a graph input as a tensor sharing the caller's storage (views are relative to the
/// input's first element).
pub(crate) fn input_view(input: &Concrete, view: &View) -> Tensor {
    let l = &view.layout;
    let layout = Layout::new(l.shape().to_vec(), l.strides().to_vec(), input.layout.offset() + l.offset());
    Tensor::from_concrete(input.storage.clone(), layout)
}

/// The returned tensors: views of inputs share the caller's storage; each slot returned becomes
/// one storage, shared by every view of it. `slot_of` maps a node to its slot; `storage` takes
/// a slot's memory.
pub(crate) fn outputs<M>(
    views: &[View],
    inputs: &[&Concrete],
    slot_of: &PerNode<Option<SlotId>>,
    slots: &mut Slots<M>,
    storage: impl Fn(M) -> Storage,
) -> Vec<Tensor> {
    let mut shared: Vec<Option<Arc<Storage>>> = vec![None; slots.0.len()];
    views
        .iter()
        .map(|view| match view.buffer {
            BufferName::Input(i) => input_view(inputs[i], view),
            BufferName::Node(n) => {
                let slot = slot_of[n].expect("returned buffers have a slot");
                let taken = shared[slot.0].get_or_insert_with(|| {
                    Arc::new(storage(slots[slot].take().expect("a returned buffer was computed")))
                });
                Tensor::from_concrete(taken.clone(), view.layout.clone())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::{SlotId, Slots};

    /// Records its slot's number in `freed` when dropped.
    struct Recorded(usize, Rc<RefCell<Vec<usize>>>);

    impl Drop for Recorded {
        fn drop(&mut self) {
            self.1.borrow_mut().push(self.0);
        }
    }

    #[test]
    fn slots_are_freed_last_first() {
        let freed = Rc::new(RefCell::new(Vec::new()));
        let mut slots = Slots::new(4);
        for slot in [0, 1, 3] {
            slots[SlotId(slot)] = Some(Recorded(slot, freed.clone()));
        }
        drop(slots);
        assert_eq!(*freed.borrow(), [3, 1, 0]);
    }
}
