//! Exercise `schedule` (deep): a program that has to stop on the host a few times, split into
//! graphs and host stages, first as Dynamo does it (in program order, a new graph after every
//! stop, each graph handing over what is live after it), then with as few graphs as the program's
//! dependences allow. Dynamo's capture is `torch/_dynamo/symbolic_convert.py`; what it hands
//! over at a break is what `livevars_analysis` (`torch/_dynamo/bytecode_analysis.py`) finds live.

// ANCHOR: types
/// What one step of a program is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A tensor argument of the program: there from the start, for every stage; it reads nothing
    /// and is never scheduled.
    Input,
    /// A pure tensor op: a graph can hold it, and only a graph runs it.
    Op,
    /// A pure host call (`.item()`, `map_host`): it runs on the host, needs the tensors it reads
    /// to have been computed (so the graph that computes them must have run), and returns a value
    /// that later steps may read (a later graph takes it as an input).
    Host,
    /// A side effect that reads values and returns none (`print`): no step reads it, and it is no
    /// output of the program.
    Print,
    /// A host call with a side effect (it writes a file, or draws from the host's random number
    /// generator): it returns a value, as [`Kind::Host`] does, and it runs in program order with
    /// the other side effects.
    Effect,
}

impl Kind {
    /// Whether steps of this kind are side effects, which keep their program order among
    /// themselves: [`Kind::Print`] and [`Kind::Effect`].
    pub fn is_side_effect(self) -> bool {
        matches!(self, Kind::Print | Kind::Effect)
    }
}

/// One step of a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Its name, for messages.
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// The steps whose values it reads, by position: always earlier steps, never a
    /// [`Kind::Print`], no position twice; none for an input.
    pub reads: Vec<usize>,
}

/// A program: its steps in program order, and the values it returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// The steps, in the order the program's source runs them.
    pub steps: Vec<Step>,
    /// The positions of the values it returns (never a print), each once.
    pub outputs: Vec<usize>,
}

/// One stage of a schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// A compiled graph: the ops it runs, each after the ops of the graph it reads, and the
    /// values it hands to later stages (its outputs).
    Graph {
        /// The positions of its ops, in the order it runs them.
        steps: Vec<usize>,
        /// The positions of the values it returns, each an op of `steps`.
        outputs: Vec<usize>,
    },
    /// Host code between graphs: the steps it runs, in this order.
    Host {
        /// The positions of its steps, in the order they run.
        steps: Vec<usize>,
    },
}

impl Stage {
    /// The steps the stage runs, in order.
    pub fn steps(&self) -> &[usize] {
        match self {
            Stage::Graph { steps, .. } | Stage::Host { steps } => steps,
        }
    }
}

/// How a program runs: its stages, in order. Dynamo's output is one: the graphs it compiled, with
/// the host code (and the resume functions) between them.
///
/// A schedule must follow these rules (the checks test each one, and name the rule and the step
/// when one fails):
/// - every step that is not an input is scheduled exactly once; inputs never are;
/// - ops run only in graphs, every other kind only in host stages; no stage is empty;
/// - a graph's step reads inputs, ops earlier in the same graph, outputs of earlier graphs, or
///   values of earlier host stages;
/// - a host step reads inputs, outputs of earlier graphs, or values of host steps that ran
///   before it (in an earlier stage, or earlier in its own);
/// - a graph's outputs are ops it runs, each listed once;
/// - every output of the program is there at the end: an input, a graph's output, or a host
///   value;
/// - the side effects (prints and effects) run in their program order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// The stages, in the order they run.
    pub stages: Vec<Stage>,
}

impl Schedule {
    /// How many graphs it compiles.
    pub fn graph_count(&self) -> usize {
        self.stages.iter().filter(|s| matches!(s, Stage::Graph { .. })).count()
    }
}
// ANCHOR_END: types

// ANCHOR: in_program_order
/// **Exercise `schedule`, part 1.** The schedule Dynamo makes: it captures the program in order
/// and stops at every step that is not an op. Each run of consecutive ops (inputs, wherever they
/// stand, are skipped and separate nothing) is one graph; each run of consecutive other steps is
/// one host stage, its steps in program order. A graph's outputs are exactly the ops it computes
/// that a step of a later stage reads or that the program returns, sorted by position: what is
/// live after it. A program with no steps but inputs has no stage.
///
/// Judged on programs drawn from the run's seed: your schedule must equal the grader's, exactly.
///
/// Book: `book/src/phase3/exercises.md`, section "schedule".
/// Check: `cargo grader check phase3`.
pub fn in_program_order(program: &Program) -> Schedule {
    // ANCHOR: solution
    let mut stages = Vec::new();
    let (mut graph, mut host) = (Vec::new(), Vec::new());
    for (i, step) in program.steps.iter().enumerate() {
        match step.kind {
            Kind::Input => {}
            Kind::Op => {
                if !host.is_empty() {
                    stages.push(Stage::Host { steps: std::mem::take(&mut host) });
                }
                graph.push(i);
            }
            Kind::Host | Kind::Print | Kind::Effect => {
                if !graph.is_empty() {
                    stages.push(Stage::Graph { steps: std::mem::take(&mut graph), outputs: Vec::new() });
                }
                host.push(i);
            }
        }
    }
    if !graph.is_empty() {
        stages.push(Stage::Graph { steps: graph, outputs: Vec::new() });
    }
    if !host.is_empty() {
        stages.push(Stage::Host { steps: host });
    }
    with_live_outputs(program, stages)
    // ANCHOR_END: solution
}
// ANCHOR_END: in_program_order

// ANCHOR: fewest_graphs
/// **Exercise `schedule`, part 2 (deep).** A schedule that follows the rules of [`Schedule`], hands over no
/// dead value (each output of a graph is read by a step of a later stage of this schedule, or
/// returned by the program), and compiles as few graphs as any schedule of the program can. Any
/// such schedule is accepted. A program with no op needs no graph (a program of inputs only, no
/// stage at all).
///
/// Judged on programs of 30 to 150 steps drawn from the run's seed, some at random and some built
/// to punish shortcuts (keeping program order, moving side effects as freely as pure steps, a host
/// step in the stage of the graph it reads): the grader checks every rule itself, and counts the
/// fewest graphs the program can have itself.
///
/// Book: `book/src/phase3/exercises.md`, section "schedule".
/// Check: `cargo grader check phase3`.
pub fn fewest_graphs(program: &Program) -> Schedule {
    // ANCHOR: solution
    // The earliest stage each step can run in, as a time: host stage `h` at time `2h`, graph `g`
    // (counting from 1) at `2g - 1`. A step runs no earlier than the steps it reads, and a side
    // effect no earlier than the side effect before it; an op then takes the first graph from
    // there, any other step the first host stage. Only a host value read by an op moves the op
    // to a later graph.
    let steps = &program.steps;
    let mut time = vec![0usize; steps.len()];
    let mut last_side_effect = 0;
    for (i, step) in steps.iter().enumerate() {
        let mut ready = step.reads.iter().map(|&r| time[r]).max().unwrap_or(0);
        let ordered = step.kind.is_side_effect();
        if ordered {
            ready = ready.max(last_side_effect);
        }
        time[i] = match step.kind {
            Kind::Input => 0,
            Kind::Op => ready | 1,
            Kind::Host | Kind::Print | Kind::Effect => ready.next_multiple_of(2),
        };
        if ordered {
            last_side_effect = time[i];
        }
    }
    let last = time.iter().copied().max().unwrap_or(0);
    let stages = (0..=last)
        .map(|t| {
            let at: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].kind != Kind::Input && time[i] == t).collect();
            if t % 2 == 1 { Stage::Graph { steps: at, outputs: Vec::new() } } else { Stage::Host { steps: at } }
        })
        .filter(|stage| !stage.steps().is_empty())
        .collect();
    with_live_outputs(program, stages)
    // ANCHOR_END: solution
}
// ANCHOR_END: fewest_graphs

// ANCHOR: solution-only
/// `stages` with each graph's outputs filled in: the ops it computes that a step of another stage
/// reads or that the program returns, sorted by position.
fn with_live_outputs(program: &Program, mut stages: Vec<Stage>) -> Schedule {
    let mut stage_of = vec![None; program.steps.len()];
    for (s, stage) in stages.iter().enumerate() {
        for &i in stage.steps() {
            stage_of[i] = Some(s);
        }
    }
    // Each value read, with the stage reading it (`None`: the program, at the end).
    let reads = program.steps.iter().enumerate().flat_map(|(i, step)| step.reads.iter().map(move |&r| (r, Some(i))));
    let returned = program.outputs.iter().map(|&o| (o, None));
    for (value, reader) in reads.chain(returned) {
        let Some(s) = stage_of[value] else { continue };
        if let Stage::Graph { outputs, .. } = &mut stages[s]
            && reader.is_none_or(|i| stage_of[i] != Some(s))
        {
            outputs.push(value);
        }
    }
    for stage in &mut stages {
        if let Stage::Graph { outputs, .. } = stage {
            outputs.sort_unstable();
            outputs.dedup();
        }
    }
    Schedule { stages }
}
// ANCHOR_END: solution-only
