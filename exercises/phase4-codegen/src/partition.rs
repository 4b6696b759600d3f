//! Exercise `save_or_recompute` (deep): what a training step's forward keeps for its backward,
//! under a memory budget, at the least recomputation. PyTorch's partitioner makes this choice
//! when given `activation_memory_budget`; the engine's (`engine::aot::partition`) saves the fewest
//! bytes with no budget at all.

/// What one value of the forward is to the backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An input of the forward (a parameter, the batch): always there, nothing to save.
    Input,
    /// A value the backward may compute again from the values it has (a cheap pointwise op).
    Recomputable,
    /// A value the backward may not compute again (a matrix product): it must be saved to be read.
    Banned,
}

/// One value of the forward graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    /// Its name, for messages.
    pub name: String,
    /// Input, recomputable or banned.
    pub kind: Kind,
    /// The values it is computed from, by position (always earlier in the list); none for an input.
    pub inputs: Vec<usize>,
    /// Its size in bytes: what saving it costs the budget.
    pub bytes: u64,
    /// What computing it again costs (its op's time, in arbitrary units).
    pub cost: u64,
    /// Whether the backward reads it.
    pub needed: bool,
}

/// A forward graph, in execution order, and how many bytes the forward may save for the backward.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaveProblem {
    /// The values, inputs first or mixed in, each after the values it reads.
    pub values: Vec<Value>,
    /// The most bytes the saved values may take together.
    pub budget: u64,
}

// ANCHOR: recomputation
/// **Exercise `save_or_recompute`, part 1.** What the backward must recompute when the forward
/// saves the values at positions `saved`: the total `cost` of the values it computes again (each
/// counted once), or `None` when the plan does not work.
///
/// A value the backward needs is there when it is an input or saved; otherwise the backward
/// computes it again, which needs each of the values it is computed from to be there in turn.
/// A plan does not work when a banned value would have to be computed again, or when the saved
/// values take more than `problem.budget` bytes (inputs cost nothing to keep).
///
/// Judged on graphs and plans drawn from the run's seed, against the grader's own costing.
///
/// Book: `book/src/phase4/exercises.md`, section "save_or_recompute".
/// Check: `cargo grader check phase4`.
pub fn recomputation(problem: &SaveProblem, saved: &[usize]) -> Option<u64> {
    todo!()
}
// ANCHOR_END: recomputation

// ANCHOR: choose_saved
/// **Exercise `save_or_recompute`, part 2 (deep).** The values the forward should save: a plan
/// that works (see [`recomputation`]) within the budget, whose recomputation costs as little as
/// any plan's can. Any such plan is accepted; saving a value the backward does not read is
/// allowed, and sometimes pays (it can spare recomputing a long chain).
///
/// The graphs have at most 15 values; every graph the grader draws has a plan that works.
///
/// Judged on graphs drawn from the run's seed: your plan must work, and its recomputation must
/// cost exactly the least possible, which the grader computes itself (not with the engine's
/// partitioner, which minimises bytes, not recomputation).
///
/// Book: `book/src/phase4/exercises.md`, section "save_or_recompute".
/// Check: `cargo grader check phase4`.
pub fn choose_saved(problem: &SaveProblem) -> Vec<usize> {
    todo!()
}
// ANCHOR_END: choose_saved
