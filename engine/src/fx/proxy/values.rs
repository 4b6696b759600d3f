//! The symbolic values of one trace: for each, the tensor handed out for it and the node that
//! holds it in the graph being traced.
//!
//! This is on the per-call path of every compiled function (a cached call still traces: one
//! symbolic tensor per op), so it is one vector indexed by value, with no hashing, and the
//! tensors' allocations are recycled: when a trace ends, each tensor no one else holds goes to a
//! spare list of this thread, and the next trace takes that list and writes its tensors into
//! those allocations instead of new ones.

use std::cell::RefCell;
use std::sync::Arc;

use crate::fx::graph::NodeId;
use crate::tensor::{Repr, Symbolic, Tensor};

/// Values a trace makes room for at its start, so that a small function's trace grows no buffer.
const EXPECTED: usize = 32;

/// The most spare tensor allocations a thread keeps (about 100 bytes each).
const MAX_SPARE: usize = 1024;

thread_local! {
    /// Allocations of symbolic tensors from finished traces, each held by nothing else.
    static SPARE: RefCell<Vec<Arc<Repr>>> = const { RefCell::new(Vec::new()) };
}

/// One symbolic value.
struct Value {
    /// The node holding the value in the current graph; `None` after a graph break until the
    /// value is first used again (it is then carried into the new graph).
    node: Option<NodeId>,
    /// The tensor handed out. The trace holds it too, so the tensor is alive in the traced code
    /// exactly while another reference exists (a graph break outputs those values).
    tensor: Arc<Repr>,
}

impl Value {
    fn is_alive(&self) -> bool {
        Arc::strong_count(&self.tensor) > 1
    }
}

/// Every symbolic value of a trace, numbered densely from 0.
pub(super) struct Values {
    values: Vec<Value>,
    /// Allocations for new tensors: the thread's spare list, taken when the trace started (a
    /// trace inside this one, a `cond` branch, finds the list empty and allocates).
    spare: Vec<Arc<Repr>>,
}

impl Default for Values {
    fn default() -> Values {
        let spare = SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()));
        Values { values: Vec::with_capacity(EXPECTED), spare }
    }
}

impl Values {
    /// The number the next value will have.
    pub fn next(&self) -> u64 {
        self.values.len() as u64
    }

    /// Adds value number [`Values::next`], held by `node`, and returns the tensor `symbolic`
    /// describes, which stands for it. (Inlined into the recording of each op: see
    /// `TraceState::record`.)
    #[inline(always)]
    pub fn add(&mut self, node: NodeId, symbolic: Symbolic) -> Tensor {
        debug_assert_eq!(symbolic.value, self.next());
        let tensor = match self.spare.pop() {
            Some(mut repr) => {
                *Arc::get_mut(&mut repr).expect("nothing else holds a spare allocation") = Repr::Symbolic(symbolic);
                Tensor { repr, autograd: None }
            }
            None => Tensor::from_symbolic(symbolic),
        };
        self.values.push(Value { node: Some(node), tensor: tensor.repr.clone() });
        tensor
    }

    /// The node holding `value` in the current graph.
    pub fn node(&self, value: u64) -> Option<NodeId> {
        self.values.get(value as usize)?.node
    }

    /// Records that `value` is now held by `node` (a value carried across a graph break).
    pub fn set_node(&mut self, value: u64, node: NodeId) {
        self.values[value as usize].node = Some(node);
    }

    /// The values whose tensors the traced code still holds, with their nodes in the current
    /// graph.
    pub fn live(&self) -> impl Iterator<Item = (u64, Option<NodeId>)> + '_ {
        let alive = self.values.iter().enumerate().filter(|(_, v)| v.is_alive());
        alive.map(|(i, v)| (i as u64, v.node))
    }

    /// Forgets every value's node: the graph they were in is finished.
    pub fn leave_graph(&mut self) {
        self.values.iter_mut().for_each(|v| v.node = None);
    }
}

impl Drop for Values {
    /// Gives the spare allocations back to the thread, with those of the tensors no one else
    /// holds now, for the next trace.
    fn drop(&mut self) {
        let mut spare = std::mem::take(&mut self.spare);
        for value in self.values.drain(..) {
            if spare.len() < MAX_SPARE
                && let Some(tensor) = unheld(value.tensor)
            {
                spare.push(tensor);
            }
        }
        // At thread exit the list may already be gone: the tensors are then just freed.
        let _ = SPARE.try_with(|kept| {
            // The thread's list is empty unless a trace inside this one (a `cond` branch) left
            // one: the longer list is kept.
            let mut kept = kept.borrow_mut();
            if kept.len() < spare.len() {
                *kept = spare;
            }
        });
    }
}

/// `tensor` when this is its only reference (so no other thread can take one either: the
/// allocation can be written through [`Arc::get_mut`]).
fn unheld(tensor: Arc<Repr>) -> Option<Arc<Repr>> {
    (Arc::strong_count(&tensor) == 1 && Arc::weak_count(&tensor) == 0).then_some(tensor)
}
