//! Checks of `schedule`: on programs drawn from the run's seed (inputs, ops, pure host calls,
//! prints and effects), the subject's program-order schedule against the properties that pin it
//! down and against the reference's, and the subject's fewest-graph schedule against every rule of
//! a schedule and against the fewest graphs the program can have, which the judge counts itself
//! (the tests compare that count with trying every placement of every step on small programs).
//!
//! What the learner's process cannot read, it cannot return: the count of fewest graphs is
//! compiled into the judge's runner only (`feature = "solutions"`), never into the runner linked
//! with the learner's crate, which checks the rules and records each schedule it judged. The
//! judge, which runs no learner code, reads those schedules back, checks every rule again and
//! counts the graphs.

use std::cell::Cell;
use std::fmt;
use std::ops::RangeInclusive;

use grader_harness::{CheckResult, Context, Failure, fingerprint, for_all, judged_artifact, record, record_artifact};
use proptest::prelude::*;

use crate::subject::{Kind, Program, Schedule, Stage, Step, fewest_graphs, in_program_order};

/// How many programs `follows_program_order` draws.
const PROGRAM_ORDER_PROGRAMS: u32 = 60;

/// How many steps (inputs included) the programs `in_program_order` is judged on have: small
/// ones too, down to a program of one input.
const PROGRAM_ORDER_STEPS: RangeInclusive<usize> = 1..=40;

/// How many random programs `fewest_graphs_of_random_programs` draws.
const RANDOM_PROGRAMS: u32 = 40;

/// How many programs `fewest_graphs_of_telling_programs` builds.
const TELLING_PROGRAMS: u32 = 30;

/// How many steps (inputs included) the programs `fewest_graphs` is judged on have.
const FEWEST_STEPS: RangeInclusive<usize> = 30..=150;

/// The most steps one block of a telling program has.
const LARGEST_BLOCK: usize = 12;

/// A program as the checks draw it, shown one line per step when a check fails on it.
#[derive(Clone)]
pub struct Drawn(pub Program);

impl fmt::Debug for Drawn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "a program of {} steps:", self.0.steps.len())?;
        for (i, step) in self.0.steps.iter().enumerate() {
            let reads: Vec<&str> = step.reads.iter().map(|&r| self.0.steps[r].name.as_str()).collect();
            writeln!(f, "  {i:>3}  {:<8} {:?}({})", step.name, step.kind, reads.join(", "))?;
        }
        let outputs: Vec<&str> = self.0.outputs.iter().map(|&o| self.0.steps[o].name.as_str()).collect();
        write!(f, "  returns {}", outputs.join(", "))
    }
}

/// A step's name, made from its kind and position (`op7`, `item9`), so messages are readable.
fn named(kind: Kind, position: usize) -> String {
    let prefix = match kind {
        Kind::Input => "x",
        Kind::Op => "op",
        Kind::Host => "item",
        Kind::Print => "print",
        Kind::Effect => "rng",
    };
    format!("{prefix}{position}")
}

/// A program being built, step by step.
#[derive(Default)]
struct Builder {
    steps: Vec<Step>,
    outputs: Vec<usize>,
}

impl Builder {
    /// Adds a step that reads `reads`, and returns its position.
    fn push(&mut self, kind: Kind, reads: &[usize]) -> usize {
        let position = self.steps.len();
        self.steps.push(Step { name: named(kind, position), kind, reads: reads.to_vec() });
        position
    }

    fn program(mut self) -> Drawn {
        self.outputs.sort_unstable();
        self.outputs.dedup();
        Drawn(Program { steps: self.steps, outputs: self.outputs })
    }
}

/// Random programs of `sizes` steps: one to four inputs, then ops (most steps), host calls,
/// prints, effects and now and then another input, each reading up to three earlier steps (no
/// print), mostly among the last few; the program returns a few of its values and its last one.
fn random_programs(sizes: RangeInclusive<usize>) -> impl Strategy<Value = Drawn> {
    (sizes, 1usize..=4).prop_flat_map(|(size, inputs)| {
        let step = (any::<u8>(), prop::collection::vec((prop::bool::weighted(0.7), any::<u16>()), 0..=3), prop::bool::weighted(0.15));
        prop::collection::vec(step, size.saturating_sub(inputs)).prop_map(move |drawn| {
            let mut program = Builder::default();
            for _ in 0..inputs.min(size) {
                program.push(Kind::Input, &[]);
            }
            for (kind, reads, returned) in drawn {
                let kind = match kind {
                    0..150 => Kind::Op,
                    150..185 => Kind::Host,
                    185..210 => Kind::Print,
                    210..235 => Kind::Effect,
                    _ => Kind::Input,
                };
                let readable: Vec<usize> =
                    (0..program.steps.len()).filter(|&r| program.steps[r].kind != Kind::Print).collect();
                let mut reads: Vec<usize> = if kind == Kind::Input || readable.is_empty() {
                    Vec::new()
                } else {
                    reads
                        .into_iter()
                        .map(|(near, draw)| {
                            let draw = usize::from(draw);
                            let back = if near { draw % readable.len().min(6) } else { draw % readable.len() };
                            readable[readable.len() - 1 - back]
                        })
                        .collect()
                };
                reads.sort_unstable();
                reads.dedup();
                let position = program.push(kind, &reads);
                if returned && kind != Kind::Print {
                    program.outputs.push(position);
                }
            }
            if let Some(last) = (0..program.steps.len()).rev().find(|&i| program.steps[i].kind != Kind::Print) {
                program.outputs.push(last);
            }
            program.program()
        })
    })
}

/// Programs of [`FEWEST_STEPS`] steps built from blocks that punish shortcuts, chosen and sized
/// by the seed, after two inputs, and filled up with a chain of ops to the drawn size:
/// - a print in the middle of a chain of ops, of a value nothing else reads: program order breaks
///   there, though the print can wait for the end, and the value must be handed over;
/// - op chains interleaved with host calls that read them, and ops reading those host values only
///   after all of them: program order makes a graph per chain, the dependences two;
/// - a print of a value that needs a host call, then an effect (a random draw) that ops read: the
///   effect must wait for the print, so its ops need a graph more than a schedule that moves side
///   effects freely gives them;
/// - an effect that reads a graph's value, then one that reads only an input, then an op reading
///   the second: the effects' order again, now between two effects;
/// - a host call that reads only an input, between ops: it can run before any graph.
///
/// Half the programs, drawn by a coin, leave the last kind out: no host step of theirs can run
/// before the first graph, so the schedule's first host stage is empty and must be left out.
/// Drawn by the dice alone, that happened to one program in seven, and in about one run in a
/// hundred to none of its 30.
fn telling_programs() -> impl Strategy<Value = Drawn> {
    (FEWEST_STEPS, any::<bool>(), prop::collection::vec(any::<[u8; 6]>(), 20)).prop_map(|(size, early_host, dice)| {
        let mut program = Builder::default();
        let inputs = [program.push(Kind::Input, &[]), program.push(Kind::Input, &[])];
        let kinds = if early_host { 5 } else { 4 };
        for dice in dice {
            if program.steps.len() + LARGEST_BLOCK > size {
                break;
            }
            let roll = |k: usize, low: usize, high: usize| low + usize::from(dice[k]) % (high - low + 1);
            let x = inputs[roll(5, 0, 1)];
            match dice[0] % kinds {
                0 => {
                    let mut link = x;
                    let (before, after) = (roll(1, 1, 4), roll(2, 1, 4));
                    for _ in 0..before {
                        link = program.push(Kind::Op, &[link]);
                    }
                    let shown = program.push(Kind::Op, &[link]);
                    program.push(Kind::Print, &[shown]);
                    for _ in 0..after {
                        link = program.push(Kind::Op, &[link]);
                    }
                    program.outputs.push(link);
                }
                1 => {
                    let chains = roll(1, 2, 3);
                    let mut values = Vec::new();
                    for _ in 0..chains {
                        let head = program.push(Kind::Op, &[x]);
                        let tail = program.push(Kind::Op, &[head]);
                        values.push(program.push(Kind::Host, &[tail]));
                    }
                    let mut link = x;
                    for value in values {
                        link = program.push(Kind::Op, &[link, value]);
                    }
                    program.outputs.push(link);
                }
                2 => {
                    let first = program.push(Kind::Op, &[x]);
                    let scalar = program.push(Kind::Host, &[first]);
                    let second = program.push(Kind::Op, &[first, scalar]);
                    program.push(Kind::Print, &[second]);
                    let draw = program.push(Kind::Effect, &[]);
                    let mut link = program.push(Kind::Op, &[x, draw]);
                    for _ in 0..roll(1, 0, 3) {
                        link = program.push(Kind::Op, &[link]);
                    }
                    program.outputs.extend([second, link]);
                }
                3 => {
                    let value = program.push(Kind::Op, &[x]);
                    program.push(Kind::Effect, &[value]);
                    let draw = program.push(Kind::Effect, &[inputs[0]]);
                    let mut link = program.push(Kind::Op, &[x, draw]);
                    for _ in 0..roll(1, 0, 3) {
                        link = program.push(Kind::Op, &[link]);
                    }
                    program.outputs.push(link);
                }
                _ => {
                    let mut link = program.push(Kind::Op, &[x]);
                    for _ in 0..roll(1, 0, 3) {
                        link = program.push(Kind::Op, &[link]);
                    }
                    let scalar = program.push(Kind::Host, &[x]);
                    link = program.push(Kind::Op, &[link, scalar]);
                    for _ in 0..roll(2, 0, 3) {
                        link = program.push(Kind::Op, &[link]);
                    }
                    program.outputs.push(link);
                }
            }
        }
        let mut link = inputs[1];
        while program.steps.len() < size {
            link = program.push(Kind::Op, &[link]);
        }
        program.outputs.push(link);
        program.program()
    })
}

/// The fewest graphs any schedule of `program` can have (in the judge's runner only). `before[v]`, for a step that is not an
/// op, is how many graphs must run before it; for an op, which graph (from 1) is the first it can
/// run in. An op needs the graph of each op it reads, and one more than the graphs before each
/// host value it reads; any other step needs the graphs of what it reads, and a side effect the
/// graphs before the side effect before it. The deepest op's graph is the answer: each of its
/// graphs holds an op of the chain of steps that forced it there, so every schedule has as many.
#[cfg(feature = "solutions")]
fn least_graphs(program: &Program) -> usize {
    let steps = &program.steps;
    let mut before = vec![0usize; steps.len()];
    let mut previous_side_effect = 0;
    for (v, step) in steps.iter().enumerate() {
        let is_op = step.kind == Kind::Op;
        let needed = step.reads.iter().map(|&r| match steps[r].kind {
            Kind::Input => 0,
            Kind::Op => before[r],
            Kind::Host | Kind::Print | Kind::Effect => before[r] + usize::from(is_op),
        });
        before[v] = needed.max().unwrap_or(0).max(usize::from(is_op));
        if matches!(step.kind, Kind::Print | Kind::Effect) {
            before[v] = before[v].max(previous_side_effect);
            previous_side_effect = before[v];
        }
    }
    (0..steps.len()).filter(|&v| steps[v].kind == Kind::Op).map(|v| before[v]).max().unwrap_or(0)
}

/// A step as messages name it: `step 7 (item7, a host call)`.
fn step(program: &Program, i: usize) -> String {
    let what = match program.steps[i].kind {
        Kind::Input => "an input",
        Kind::Op => "an op",
        Kind::Host => "a host call",
        Kind::Print => "a print",
        Kind::Effect => "an effect",
    };
    format!("step {i} ({}, {what})", program.steps[i].name)
}

/// A stage as messages name it: `stage 2 (a graph)`.
fn stage_name(stages: &[Stage], s: usize) -> String {
    let what = if matches!(stages[s], Stage::Graph { .. }) { "a graph" } else { "a host stage" };
    format!("stage {s} ({what})")
}

/// Whether `schedule` follows every rule of a schedule of `program`; `Err` names the rule broken
/// and the step that breaks it.
fn follows_the_rules(program: &Program, schedule: &Schedule) -> Result<(), String> {
    let (steps, stages) = (&program.steps, &schedule.stages);
    let n = steps.len();
    let mut placed: Vec<Option<usize>> = vec![None; n];
    for (s, stage) in stages.iter().enumerate() {
        if stage.steps().is_empty() {
            return Err(format!("{} runs no step: leave empty stages out", stage_name(stages, s)));
        }
        let in_graph = matches!(stage, Stage::Graph { .. });
        for &i in stage.steps() {
            if i >= n {
                return Err(format!("{} lists step {i}, but the program has {n} steps", stage_name(stages, s)));
            }
            let kind = steps[i].kind;
            if kind == Kind::Input {
                return Err(format!("{} lists {}: inputs are never scheduled", stage_name(stages, s), step(program, i)));
            }
            if let Some(first) = placed[i] {
                return Err(format!("{} runs in stage {first} and again in stage {s}: once only", step(program, i)));
            }
            if in_graph != (kind == Kind::Op) {
                let rule = if in_graph { "only ops run in graphs" } else { "ops run only in graphs" };
                return Err(format!("{} is in {}: {rule}", step(program, i), stage_name(stages, s)));
            }
            placed[i] = Some(s);
        }
    }
    if let Some(i) = (0..n).find(|&i| steps[i].kind != Kind::Input && placed[i].is_none()) {
        return Err(format!("{} is never scheduled", step(program, i)));
    }
    // What a stage may read: inputs, and the values handed over so far.
    let mut there: Vec<bool> = steps.iter().map(|s| s.kind == Kind::Input).collect();
    let why_not = |r: usize, reader_stage: usize| match placed[r] {
        Some(t) if t > reader_stage => format!("it runs later, in stage {t}"),
        Some(t) if t == reader_stage => "it runs later in the same stage".to_string(),
        Some(t) => format!("{} does not list it among its outputs", stage_name(stages, t)),
        None => "it is a print, which has no value".to_string(),
    };
    let unreadable = |i: usize, r: usize, s: usize| {
        let (reader, read, stage) = (step(program, i), step(program, r), stage_name(stages, s));
        format!("{reader} in {stage} reads {read}, which it cannot have: {}", why_not(r, s))
    };
    for (s, stage) in stages.iter().enumerate() {
        match stage {
            Stage::Graph { steps: ops, outputs } => {
                let mut inside = vec![false; n];
                for &i in ops {
                    if let Some(&r) = steps[i].reads.iter().find(|&&r| !there[r] && !inside[r]) {
                        return Err(unreadable(i, r, s));
                    }
                    inside[i] = true;
                }
                let mut listed = vec![false; n];
                for &o in outputs {
                    if o >= n || !inside[o] {
                        let what = if o < n { step(program, o) } else { format!("step {o}") };
                        return Err(format!(
                            "{} lists {what} among its outputs, but does not compute it",
                            stage_name(stages, s)
                        ));
                    }
                    if std::mem::replace(&mut listed[o], true) {
                        return Err(format!("{} lists {} twice among its outputs", stage_name(stages, s), step(program, o)));
                    }
                    there[o] = true;
                }
            }
            Stage::Host { steps: host } => {
                for &i in host {
                    if let Some(&r) = steps[i].reads.iter().find(|&&r| !there[r]) {
                        return Err(unreadable(i, r, s));
                    }
                    there[i] = steps[i].kind != Kind::Print;
                }
            }
        }
    }
    if let Some(&o) = program.outputs.iter().find(|&&o| !there[o]) {
        return Err(format!(
            "the program returns {}, which is not there at the end: {}",
            step(program, o),
            why_not(o, stages.len())
        ));
    }
    let run_order = stages.iter().flat_map(Stage::steps).copied().filter(|&i| steps[i].kind.is_side_effect());
    let program_order = (0..n).filter(|&i| steps[i].kind.is_side_effect());
    if let Some((ran, due)) = run_order.zip(program_order).find(|(ran, due)| ran != due) {
        return Err(format!(
            "the side effects run out of their program order: {} runs where {} is due",
            step(program, ran),
            step(program, due)
        ));
    }
    Ok(())
}

/// The first output of a graph of `schedule` that no later stage reads and the program does not
/// return, named.
fn dead_output(program: &Program, schedule: &Schedule) -> Option<String> {
    let stage_of = |i: usize| schedule.stages.iter().position(|s| s.steps().contains(&i));
    schedule.stages.iter().enumerate().find_map(|(s, stage)| {
        let Stage::Graph { outputs, .. } = stage else { return None };
        let dead = outputs.iter().copied().find(|&o| {
            !program.outputs.contains(&o)
                && !program.steps.iter().enumerate().any(|(r, reader)| reader.reads.contains(&o) && stage_of(r) > Some(s))
        })?;
        Some(format!(
            "{} hands over {}, which no later stage reads and the program does not return: a dead value",
            stage_name(&schedule.stages, s),
            step(program, dead)
        ))
    })
}

/// A schedule as the judge reads it back: one line per stage, `graph 3 4 -> 4` or `host 5 6`.
fn render(schedule: &Schedule) -> String {
    let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(" ");
    let lines: Vec<String> = schedule
        .stages
        .iter()
        .map(|stage| match stage {
            Stage::Graph { steps, outputs } => format!("graph {} -> {}", list(steps), list(outputs)),
            Stage::Host { steps } => format!("host {}", list(steps)),
        })
        .collect();
    lines.join("\n")
}

/// The schedule [`render`] wrote, or `None` for a text it could not have written.
fn parse(text: &str) -> Option<Schedule> {
    let numbers = |text: &str| text.split_whitespace().map(|n| n.parse().ok()).collect::<Option<Vec<usize>>>();
    let stages = text
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            if let Some(rest) = line.strip_prefix("graph") {
                let (steps, outputs) = rest.split_once("->")?;
                Some(Stage::Graph { steps: numbers(steps)?, outputs: numbers(outputs)? })
            } else {
                Some(Stage::Host { steps: numbers(line.strip_prefix("host")?)? })
            }
        })
        .collect::<Option<Vec<Stage>>>()?;
    Some(Schedule { stages })
}

/// A schedule as messages show it: a stage a line, with the steps' names.
fn shown(program: &Program, schedule: &Schedule) -> String {
    let name = |i: &usize| program.steps.get(*i).map_or(format!("#{i}"), |s| s.name.clone());
    let list = |v: &[usize]| v.iter().map(name).collect::<Vec<_>>().join(", ");
    let lines: Vec<String> = schedule
        .stages
        .iter()
        .enumerate()
        .map(|(s, stage)| match stage {
            Stage::Graph { steps, outputs } => format!("  {s}: graph [{}] -> outputs [{}]", list(steps), list(outputs)),
            Stage::Host { steps } => format!("  {s}: host  [{}]", list(steps)),
        })
        .collect();
    if lines.is_empty() { "  (no stage)".into() } else { lines.join("\n") }
}

/// Whether `schedule` is the one Dynamo makes of `program`: it follows the rules and hands over
/// no dead value, its stages run the steps in program order, no two stages in a row are of one
/// kind (each is a whole run of ops, or of other steps), and each graph lists its outputs by
/// position. Those properties leave one schedule: the runs fix the stages, the rules and the
/// absence of dead values fix the outputs, and the order fixes how each is listed.
fn is_program_order(program: &Program, schedule: &Schedule) -> Result<(), String> {
    follows_the_rules(program, schedule)?;
    if let Some(dead) = dead_output(program, schedule) {
        return Err(dead);
    }
    let stages = &schedule.stages;
    let ran = stages.iter().flat_map(Stage::steps).copied();
    let due = (0..program.steps.len()).filter(|&i| program.steps[i].kind != Kind::Input);
    if let Some((ran, due)) = ran.zip(due).find(|(ran, due)| ran != due) {
        return Err(format!(
            "{} runs where {} is due: program order runs the steps as they come",
            step(program, ran),
            step(program, due)
        ));
    }
    for s in 1..stages.len() {
        if matches!(stages[s - 1], Stage::Graph { .. }) == matches!(stages[s], Stage::Graph { .. }) {
            return Err(format!(
                "{} follows {} of the same kind: Dynamo ends a stage only where a step of the other kind comes",
                stage_name(stages, s),
                stage_name(stages, s - 1)
            ));
        }
    }
    for (s, stage) in stages.iter().enumerate() {
        if let Stage::Graph { outputs, .. } = stage
            && !outputs.is_sorted()
        {
            return Err(format!("{} lists its outputs as {outputs:?}: sort them by position", stage_name(stages, s)));
        }
    }
    Ok(())
}

/// `in_program_order` makes the schedule Dynamo makes, exactly, on random programs: the properties
/// of [`is_program_order`] here, and the reference's schedule, compared by the judge.
pub fn follows_program_order(ctx: &Context) -> CheckResult {
    let cases = PROGRAM_ORDER_PROGRAMS;
    let drawn = Cell::new(0);
    for_all(ctx, cases, random_programs(PROGRAM_ORDER_STEPS), |Drawn(program)| {
        let k = drawn.replace(drawn.get() + 1);
        let got = in_program_order(&program);
        record(format!("program {k}: in_program_order"), render(&got));
        is_program_order(&program, &got).map_err(|problem| {
            Failure::fail(format!(
                "in_program_order's schedule is not Dynamo's: {problem}\nyour schedule:\n{}",
                shown(&program, &got)
            ))
        })
    })?;
    Ok(format!("in_program_order made Dynamo's schedule of {cases} programs"))
}

/// Judges the schedule of the `k`-th program: the subject's own in its run, the one that run
/// recorded in the judge's, which also counts the graphs.
fn judge_fewest(k: usize, program: &Program) -> Result<(), Failure> {
    let label = format!("program {k} ({}): the schedule of fewest_graphs", fingerprint(&Drawn(program.clone())));
    let schedule = match judged_artifact(&label) {
        Some(text) => parse(&text).ok_or_else(|| Failure::fail(format!("{label} was recorded unreadably")))?,
        None => fewest_graphs(program),
    };
    record_artifact(label, render(&schedule));
    let shown = || shown(program, &schedule);
    if let Err(rule) = follows_the_rules(program, &schedule) {
        return Err(Failure::fail(format!("fewest_graphs's schedule breaks a rule: {rule}\nyour schedule:\n{}", shown())));
    }
    if let Some(dead) = dead_output(program, &schedule) {
        return Err(Failure::fail(format!("fewest_graphs's schedule: {dead}\nyour schedule:\n{}", shown())));
    }
    has_fewest_graphs(program, &schedule).map_err(|problem| Failure::fail(format!("{problem}\nyour schedule:\n{}", shown())))
}

/// Whether `schedule`, which follows the rules, has as few graphs as `program` can have: counted
/// in the judge's runner, where no learner code runs.
#[cfg(feature = "solutions")]
fn has_fewest_graphs(program: &Program, schedule: &Schedule) -> Result<(), String> {
    let (got, least) = (schedule.graph_count(), least_graphs(program));
    if got == least {
        return Ok(());
    }
    Err(format!("fewest_graphs's schedule follows the rules with {got} graphs, but this program needs only {least}"))
}

/// In the runner linked with the learner's crate, no count: the judge counts.
#[cfg(not(feature = "solutions"))]
fn has_fewest_graphs(_program: &Program, _schedule: &Schedule) -> Result<(), String> {
    Ok(())
}

/// Runs [`judge_fewest`] on each program `programs` draws, numbered in the order they are drawn.
fn judge_all(ctx: &Context, cases: u32, programs: impl Strategy<Value = Drawn>) -> Result<(), Failure> {
    let drawn = Cell::new(0);
    for_all(ctx, cases, programs, |Drawn(program)| {
        let k = drawn.replace(drawn.get() + 1);
        judge_fewest(k, &program)
    })
}

/// `fewest_graphs` makes a schedule that follows the rules, hands over no dead value and has the
/// fewest graphs, on random programs.
pub fn fewest_graphs_of_random_programs(ctx: &Context) -> CheckResult {
    let cases = RANDOM_PROGRAMS;
    judge_all(ctx, cases, random_programs(FEWEST_STEPS))?;
    Ok(format!("fewest_graphs made a schedule of fewest graphs for {cases} random programs"))
}

/// `fewest_graphs` makes a schedule of fewest graphs on programs built so that shortcuts lose.
pub fn fewest_graphs_of_telling_programs(ctx: &Context) -> CheckResult {
    let cases = TELLING_PROGRAMS;
    judge_all(ctx, cases, telling_programs())?;
    Ok(format!("fewest_graphs made a schedule of fewest graphs for {cases} programs built to punish shortcuts"))
}

// The tests compare the judge's own answers (compiled with the solutions) with brute force.
#[cfg(all(test, feature = "solutions"))]
mod tests {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;

/// The check's own program-order schedule: each maximal run of non-input steps of one class (ops,
/// or everything else) is a stage; a graph hands over the ops that a later stage reads or the
/// program returns.
fn program_order(program: &Program) -> Schedule {
    let steps = &program.steps;
    let scheduled: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].kind != Kind::Input).collect();
    let mut segment = vec![usize::MAX; steps.len()];
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for (k, &i) in scheduled.iter().enumerate() {
        let is_op = steps[i].kind == Kind::Op;
        if k == 0 || (steps[scheduled[k - 1]].kind == Kind::Op) != is_op {
            runs.push(Vec::new());
        }
        segment[i] = runs.len() - 1;
        runs.last_mut().expect("just pushed").push(i);
    }
    let read_later = |v: usize| {
        program.outputs.contains(&v)
            || steps.iter().enumerate().any(|(r, step)| step.reads.contains(&v) && segment[r] != segment[v])
    };
    let stages = runs
        .into_iter()
        .map(|run| {
            if steps[run[0]].kind == Kind::Op {
                let outputs = run.iter().copied().filter(|&v| read_later(v)).collect();
                Stage::Graph { steps: run, outputs }
            } else {
                Stage::Host { steps: run }
            }
        })
        .collect();
    Schedule { stages }
}


    /// The schedule that runs each scheduled step in the stage `place` gives it, of stages host 0,
    /// graph 1, host 1, ..., graph `graphs`, host `graphs` (an op's place is the graph's number,
    /// another step's the host stage's), each stage's steps in program order and each graph
    /// handing over what a later stage reads or the program returns. Empty host stages are left
    /// out; empty graphs are kept, so that the rules refuse them.
    fn placed(program: &Program, graphs: usize, place: &[usize]) -> Schedule {
        let steps = &program.steps;
        let scheduled: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].kind != Kind::Input).collect();
        // Stage `2h` is host stage h, stage `2g - 1` graph g.
        let time = |k: usize| if steps[scheduled[k]].kind == Kind::Op { 2 * place[k] - 1 } else { 2 * place[k] };
        let at = |t: usize| -> Vec<usize> { (0..scheduled.len()).filter(|&k| time(k) == t).map(|k| scheduled[k]).collect() };
        let read_later = |v: usize, t: usize| {
            program.outputs.contains(&v)
                || scheduled.iter().enumerate().any(|(k, &r)| steps[r].reads.contains(&v) && time(k) > t)
        };
        let stages = (0..=2 * graphs)
            .filter_map(|t| {
                let here = at(t);
                if t % 2 == 1 {
                    let outputs = here.iter().copied().filter(|&v| read_later(v, t)).collect();
                    Some(Stage::Graph { steps: here, outputs })
                } else {
                    (!here.is_empty()).then_some(Stage::Host { steps: here })
                }
            })
            .collect();
        Schedule { stages }
    }

    /// The fewest graphs of any schedule of `program`, by trying, for 0, 1, 2, ... graphs, every
    /// placement of every step. Each stage's steps in program order lose nothing: a step reads
    /// only earlier steps, and side effects must keep that order anyway.
    fn least_by_trying_every_placement(program: &Program) -> usize {
        let steps = &program.steps;
        let scheduled: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].kind != Kind::Input).collect();
        for graphs in 0.. {
            // An op's place is 1..=graphs, another step's 0..=graphs.
            let choices: Vec<usize> =
                scheduled.iter().map(|&i| if steps[i].kind == Kind::Op { graphs } else { graphs + 1 }).collect();
            if choices.contains(&0) {
                continue;
            }
            let mut digits = vec![0usize; scheduled.len()];
            loop {
                let place: Vec<usize> =
                    scheduled.iter().zip(&digits).map(|(&i, &d)| d + usize::from(steps[i].kind == Kind::Op)).collect();
                if follows_the_rules(program, &placed(program, graphs, &place)).is_ok() {
                    return graphs;
                }
                let Some(k) = (0..digits.len()).find(|&k| digits[k] + 1 < choices[k]) else { break };
                digits[k] += 1;
                digits[..k].fill(0);
            }
        }
        unreachable!("every program has a schedule: program order")
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// The count of fewest graphs is the least number of graphs of any schedule.
        #[test]
        fn the_count_is_the_least_of_every_placement(Drawn(program) in random_programs(6..=9)) {
            prop_assert_eq!(least_graphs(&program), least_by_trying_every_placement(&program));
        }

        /// The tests' program-order schedule follows the rules and has the properties the check
        /// asks for, and a schedule reads back as it was rendered.
        #[test]
        fn program_order_follows_the_rules(Drawn(program) in random_programs(1..=60)) {
            let schedule = program_order(&program);
            prop_assert_eq!(follows_the_rules(&program, &schedule), Ok(()));
            prop_assert_eq!(dead_output(&program, &schedule), None);
            prop_assert_eq!(is_program_order(&program, &schedule), Ok(()));
            prop_assert_eq!(parse(&render(&schedule)), Some(schedule));
        }
    }

    /// Program order with a stage split in two, or a graph's outputs out of order, lacks a property
    /// `is_program_order` asks for.
    #[test]
    fn is_program_order_refuses_near_misses() {
        let mut runner = TestRunner::deterministic();
        let (mut split, mut unsorted) = (0, 0);
        for _ in 0..200 {
            let Drawn(program) = random_programs(5..=40).new_tree(&mut runner).expect("a program").current();
            let schedule = program_order(&program);
            if let Some(s) = schedule.stages.iter().position(|stage| stage.steps().len() >= 2) {
                let mut stages = schedule.stages.clone();
                let (first, rest) = match &stages[s] {
                    Stage::Graph { steps, .. } => (
                        Stage::Graph { steps: steps[..1].to_vec(), outputs: steps[..1].to_vec() },
                        Stage::Graph { steps: steps[1..].to_vec(), outputs: steps[1..].to_vec() },
                    ),
                    Stage::Host { steps } => {
                        (Stage::Host { steps: steps[..1].to_vec() }, Stage::Host { steps: steps[1..].to_vec() })
                    }
                };
                stages.splice(s..=s, [first, rest]);
                assert!(is_program_order(&program, &Schedule { stages }).is_err());
                split += 1;
            }
            let mut stages = schedule.stages.clone();
            if let Some(Stage::Graph { outputs, .. }) = stages.iter_mut().find(|s| matches!(s, Stage::Graph { outputs, .. } if outputs.len() >= 2)) {
                outputs.reverse();
                assert!(is_program_order(&program, &Schedule { stages }).unwrap_err().contains("sort them"));
                unsorted += 1;
            }
        }
        assert!(split > 100 && unsorted > 50, "{split} split, {unsorted} unsorted");
    }

    /// The book's picture (`book/src/images/schedule-two-ways.svg`) is true: its program takes the
    /// three graphs drawn in program order, and the two-graph schedule drawn follows the rules,
    /// hands over no dead value and has the fewest graphs.
    #[test]
    fn the_book_s_picture_is_right() {
        // x0, w1; a2 = x @ w; s3 = a.sum().item(); b4 = x.relu(); print5(b); c6 = a * s; d7 = b + 1.
        let mut built = Builder::default();
        let (x, w) = (built.push(Kind::Input, &[]), built.push(Kind::Input, &[]));
        let a = built.push(Kind::Op, &[x, w]);
        let s = built.push(Kind::Host, &[a]);
        let b = built.push(Kind::Op, &[x]);
        let print = built.push(Kind::Print, &[b]);
        let c = built.push(Kind::Op, &[a, s]);
        let d = built.push(Kind::Op, &[b]);
        built.outputs.extend([c, d]);
        let Drawn(program) = built.program();
        let graph = |steps: &[usize], outputs: &[usize]| Stage::Graph { steps: steps.to_vec(), outputs: outputs.to_vec() };
        let host = |steps: &[usize]| Stage::Host { steps: steps.to_vec() };
        let in_order = Schedule {
            stages: vec![graph(&[a], &[a]), host(&[s]), graph(&[b], &[b]), host(&[print]), graph(&[c, d], &[c, d])],
        };
        assert_eq!(program_order(&program), in_order);
        let fewest = Schedule { stages: vec![graph(&[a, b, d], &[a, b, d]), host(&[s, print]), graph(&[c], &[c])] };
        assert_eq!(follows_the_rules(&program, &fewest), Ok(()));
        assert_eq!(dead_output(&program, &fewest), None);
        assert_eq!((in_order.graph_count(), fewest.graph_count(), least_graphs(&program)), (3, 2, 2));
    }

    /// Programs of inputs only, or of nothing, have no stage and need no graph; prints alone need
    /// one host stage.
    #[test]
    fn empty_programs_need_no_graph() {
        let mut only_inputs = Builder::default();
        only_inputs.push(Kind::Input, &[]);
        only_inputs.outputs.push(0);
        let Drawn(only_inputs) = only_inputs.program();
        assert_eq!(program_order(&only_inputs), Schedule::default());
        assert_eq!(follows_the_rules(&only_inputs, &Schedule::default()), Ok(()));
        assert_eq!(least_graphs(&only_inputs), 0);
        let Drawn(empty) = Builder::default().program();
        assert_eq!(least_graphs(&empty), 0);
        let mut prints = Builder::default();
        let x = prints.push(Kind::Input, &[]);
        prints.push(Kind::Print, &[x]);
        prints.push(Kind::Print, &[]);
        let Drawn(prints) = prints.program();
        assert_eq!(program_order(&prints).stages, vec![Stage::Host { steps: vec![1, 2] }]);
        assert_eq!(least_graphs(&prints), 0);
    }

    /// Each rule, broken once, is named.
    #[test]
    fn each_broken_rule_is_named() {
        // x0; op1 = f(x0); item2 = op1.item(); op3 = g(op1, item2); print4(op3); op5 = h(op3);
        // rng6 = a draw; returns op3.
        let mut built = Builder::default();
        let x = built.push(Kind::Input, &[]);
        let a = built.push(Kind::Op, &[x]);
        let item = built.push(Kind::Host, &[a]);
        let b = built.push(Kind::Op, &[a, item]);
        built.push(Kind::Print, &[b]);
        built.push(Kind::Op, &[b]);
        built.push(Kind::Effect, &[]);
        built.outputs.push(b);
        let Drawn(program) = built.program();
        let graph = |steps: &[usize], outputs: &[usize]| Stage::Graph { steps: steps.to_vec(), outputs: outputs.to_vec() };
        let host = |steps: &[usize]| Stage::Host { steps: steps.to_vec() };
        let good = Schedule { stages: vec![graph(&[1], &[1]), host(&[2]), graph(&[3, 5], &[3]), host(&[4, 6])] };
        assert_eq!(follows_the_rules(&program, &good), Ok(()));
        assert_eq!(dead_output(&program, &good), None);
        assert_eq!(least_graphs(&program), 2);
        let cases = [
            (vec![graph(&[1], &[1]), host(&[2]), graph(&[3, 5], &[3]), host(&[4])], "step 6 (rng6, an effect) is never"),
            (vec![graph(&[1, 1], &[1]), host(&[2]), graph(&[3, 5], &[3]), host(&[4, 6])], "again in stage 0"),
            (vec![graph(&[0, 1], &[1]), host(&[2]), graph(&[3, 5], &[3]), host(&[4, 6])], "inputs are never scheduled"),
            (vec![graph(&[1, 2], &[1]), graph(&[3, 5], &[3]), host(&[4, 6])], "only ops run in graphs"),
            (vec![graph(&[1], &[1]), host(&[2, 5]), graph(&[3], &[3]), host(&[4, 6])], "ops run only in graphs"),
            (vec![graph(&[1], &[]), host(&[2]), graph(&[3, 5], &[3]), host(&[4, 6])], "does not list it among"),
            (vec![graph(&[1, 3, 5], &[1, 3]), host(&[2, 4, 6])], "it runs later, in stage 1"),
            (vec![graph(&[1], &[1]), host(&[4, 2]), graph(&[3, 5], &[3]), host(&[6])], "it runs later, in stage 2"),
            (vec![graph(&[1], &[1]), host(&[2]), graph(&[5, 3], &[3]), host(&[4, 6])], "runs later in the same stage"),
            (vec![graph(&[1], &[1]), host(&[2]), graph(&[3, 5], &[1]), host(&[4, 6])], "but does not compute it"),
            (vec![graph(&[1], &[1, 1]), host(&[2]), graph(&[3, 5], &[3]), host(&[4, 6])], "twice among its outputs"),
            (vec![host(&[]), graph(&[1], &[1]), host(&[2]), graph(&[3, 5], &[3]), host(&[4, 6])], "leave empty"),
            (vec![host(&[6]), graph(&[1], &[1]), host(&[2]), graph(&[3, 5], &[3]), host(&[4])], "program order"),
        ];
        for (stages, needle) in cases {
            let message = follows_the_rules(&program, &Schedule { stages }).unwrap_err();
            assert!(message.contains(needle), "{message:?} should contain {needle:?}");
        }
        let dead = Schedule { stages: vec![graph(&[1], &[1]), host(&[2]), graph(&[3, 5], &[3, 5]), host(&[4, 6])] };
        assert_eq!(follows_the_rules(&program, &dead), Ok(()));
        assert!(dead_output(&program, &dead).is_some_and(|m| m.contains("step 5 (op5, an op)")));
        // x0; op1 = f(x0); returns op1.
        let mut built = Builder::default();
        let x = built.push(Kind::Input, &[]);
        let a = built.push(Kind::Op, &[x]);
        built.outputs.push(a);
        let Drawn(program) = built.program();
        let forgotten = Schedule { stages: vec![graph(&[1], &[])] };
        let message = follows_the_rules(&program, &forgotten).unwrap_err();
        assert!(message.contains("the program returns step 1 (op1, an op), which is not there"), "{message}");
    }

    /// The telling programs are as large as the checks say, and each has a schedule: program order.
    #[test]
    fn telling_programs_have_the_sizes_promised() {
        let mut runner = TestRunner::deterministic();
        for _ in 0..50 {
            let Drawn(program) = telling_programs().new_tree(&mut runner).expect("a program").current();
            assert!(FEWEST_STEPS.contains(&program.steps.len()), "{} steps", program.steps.len());
            assert_eq!(follows_the_rules(&program, &program_order(&program)), Ok(()));
            assert!(program_order(&program).graph_count() > least_graphs(&program));
        }
    }

    /// About half the telling programs have no host step that could run before the first graph
    /// (one reading inputs alone), so a schedule that keeps empty stages shows it on some program
    /// of any run's 30.
    #[test]
    fn half_the_telling_programs_start_with_a_graph() {
        let mut runner = TestRunner::deterministic();
        let draws = 400;
        let starting_with_a_graph = (0..draws)
            .filter(|_| {
                let Drawn(program) = telling_programs().new_tree(&mut runner).expect("a program").current();
                let is_input = |r: &usize| program.steps[*r].kind == Kind::Input;
                !program.steps.iter().any(|step| step.kind == Kind::Host && step.reads.iter().all(is_input))
            })
            .count();
        assert!((draws * 2 / 5..=draws * 3 / 5).contains(&starting_with_a_graph), "{starting_with_a_graph} of {draws}");
    }
}
