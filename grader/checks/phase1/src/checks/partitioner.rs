//! Checks of `partitioner`: on graphs drawn from the run's seed (random DAGs of pointwise ops with
//! branches and joins, and a few made to tell wrong answers apart), the subject's partitions
//! tested for legality by the check itself (every supported call node in exactly one partition,
//! nothing else in any, no cycle once each partition is one node), their number compared with
//! the fewest possible, which the check finds its own way (a schedule that alternates between
//! running everything ready outside partitions and everything ready inside one); then the
//! subject's backend run with a compiler of the check's whose every node's result is off from
//! eager by a secret amount, so that the outputs tell which nodes ran where.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use engine::backends::{Backend, CompiledGraph};
use engine::fx::{Arg, Graph, NodeId};
use engine::op::{BinaryOp, Op, UnaryOp};
use engine::scalar::Scalar;
use engine::{Error, Operand, Result, SourceLocation, Tensor};
use grader_harness::{
    CheckResult, Context, Failure, Tolerance, assert_close, ensure, fingerprint, for_all, judged_artifact,
    record_artifact, showing_on_panic,
};
use proptest::prelude::*;

use crate::subject::{CapabilityBackend, partition};

/// The ops of the drawn graphs: pointwise and bounded, so no value overflows however deep, and a
/// product with a constant (`mul(%x, 0.5)`).
const UNARY: [UnaryOp; 4] = [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Neg];
const BINARY: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Maximum, BinaryOp::Minimum];
const OPS: usize = UNARY.len() + BINARY.len() + 1;

/// The op of a drawn node (`op` taken modulo the ops).
fn drawn_op(op: u8) -> Op {
    match op as usize % OPS {
        k @ 0..4 => Op::Unary(UNARY[k]),
        k @ 4..8 => Op::Binary(BINARY[k - 4]),
        _ => Op::Binary(BinaryOp::Mul),
    }
}

/// One node of a drawn graph: its op, and which earlier values it reads (`a`, `b`: below 128 an
/// index into every value so far, from 128 one of the last four, for long chains too; for a
/// product with a constant, `b` picks the constant).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Step {
    op: u8,
    a: u8,
    b: u8,
}

/// A drawn case: a graph of `inputs` placeholders of `[rows, cols]` and one call per step, its
/// outputs (the last call and the values `outputs` picks, inputs among them), and the ops its
/// compiler supports (bit `k` of `supported` for op `k`).
#[derive(Clone, PartialEq)]
struct Case {
    inputs: usize,
    rows: usize,
    cols: usize,
    steps: Vec<Step>,
    outputs: Vec<u8>,
    supported: u16,
}

impl Case {
    fn strategy() -> impl Strategy<Value = Case> {
        let step = (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(op, a, b)| Step { op, a, b });
        (
            1usize..=3,
            1usize..=3,
            1usize..=4,
            prop::collection::vec(step, 4..=16),
            prop::collection::vec(any::<u8>(), 0..=2),
            1u16..(1 << OPS) - 1,
        )
            .prop_map(|(inputs, rows, cols, steps, outputs, supported)| Case {
                inputs,
                rows,
                cols,
                steps,
                outputs,
                supported,
            })
    }

    fn graph(&self) -> Graph {
        let mut graph = Graph::new();
        let example = Tensor::zeros(&[self.rows, self.cols]);
        let strides = engine::layout::contiguous_strides(example.shape());
        let mut values: Vec<NodeId> =
            (0..self.inputs).map(|i| graph.add_placeholder(&format!("x{i}"), example.meta(), strides.clone())).collect();
        for step in &self.steps {
            let pick = |k: u8| {
                let n = values.len();
                if k < 128 { values[k as usize % n] } else { values[n - 1 - (k as usize % n.min(4))] }
            };
            let op = drawn_op(step.op);
            let args = match op {
                Op::Unary(_) => vec![Arg::Node(pick(step.a))],
                Op::Binary(BinaryOp::Mul) => {
                    vec![Arg::Node(pick(step.a)), Arg::Scalar(Scalar(f32::from(step.b % 8) / 4.0 - 1.0))]
                }
                _ => vec![Arg::Node(pick(step.a)), Arg::Node(pick(step.b))],
            };
            let id = graph.add_call(op, args, SourceLocation::caller()).expect("pointwise ops of one shape fit");
            values.push(id);
        }
        let mut outputs = vec![*values.last().expect("at least one step")];
        for &k in &self.outputs {
            let id = values[k as usize % values.len()];
            if !outputs.contains(&id) {
                outputs.push(id);
            }
        }
        graph.set_outputs(outputs).expect("outputs are nodes of the graph");
        graph
    }

    /// The names of the supported ops.
    fn supported_names(&self) -> Vec<&'static str> {
        (0..OPS as u8).filter(|&k| self.supported >> k & 1 == 1).map(|k| drawn_op(k).name()).collect()
    }

    /// Inputs for the graph, drawn from `seed`.
    fn inputs(&self, seed: u64) -> Vec<Tensor> {
        (0..self.inputs).map(|i| Tensor::randn(&[self.rows, self.cols], seed * 7 + i as u64)).collect()
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "a graph whose compiler supports {:?}:", self.supported_names())?;
        write!(f, "{}", self.graph())
    }
}

/// The support test of a case: whether `op`'s name is one of `names`.
fn supports(names: &[&'static str]) -> impl Fn(&Op) -> bool + Send + Sync + 'static {
    let names = names.to_vec();
    move |op: &Op| names.contains(&op.name())
}

/// Graphs made to tell wrong answers apart, with their supported ops (`tanh` and `add`):
/// - a supported node read by an unsupported one that a supported node reads in turn: one
///   partition of all three supported nodes is a cycle;
/// - two supported nodes with an unsupported one between them in the graph's order but not on
///   any path: one partition is enough, though they are not consecutive, and both are outputs;
/// - a supported node that needs nothing unsupported, beside one that does: starting with a
///   partition before running what is ready outside costs one partition too many;
/// - a graph where merging partitions greedily, as PyTorch's partitioner does in its own order,
///   ends with three partitions (tried: one partition per supported node, merged with each
///   earlier one, walking the nodes forwards or backwards, a merge kept if no cycle appears): an
///   early merge blocks later ones, and two are enough.
fn telling_cases() -> Vec<(Graph, Vec<&'static str>)> {
    let here = SourceLocation::caller();
    let (tanh, relu, add, sub) =
        (Op::Unary(UnaryOp::Tanh), Op::Unary(UnaryOp::Relu), Op::Binary(BinaryOp::Add), Op::Binary(BinaryOp::Sub));
    let start = || {
        let mut graph = Graph::new();
        let example = Tensor::zeros(&[2, 3]);
        let x = graph.add_placeholder("x", example.meta(), engine::layout::contiguous_strides(example.shape()));
        (graph, x)
    };
    let build = |f: &dyn Fn(&mut Graph, NodeId) -> Result<Vec<NodeId>>| {
        let (mut graph, x) = start();
        let outputs = f(&mut graph, x).expect("the telling graphs build");
        graph.set_outputs(outputs).expect("outputs are nodes");
        graph
    };
    let cycle = build(&|g, x| {
        let a = g.add_call(tanh.clone(), vec![Arg::Node(x)], here)?;
        let u = g.add_call(relu.clone(), vec![Arg::Node(a)], here)?;
        let b = g.add_call(add.clone(), vec![Arg::Node(a), Arg::Node(u)], here)?;
        let c = g.add_call(tanh.clone(), vec![Arg::Node(b)], here)?;
        Ok(vec![c])
    });
    let apart = build(&|g, x| {
        let a = g.add_call(tanh.clone(), vec![Arg::Node(x)], here)?;
        let u = g.add_call(relu.clone(), vec![Arg::Node(x)], here)?;
        let b = g.add_call(add.clone(), vec![Arg::Node(u), Arg::Node(x)], here)?;
        Ok(vec![b, a])
    });
    let ready_first = build(&|g, x| {
        let u = g.add_call(relu.clone(), vec![Arg::Node(x)], here)?;
        let a = g.add_call(tanh.clone(), vec![Arg::Node(x)], here)?;
        let b = g.add_call(add.clone(), vec![Arg::Node(a), Arg::Node(u)], here)?;
        let v = g.add_call(relu.clone(), vec![Arg::Node(b)], here)?;
        Ok(vec![v, a])
    });
    let greedy = build(&|g, x| {
        let a = g.add_call(tanh.clone(), vec![Arg::Node(x)], here)?;
        let u = g.add_call(relu.clone(), vec![Arg::Node(a)], here)?;
        let b = g.add_call(tanh.clone(), vec![Arg::Node(u)], here)?;
        let c = g.add_call(tanh.clone(), vec![Arg::Node(a)], here)?;
        let d = g.add_call(tanh.clone(), vec![Arg::Node(x)], here)?;
        let v = g.add_call(sub.clone(), vec![Arg::Node(u), Arg::Node(d)], here)?;
        g.add_call(relu.clone(), vec![Arg::Node(x)], here)?;
        let e = g.add_call(add.clone(), vec![Arg::Node(b), Arg::Node(v)], here)?;
        Ok(vec![e, c])
    });
    [cycle, apart, ready_first, greedy].into_iter().map(|g| (g, vec!["tanh", "add"])).collect()
}

/// The fewest partitions `graph` can have: the partition rounds of a schedule that runs, in turn,
/// everything ready outside partitions, then everything ready that `supports` accepts (one
/// partition, if any), until nothing is left. Any legal partitioning runs in some topological
/// order with each partition contiguous, and this schedule is ahead of every such order after as
/// many rounds, so it needs the fewest partition rounds. In the judge's runner only: the runner
/// linked with the learner's crate records the answers, and the judge, which runs no learner code,
/// counts.
#[cfg(feature = "solutions")]
fn fewest(graph: &Graph, supports: &dyn Fn(&Op) -> bool) -> usize {
    let n = graph.nodes().len();
    let inside = |id: NodeId| graph.node(id).op().is_some_and(supports);
    let mut done = vec![false; n];
    let mut left = n;
    let mut rounds = 0;
    for partition_round in [false, true].into_iter().cycle() {
        if left == 0 {
            break;
        }
        let mut ran = 0;
        // One pass in id order runs everything ready of this kind, ids being topological.
        for id in graph.ids() {
            if !done[id.index()] && inside(id) == partition_round && graph.node(id).inputs().all(|i| done[i.index()]) {
                done[id.index()] = true;
                ran += 1;
            }
        }
        left -= ran;
        rounds += usize::from(partition_round && ran > 0);
    }
    rounds
}

/// Why `partitions` is not a legal partitioning of `graph`'s supported call nodes, if it is not.
fn illegal(graph: &Graph, supports: &dyn Fn(&Op) -> bool, partitions: &[Vec<NodeId>]) -> Option<String> {
    let n = graph.nodes().len();
    let name = |id: NodeId| format!("%{}", graph.node(id).name);
    let mut owner: Vec<Option<usize>> = vec![None; n];
    for (p, nodes) in partitions.iter().enumerate() {
        if nodes.is_empty() {
            return Some(format!("partition {p} is empty"));
        }
        for &id in nodes {
            if id.index() >= n {
                return Some(format!("partition {p} holds node {id:?}, which is not a node of this graph ({n} nodes)"));
            }
            match graph.node(id).op() {
                None => return Some(format!("partition {p} holds {}, a placeholder", name(id))),
                Some(op) if !supports(op) => {
                    return Some(format!("partition {p} holds {}, whose op `{}` is not supported", name(id), op.name()));
                }
                Some(_) => {}
            }
            if let Some(q) = owner[id.index()].replace(p) {
                return Some(format!("{} is in partition {q} and in partition {p}", name(id)));
            }
        }
    }
    if let Some(id) = graph.ids().find(|&id| graph.node(id).op().is_some_and(supports) && owner[id.index()].is_none()) {
        return Some(format!("{} is supported but in no partition", name(id)));
    }
    // Contract: one unit per partition, one per other node; look for a cycle among the units.
    let unit = |id: NodeId| owner[id.index()].map_or(partitions.len() + id.index(), |p| p);
    let units = partitions.len() + n;
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); units];
    for id in graph.ids() {
        for input in graph.node(id).inputs() {
            if unit(input) != unit(id) {
                edges[unit(input)].insert(unit(id));
            }
        }
    }
    let cycle = find_cycle(&edges)?;
    let show = |u: usize| {
        if u < partitions.len() {
            let members: Vec<String> = partitions[u].iter().map(|&id| name(id)).collect();
            format!("partition {u} [{}]", members.join(" "))
        } else {
            graph.ids().nth(u - partitions.len()).map_or(String::new(), name)
        }
    };
    let path: Vec<String> = cycle.iter().map(|&u| show(u)).collect();
    Some(format!("once each partition is one node, the graph has a cycle: {}", path.join(" -> ")))
}

/// A cycle of the directed graph `edges` (first unit repeated at the end), if it has one.
fn find_cycle(edges: &[BTreeSet<usize>]) -> Option<Vec<usize>> {
    // 0: not seen, 1: on the current path, 2: finished.
    let mut state = vec![0u8; edges.len()];
    let mut path = Vec::new();
    fn walk(u: usize, edges: &[BTreeSet<usize>], state: &mut [u8], path: &mut Vec<usize>) -> Option<Vec<usize>> {
        state[u] = 1;
        path.push(u);
        for &v in &edges[u] {
            if state[v] == 1 {
                let from = path.iter().position(|&w| w == v).expect("on the path");
                let mut cycle = path[from..].to_vec();
                cycle.push(v);
                return Some(cycle);
            }
            if state[v] == 0
                && let Some(cycle) = walk(v, edges, state, path)
            {
                return Some(cycle);
            }
        }
        path.pop();
        state[u] = 2;
        None
    }
    (0..edges.len()).find_map(|u| if state[u] == 0 { walk(u, edges, &mut state, &mut path) } else { None })
}

/// Runs `graph` on `inputs` node by node, adding `offset(op)` to each call's result: the check's
/// compiler (every op off by the secret amount) and its expected outputs (only supported ops).
fn run_offset(graph: &Graph, inputs: &[Tensor], offset: &dyn Fn(&Op) -> f32) -> Result<Vec<Tensor>> {
    if inputs.len() != graph.placeholders().len() {
        return Err(Error::Backend {
            backend: "grader's compiler".into(),
            message: format!("the graph takes {} inputs, got {}", graph.placeholders().len(), inputs.len()),
        });
    }
    let mut values: Vec<Option<Tensor>> = vec![None; graph.nodes().len()];
    for (&p, input) in graph.placeholders().iter().zip(inputs) {
        values[p.index()] = Some(input.clone());
    }
    for id in graph.ids() {
        let node = graph.node(id);
        let Some(op) = node.op() else { continue };
        let operands: Vec<Operand> = node
            .args()
            .iter()
            .map(|arg| match arg {
                Arg::Node(input) => Operand::Tensor(values[input.index()].as_ref().expect("inputs come first")),
                Arg::Scalar(s) => Operand::Scalar(s.0),
            })
            .collect();
        let value = op.apply(&operands, node.location.unwrap_or(SourceLocation::caller()))?;
        values[id.index()] = Some(value.add(offset(op))?);
    }
    Ok(graph.outputs().iter().map(|id| values[id.index()].clone().expect("every node ran")).collect())
}

/// What the check's compiler was handed, and how often what it returned ran.
#[derive(Default)]
struct Handed {
    graphs: Mutex<Vec<Graph>>,
    runs: Mutex<Vec<Arc<AtomicUsize>>>,
}

/// The check's compiler: keeps every graph it is handed, and runs it node by node with every
/// result off from eager by `offset` (a secret drawn from the seed), counting the runs.
#[derive(Clone)]
struct OffCompiler {
    offset: f32,
    handed: Arc<Handed>,
}

impl Backend for OffCompiler {
    fn name(&self) -> &str {
        "grader's compiler"
    }

    fn compile(&self, graph: &Graph, _example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        self.handed.graphs.lock().expect("no panic while holding").push(graph.clone());
        let runs = Arc::new(AtomicUsize::new(0));
        self.handed.runs.lock().expect("no panic while holding").push(runs.clone());
        let (graph, offset) = (graph.clone(), self.offset);
        Ok(Box::new(move |inputs: &[Tensor]| {
            runs.fetch_add(1, Ordering::SeqCst);
            run_offset(&graph, inputs, &|_| offset)
        }))
    }
}

/// Fails unless `count`, the partitions the subject made of `graph` with `names` supported, is the
/// fewest legal: judged in the judge's runner, where no learner code runs. `message` says what is
/// wrong, given the fewest.
#[cfg(feature = "solutions")]
fn has_the_fewest(graph: &Graph, names: &[&'static str], count: usize, message: &dyn Fn(usize) -> String) -> Result<(), Failure> {
    let fewest = fewest(graph, &supports(names));
    ensure(count == fewest, || message(fewest))
}

/// In the runner linked with the learner's crate, no count: the judge counts.
#[cfg(not(feature = "solutions"))]
fn has_the_fewest(_graph: &Graph, _names: &[&'static str], _count: usize, _message: &dyn Fn(usize) -> String) -> Result<(), Failure> {
    Ok(())
}

/// Partitions as recorded: node positions, `[[1, 2], [4]]`.
fn parse_partitions(text: &str) -> Option<Vec<Vec<usize>>> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    let inner = inner.strip_prefix('[')?.strip_suffix(']')?;
    inner
        .split("], [")
        .map(|p| if p.trim().is_empty() { Some(Vec::new()) } else { p.split(',').map(|i| i.trim().parse().ok()).collect() })
        .collect()
}

/// Fails unless `partition` gives `graph` a legal partitioning with the fewest partitions.
fn partitions_of(graph: &Graph, names: &[&'static str]) -> Result<(), Failure> {
    let supports = supports(names);
    let label = format!("partitions of the graph {}", fingerprint(&(graph.to_string(), names)));
    let ids: Vec<NodeId> = graph.ids().collect();
    let got: Vec<Vec<NodeId>> = match judged_artifact(&label) {
        Some(text) => {
            let positions = parse_partitions(&text).ok_or_else(|| Failure::fail(format!("{label} were recorded unreadably")))?;
            // A position past the graph failed the subject's own run already (`illegal`).
            let node = |i: usize| ids.get(i).copied().ok_or_else(|| Failure::fail(format!("{label}: no node {i}")));
            positions.into_iter().map(|p| p.into_iter().map(node).collect()).collect::<Result<_, _>>()?
        }
        None => partition(graph, &supports),
    };
    let positions: Vec<Vec<usize>> = got.iter().map(|p| p.iter().map(|id| id.index()).collect()).collect();
    record_artifact(label, format!("{positions:?}"));
    let on = || format!("\nYour partitions: {}\nwith {names:?} supported, on this graph:\n{graph}", shown(graph, &got));
    if let Some(why) = illegal(graph, &supports, &got) {
        return Err(Failure::fail(format!("your partitions are not legal: {why}.{}", on())));
    }
    has_the_fewest(graph, names, got.len(), &|fewest| {
        format!("your {} partitions are legal, but the fewest possible is {fewest}.{}", got.len(), on())
    })
}

/// Partitions as node names: `[%tanh %add] [%tanh_1]`.
fn shown(graph: &Graph, partitions: &[Vec<NodeId>]) -> String {
    let names = |p: &Vec<NodeId>| {
        p.iter()
            .map(|&id| graph.nodes().get(id.index()).map_or(format!("{id:?}"), |n| format!("%{}", n.name)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    partitions.iter().map(|p| format!("[{}]", names(p))).collect::<Vec<_>>().join(" ")
}

/// `partition` gives the telling graphs and the seed's random graphs legal partitions, as few as
/// possible.
pub fn partitions_are_legal_and_fewest(ctx: &Context) -> CheckResult {
    for (graph, names) in telling_cases() {
        partitions_of(&graph, &names)?;
    }
    let cases = 80;
    for_all(ctx, cases, Case::strategy(), |case| partitions_of(&case.graph(), &case.supported_names()))?;
    Ok(format!(
        "legal partitions, as few as possible, on {} telling and {cases} random graphs",
        telling_cases().len()
    ))
}

/// The secret amount the check's compiler is off by: a multiple of 1/64 from 1/64 to 1/4, drawn
/// from the seed.
fn secret_offset(ctx: &Context) -> f32 {
    let bits = ctx.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60;
    (1 + bits as u32) as f32 / 64.0
}

/// Fails unless `CapabilityBackend` runs `graph` (compiled once, run twice) with the check's
/// compiler handed exactly the fewest legal partitions, each run once per call, and the
/// outputs of eager for unsupported nodes and of the compiler for supported ones.
fn backend_runs(graph: &Graph, names: &[&'static str], offset: f32, seed: u64, inputs: &dyn Fn(u64) -> Vec<Tensor>) -> Result<(), Failure> {
    let handed = Arc::new(Handed::default());
    let backend = CapabilityBackend {
        supports: Arc::new(supports(names)),
        compiler: Arc::new(OffCompiler { offset, handed: handed.clone() }),
    };
    let on = || format!("with {names:?} supported, on this graph:\n{graph}");
    let compiled = backend.compile(graph, &inputs(seed))?;
    for call in 0..2 {
        let x = inputs(seed + 1 + call);
        let got = compiled.run(&x)?;
        let supported = supports(names);
        let expected = run_offset(graph, &x, &|op| if supported(op) { offset } else { 0.0 })?;
        ensure(got.len() == expected.len(), || {
            format!("the graph has {} outputs; your backend returned {}, {}", expected.len(), got.len(), on())
        })?;
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_close(&format!("call {call}, output {i}"), g, e, Tolerance::F32).map_err(|f| {
                Failure::fail(format!(
                    "{f}\n(the grader's compiler computes each node a little differently from eager: a supported node \
                     must run there, an unsupported one eagerly) {}",
                    on()
                ))
            })?;
        }
    }
    let graphs = handed.graphs.lock().expect("no panic while holding").clone();
    let label = format!("graphs your backend compiled, on the graph {}", fingerprint(&(graph.to_string(), names)));
    let compiled = match judged_artifact(&label) {
        Some(text) => text.parse().map_err(|_| Failure::fail(format!("{label} was recorded unreadably")))?,
        None => graphs.len(),
    };
    record_artifact(label, compiled.to_string());
    has_the_fewest(graph, names, compiled, &|fewest| {
        format!("your backend handed the compiler {compiled} graphs; the fewest legal partitions are {fewest}, {}", on())
    })?;
    let supported_calls = graph.nodes().iter().filter(|n| n.op().is_some_and(supports(names))).count();
    let compiled_calls: usize = graphs.iter().map(|g| g.nodes().iter().filter(|n| n.op().is_some()).count()).sum();
    if let Some(op) = graphs.iter().flat_map(|g| g.nodes()).filter_map(|n| n.op()).find(|op| !names.contains(&op.name())) {
        return Err(Failure::fail(format!("your backend handed the compiler an unsupported `{}`, {}", op.name(), on())));
    }
    ensure(compiled_calls == supported_calls, || {
        format!(
            "the graph has {supported_calls} supported calls; the graphs handed to the compiler hold {compiled_calls}, {}",
            on()
        )
    })?;
    let runs: Vec<usize> = handed.runs.lock().expect("no panic while holding").iter().map(|r| r.load(Ordering::SeqCst)).collect();
    ensure(runs.iter().all(|&r| r == 2), || {
        format!("over 2 calls, the compiled partitions ran {runs:?} times: once per call each, please, {}", on())
    })?;
    Ok(())
}

/// `CapabilityBackend` runs the telling graphs and the seed's random graphs: supported nodes in the
/// compiled partitions (the fewest), the others eagerly, with the outputs that follows.
pub fn backend_runs_partitions_through_the_compiler(ctx: &Context) -> CheckResult {
    let offset = secret_offset(ctx);
    for (k, (graph, names)) in telling_cases().into_iter().enumerate() {
        let inputs = |seed: u64| vec![Tensor::randn(&[2, 3], seed)];
        showing_on_panic(
            || format!("(your backend panicked with {names:?} supported, on this graph:\n{graph})"),
            || backend_runs(&graph, &names, offset, ctx.seed + 10 * k as u64, &inputs),
        )?;
    }
    let cases = 30;
    for_all(ctx, cases, Case::strategy(), |case| {
        backend_runs(&case.graph(), &case.supported_names(), offset, ctx.seed, &|seed| case.inputs(seed))
    })?;
    Ok(format!(
        "the backend runs {} telling and {cases} random graphs as eager would, but for its compiler's supported nodes, \
         each compiled partition once per call",
        telling_cases().len()
    ))
}
