//! Results kept across calls: a step that joins weights (a `cat` of graph inputs the program
//! never writes, read only by matrix products as their weight or bias; chosen by the call plan,
//! `call_plan::kept_groups`) keeps its output buffers in the program, and a later call skips it
//! while none of those inputs can have changed. It is Inductor's constant folding under freezing
//! (`torch/_inductor/freezing.py`), which computes parameter-only subgraphs once, for weights
//! that stay graph inputs: the concatenated q, k and v weights of `concat_linear` are joined
//! once, not on every call.
//!
//! **Validity.** An entry records, for each input the step reads, its storage (a [`Weak`], so
//! that no new storage can take the address while the entry holds it) and its layout, and the
//! process's write epoch ([`crate::tensor::write_epoch`], the coarse analogue of PyTorch's
//! `tensor._version`) read before the step ran. A call skips the step when every input is the
//! same storage in the same layout and the epoch has not moved.
//!
//! **Threads.** A program may be called from several threads at once. A call takes the kept
//! buffers for its whole run if no other call holds them ([`Kept::lend`]); a call that finds them
//! taken runs every step into fresh memory, as if nothing were kept. While lent, the program
//! holds no entry, so a call that fails midway leaves nothing stale behind.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};

use serde::{Deserialize, Serialize};

use super::Slots;
use crate::inductor::call_plan::SlotId;
use crate::layout::Layout;
use crate::tensor::{Concrete, Storage, write_epoch};

/// A step of the schedule whose outputs are kept across calls.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct KeptStep {
    /// Its position among the schedule's steps.
    pub step: usize,
    /// The graph inputs it reads, by position.
    pub inputs: Vec<usize>,
    /// The slots it writes.
    pub slots: Vec<SlotId>,
}

/// The kept steps of a program and, between calls, their buffers `M` and what they were computed
/// from.
pub(crate) struct Kept<M> {
    steps: Vec<KeptStep>,
    /// For each step of the schedule, its place in `steps` if it is kept.
    at_step: Vec<Option<usize>>,
    held: Mutex<Held<M>>,
}

/// What the program holds between calls: for each kept step, what its buffers were computed from
/// (`None` when they hold nothing usable), and the buffers of every kept slot.
struct Held<M> {
    entries: Vec<Option<Entry>>,
    buffers: Slots<M>,
}

/// What a kept step's buffers were computed from.
struct Entry {
    /// The write epoch read before the step ran.
    epoch: u64,
    /// Each input read: its storage and layout.
    inputs: Vec<(Weak<Storage>, Layout)>,
}

impl Entry {
    /// Whether the buffers computed from this entry are what the step would compute on `inputs`
    /// at `epoch`.
    fn holds(&self, epoch: u64, step: &KeptStep, inputs: &[&Concrete]) -> bool {
        self.epoch == epoch
            && step.inputs.iter().zip(&self.inputs).all(|(&i, (storage, layout))| {
                std::ptr::eq(storage.as_ptr(), Arc::as_ptr(&inputs[i].storage)) && *layout == inputs[i].layout
            })
    }
}

impl<M> Kept<M> {
    /// The kept `steps` of a schedule of `step_count` steps and `slot_count` slots.
    pub(crate) fn new(steps: Vec<KeptStep>, step_count: usize, slot_count: usize) -> Kept<M> {
        let mut at_step = vec![None; step_count];
        for (k, step) in steps.iter().enumerate() {
            at_step[step.step] = Some(k);
        }
        let held = Held { entries: steps.iter().map(|_| None).collect(), buffers: Slots::new(slot_count) };
        Kept { steps, at_step, held: Mutex::new(held) }
    }

    /// Lends the kept buffers to a call, moving them into its `slots`; `None` when nothing is
    /// kept or another call holds them (this call then computes every step into fresh memory).
    pub(crate) fn lend(&self, slots: &mut Slots<M>) -> Option<Lent<'_, M>> {
        if self.steps.is_empty() {
            return None;
        }
        let mut held = match self.held.try_lock() {
            Ok(held) => held,
            // A call that panicked while holding them left no entry behind (see `Lent`).
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        // Taken without allocating; a call that failed while lent left none, so none is valid.
        let mut entries = std::mem::take(&mut held.entries);
        if entries.len() != self.steps.len() {
            entries = self.steps.iter().map(|_| None).collect();
        }
        for step in &self.steps {
            for &slot in &step.slots {
                slots[slot] = held.buffers[slot].take();
            }
        }
        Some(Lent { kept: self, held, entries })
    }
}

/// The kept buffers while a call runs on them: it holds the program's lock, and the entries,
/// which go back to the program only when the call finishes ([`Lent::keep`]); until then the
/// program holds none, so a call that fails midway leaves no entry for buffers it lost.
pub(crate) struct Lent<'k, M> {
    kept: &'k Kept<M>,
    held: MutexGuard<'k, Held<M>>,
    entries: Vec<Option<Entry>>,
}

impl<M> Lent<'_, M> {
    /// Whether step `step` of the schedule may be skipped, its kept buffers holding what it would
    /// compute on `inputs`. When it may not, its entry is made for the run about to happen (the
    /// epoch read now, before the step reads its inputs).
    pub(crate) fn skip(&mut self, step: usize, inputs: &[&Concrete]) -> bool {
        let Some(k) = self.kept.at_step[step] else { return false };
        let (kept, epoch) = (&self.kept.steps[k], write_epoch());
        if self.entries[k].as_ref().is_some_and(|e| e.holds(epoch, kept, inputs)) {
            return true;
        }
        let inputs = kept.inputs.iter().map(|&i| (Arc::downgrade(&inputs[i].storage), inputs[i].layout.clone()));
        self.entries[k] = Some(Entry { epoch, inputs: inputs.collect() });
        false
    }

    /// Gives the kept buffers back to the program from the call's `slots`, with their entries.
    pub(crate) fn keep(mut self, slots: &mut Slots<M>) {
        for (step, entry) in self.kept.steps.iter().zip(&mut self.entries) {
            for &slot in &step.slots {
                self.held.buffers[slot] = slots[slot].take();
            }
            if step.slots.iter().any(|&slot| self.held.buffers[slot].is_none()) {
                *entry = None;
            }
        }
        self.held.entries = std::mem::take(&mut self.entries);
    }
}
