//! The call plan, the analogue of TorchInductor's wrapper code (`codegen/wrapper.py`, the `call`
//! function of the output code): allocate each buffer that must exist in memory, reusing the
//! memory of a dead buffer of the same size, launch kernels and extern calls in order, and return
//! views of the results.
//!
//! A node that writes a graph input in place has no memory of its own: its kernel stores into the
//! input, and the graph returns the input.
//!
//! Everything here is decided at compile time, so running a compiled graph only walks the steps.

use super::ir::{BufferName, IrId, LoweredGraph, PerNode, View};
use super::scheduler::{KernelId, Schedule};
use crate::dtype::DType;
use crate::layout::numel;

/// One step of the call plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Memory for node buffer `buffer`, fresh or taken over from the dead buffer `reuses`.
    Alloc {
        /// The IR node whose output the memory holds.
        buffer: IrId,
        /// A buffer of the same size whose last reader has already run.
        reuses: Option<IrId>,
    },
    /// Launch kernel `kernel` on its arguments.
    Kernel {
        /// Which kernel.
        kernel: KernelId,
    },
    /// The extern call (matmul, or an eager fallback) computing IR node `node`.
    Extern {
        /// The IR node.
        node: IrId,
    },
}

/// A slot of memory in the call plan: buffers whose lives do not overlap share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct SlotId(pub usize);

/// The whole plan: steps, the memory slot of each stored buffer, and the returned views.
#[derive(Clone, Debug, PartialEq)]
pub struct CallPlan {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// For each IR node, the slot of memory holding its buffer (`None` when it lives only in
    /// registers).
    pub slot_of: PerNode<Option<SlotId>>,
    /// Elements in each slot, indexed by [`SlotId`].
    pub slot_sizes: Vec<usize>,
    /// The element type of each slot: only a buffer of the same dtype and size reuses one.
    pub slot_dtypes: Vec<DType>,
    /// The graph's outputs: views of inputs or of node buffers.
    pub outputs: Vec<View>,
}

/// Plans the call for a scheduled graph, with the kernels the schedule numbered.
pub fn plan(graph: &LoweredGraph, schedule: &Schedule) -> CallPlan {
    let groups = &schedule.groups;
    let mut group_of = PerNode::filled(graph.nodes.len(), 0);
    for (g, group) in groups.iter().enumerate() {
        for &m in &group.members {
            group_of[m] = g;
        }
    }
    // The last group that reads each stored buffer; outputs live past every group.
    let mut last_use = PerNode::filled(graph.nodes.len(), 0);
    for (n, node) in graph.enumerate() {
        for read in node.reads() {
            if let BufferName::Node(p) = read {
                last_use[p] = last_use[p].max(group_of[n]);
            }
        }
    }
    for out in &graph.outputs {
        if let BufferName::Node(p) = out.buffer {
            last_use[p] = usize::MAX;
        }
    }

    let mut steps = Vec::new();
    let mut slot_of = PerNode::filled(graph.nodes.len(), None);
    let mut slot_sizes = Vec::new();
    let mut slot_dtypes = Vec::new();
    // Dead buffers whose memory may be taken: (buffer, slot).
    let mut free: Vec<(IrId, SlotId)> = Vec::new();
    let kernel_ids = schedule.kernel_ids();
    // ANCHOR: reuse
    for (g, group) in groups.iter().enumerate() {
        for &m in group.members.iter().filter(|&&m| schedule.stored[m] && graph[m].into_input.is_none()) {
            let (size, dtype) = (numel(&graph[m].shape), graph[m].dtype);
            let reused = free
                .iter()
                .position(|&(_, slot)| slot_sizes[slot.0] == size && slot_dtypes[slot.0] == dtype)
                .map(|i| free.remove(i));
            let slot = match reused {
                Some((_, slot)) => slot,
                None => {
                    slot_sizes.push(size);
                    slot_dtypes.push(dtype);
                    SlotId(slot_sizes.len() - 1)
                }
            };
            slot_of[m] = Some(slot);
            steps.push(Step::Alloc { buffer: m, reuses: reused.map(|(b, _)| b) });
        }
        steps.push(match kernel_ids[g] {
            Some(kernel) => Step::Kernel { kernel },
            None => Step::Extern { node: group.members[0] },
        });
        // Buffers whose last reader just ran are dead from here on.
        for (n, slot) in slot_of.iter() {
            if let Some(slot) = slot
                && last_use[n] == g
                && group_of[n] < g
            {
                free.push((n, *slot));
            }
        }
    }
    // ANCHOR_END: reuse
    let outputs =
        graph.outputs.iter().map(|v| View { buffer: graph.memory(v.buffer), layout: v.layout.clone() }).collect();
    CallPlan { steps, slot_of, slot_sizes, slot_dtypes, outputs }
}
