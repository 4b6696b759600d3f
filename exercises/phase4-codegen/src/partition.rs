//! Exercise `save_or_recompute` (deep): what a training step's forward keeps for its backward,
//! when memory has a price, at the least total cost. PyTorch's min-cut partitioner
//! (`min_cut_rematerialization_partition`) makes this choice; the engine's
//! (`engine::aot::partition`) saves the fewest bytes and counts recomputation as free.

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
    /// The values it is computed from, by position (always earlier in the list, no position
    /// twice); none for an input.
    pub inputs: Vec<usize>,
    /// Its size in bytes: what saving it costs is `bytes` times the problem's `price`.
    pub bytes: u64,
    /// What computing it again costs (its op's time, in arbitrary units).
    pub cost: u64,
    /// Whether the backward reads it.
    pub needed: bool,
}

/// A forward graph, in execution order, and what memory costs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaveProblem {
    /// The values, inputs first or mixed in, each after the values it reads.
    pub values: Vec<Value>,
    /// What keeping one byte from the forward to the backward costs, in the units of `cost`.
    pub price: u64,
}

// ANCHOR: plan_cost
/// **Exercise `save_or_recompute`, part 1.** What the plan that saves the values at positions
/// `saved` costs: `price` times the bytes it saves, plus the `cost` of every value the backward
/// computes again, or `None` when the plan does not work.
///
/// A value the backward needs is there when it is an input or saved; otherwise the backward
/// computes it again (once, however many values read it), which needs each of the values it is
/// computed from to be there in turn. A plan does not work when a banned value would have to be
/// computed again. Inputs cost nothing to keep; a position saved twice is saved once.
///
/// Judged on graphs and plans drawn from the run's seed, against the grader's own costing.
///
/// Book: `book/src/phase4/exercises.md`, section "save_or_recompute".
/// Check: `cargo grader check phase4`.
pub fn plan_cost(problem: &SaveProblem, saved: &[usize]) -> Option<u64> {
    todo!()
}
// ANCHOR_END: plan_cost

// ANCHOR: choose_saved
/// **Exercise `save_or_recompute`, part 2 (deep).** The values the forward should save: a plan
/// that works (see [`plan_cost`]) and costs as little as any plan can. Any such plan is accepted;
/// saving a value the backward does not read is allowed, and sometimes pays (it can spare
/// recomputing a long chain). Every graph has a plan that works: saving every value the backward
/// reads.
///
/// Judged on graphs of 40 to 200 values drawn from the run's seed, some at random and some built
/// to punish shortcuts (deciding each value on its own, recomputing all that is cheap, saving all
/// that is read): your plan must work and cost exactly the least possible, which the grader
/// computes itself. Each of the two checks must finish within 30 seconds, judging included: ample
/// for a method whose time grows polynomially with the graph, far too little for trying plans one
/// by one.
///
/// Book: `book/src/phase4/exercises.md`, section "save_or_recompute".
/// Check: `cargo grader check phase4`.
pub fn choose_saved(problem: &SaveProblem) -> Vec<usize> {
    todo!()
}
// ANCHOR_END: choose_saved
