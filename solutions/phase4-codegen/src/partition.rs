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
    // ANCHOR: solution
    let values = &problem.values;
    let mut is_saved = vec![false; values.len()];
    for &v in saved {
        is_saved[v] = values[v].kind != Kind::Input;
    }
    let memory: u64 = (0..values.len()).filter(|&v| is_saved[v]).map(|v| values[v].bytes * problem.price).sum();
    // From what the backward reads, back through what each recomputed value needs.
    let mut recomputed = vec![false; values.len()];
    let mut wanted: Vec<usize> = (0..values.len()).filter(|&v| values[v].needed).collect();
    while let Some(v) = wanted.pop() {
        if values[v].kind == Kind::Input || is_saved[v] || recomputed[v] {
            continue;
        }
        if values[v].kind == Kind::Banned {
            return None;
        }
        recomputed[v] = true;
        wanted.extend(&values[v].inputs);
    }
    let recomputation: u64 = values.iter().zip(&recomputed).filter(|(_, r)| **r).map(|(v, _)| v.cost).sum();
    Some(memory + recomputation)
    // ANCHOR_END: solution
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
    // ANCHOR: solution
    // A minimum cut. Each value that is not an input is two vertices: `2v` ("v is computed in the
    // forward") and `2v + 1` ("the backward has v"). The source's side is the forward's, the
    // sink's side the backward's:
    // - source -> 2v, capacity `cost`: cut when v is recomputed in the backward;
    // - 2v -> 2v + 1, capacity `price * bytes`: cut when the forward computes v and the backward
    //   has it, which is saving it;
    // - 2i + 1 -> 2v, never cut: recomputing v needs each input i in the backward;
    // - source -> 2v, never cut, for a banned v; 2v + 1 -> sink, never cut, for a needed v.
    let values = &problem.values;
    let (source, sink) = (2 * values.len(), 2 * values.len() + 1);
    let never: u64 = values.iter().map(|v| v.cost + v.bytes * problem.price).sum::<u64>() + 1;
    let mut network = FlowNetwork::new(2 * values.len() + 2);
    for (v, value) in values.iter().enumerate().filter(|(_, value)| value.kind != Kind::Input) {
        let recompute = if value.kind == Kind::Banned { never } else { value.cost };
        network.add(source, 2 * v, recompute);
        network.add(2 * v, 2 * v + 1, value.bytes * problem.price);
        for &i in values[v].inputs.iter().filter(|&&i| values[i].kind != Kind::Input) {
            network.add(2 * i + 1, 2 * v, never);
        }
        if value.needed {
            network.add(2 * v + 1, sink, never);
        }
    }
    let forward = network.source_side(source, sink);
    (0..values.len()).filter(|&v| values[v].kind != Kind::Input && forward[2 * v] && !forward[2 * v + 1]).collect()
    // ANCHOR_END: solution
}
// ANCHOR_END: choose_saved

// ANCHOR: solution-only
/// A flow network with residual capacities, for a minimum cut by Edmonds-Karp.
struct FlowNetwork {
    /// Per vertex, its edges' positions in `edges`.
    out: Vec<Vec<usize>>,
    /// `(head, residual capacity)`; edge `e`'s reverse is `e ^ 1`.
    edges: Vec<(usize, u64)>,
}

impl FlowNetwork {
    fn new(vertices: usize) -> FlowNetwork {
        FlowNetwork { out: vec![Vec::new(); vertices], edges: Vec::new() }
    }

    fn add(&mut self, tail: usize, head: usize, capacity: u64) {
        for (from, to, residual) in [(tail, head, capacity), (head, tail, 0)] {
            self.out[from].push(self.edges.len());
            self.edges.push((to, residual));
        }
    }

    /// Pushes a maximum flow from `source` to `sink`, then says which vertices the source still
    /// reaches: the source's side of a minimum cut.
    fn source_side(mut self, source: usize, sink: usize) -> Vec<bool> {
        loop {
            // Breadth first, so each augmenting path is a shortest one.
            let mut arrived_by: Vec<Option<usize>> = vec![None; self.out.len()];
            let mut reached = vec![false; self.out.len()];
            reached[source] = true;
            let mut queue = std::collections::VecDeque::from([source]);
            while let Some(u) = queue.pop_front() {
                for &e in &self.out[u] {
                    let (w, residual) = self.edges[e];
                    if residual > 0 && !reached[w] {
                        reached[w] = true;
                        arrived_by[w] = Some(e);
                        queue.push_back(w);
                    }
                }
            }
            if !reached[sink] {
                return reached;
            }
            let path: Vec<usize> =
                std::iter::successors(arrived_by[sink], |&e| arrived_by[self.edges[e ^ 1].0]).collect();
            let pushed = path.iter().map(|&e| self.edges[e].1).min().expect("the sink is not the source");
            for e in path {
                self.edges[e].1 -= pushed;
                self.edges[e ^ 1].1 += pushed;
            }
        }
    }
}
// ANCHOR_END: solution-only
