//! The pattern matcher, the analogue of `torch._inductor.pattern_matcher` and the rewrites built
//! on it (`fx_passes/fuse_attention.py`): a small language for subgraphs of an FX graph
//! ([`Pattern`]), and a pass ([`rewrite`]) that replaces every match of a list of [`Rewrite`]s by
//! what each one builds. A rewrite whose matches must be gathered first (several projections of
//! one input, joined into one matmul) is a pass of its own on the same language:
//! [`concat_linears`].
//!
//! A pattern is a tree read from the value it produces back to its inputs:
//! `call("div", is(Op::Binary(BinaryOp::Div)), [bind("e", ...), call("sum", ..., [same("e")])])`
//! says "a division whose numerator is some subgraph `e` and whose denominator sums that same
//! `e`". Leaves bind any value ([`any`]) or a scalar constant ([`scalar`]); a replacement reads
//! them by name. A match is applied only when it is self-contained: no value computed inside it,
//! except the one it produces, is read from outside (else that value would have to be computed
//! anyway, and nothing is saved).
//!
//! The pass runs on the decomposed graph, so one pattern for `exp(x - max) / sum(exp(x - max))`
//! catches `softmax` and a hand-written softmax alike. `ENGINE_LOGS=fusion` prints each match:
//! the rewrite's name and the source line of the value it replaced.

mod attention;
mod concat_linear;

use std::collections::HashMap;

use crate::error::Result;
use crate::fx::{Arg, Graph, Node, NodeId, NodeKind};
use crate::op::Op;

pub use attention::attention_rewrites;
pub use concat_linear::concat_linears;

/// A subgraph shape to look for.
#[derive(Clone)]
pub enum Pattern {
    /// Any value, bound to the name (a name bound twice must be the same value).
    Any(&'static str),
    /// A scalar constant argument, bound to the name.
    Scalar(&'static str),
    /// The value already bound to the name: how a pattern reads one value twice.
    Same(&'static str),
    /// A call whose node passes `test`, with one pattern per argument.
    Call {
        /// Shown in listings of the pattern.
        label: &'static str,
        /// Whether the node's op (and its parameters, shape) fit.
        test: fn(&Node) -> bool,
        /// The arguments' patterns, in order (tried in both orders for a two-argument call
        /// marked commutative).
        args: Vec<Pattern>,
        /// `add` and `mul`: either argument order matches.
        commutative: bool,
        /// Bind the call's node to this name too.
        name: Option<&'static str>,
    },
}

/// Any value, bound to `name`.
pub fn any(name: &'static str) -> Pattern {
    Pattern::Any(name)
}

/// A scalar constant, bound to `name`.
pub fn scalar(name: &'static str) -> Pattern {
    Pattern::Scalar(name)
}

/// The value bound to `name` earlier in the pattern.
pub fn same(name: &'static str) -> Pattern {
    Pattern::Same(name)
}

/// A call whose node passes `test`, on arguments matching `args` in order.
pub fn call<const N: usize>(label: &'static str, test: fn(&Node) -> bool, args: [Pattern; N]) -> Pattern {
    Pattern::Call { label, test, args: args.into(), commutative: false, name: None }
}

/// Like [`call`], for a two-argument op whose arguments may come in either order.
pub fn commutative(label: &'static str, test: fn(&Node) -> bool, args: [Pattern; 2]) -> Pattern {
    Pattern::Call { label, test, args: args.into(), commutative: true, name: None }
}

/// `pattern`, with the node it matches also bound to `name` (for [`same`]).
pub fn bind(name: &'static str, pattern: Pattern) -> Pattern {
    match pattern {
        Pattern::Call { label, test, args, commutative, .. } => {
            Pattern::Call { label, test, args, commutative, name: Some(name) }
        }
        other => other,
    }
}

/// A node whose op equals `op` exactly (parameters included).
pub fn op_is(node: &Node, op: &Op) -> bool {
    node.op() == Some(op)
}

/// What a match bound: values, scalars, and the nodes the pattern's calls matched.
#[derive(Clone, Debug, Default)]
pub struct Match {
    values: HashMap<&'static str, NodeId>,
    scalars: HashMap<&'static str, f32>,
    /// Nodes matched by calls, the root first.
    interior: Vec<NodeId>,
}

impl Match {
    /// The value bound to `name`, if the pattern that matched binds it.
    pub fn value(&self, name: &str) -> Option<NodeId> {
        self.values.get(name).copied()
    }

    /// The scalar bound to `name`, if the pattern that matched binds it.
    pub fn scalar(&self, name: &str) -> Option<f32> {
        self.scalars.get(name).copied()
    }

    /// The nodes the pattern's calls matched, the root (the value replaced) first.
    pub fn nodes(&self) -> &[NodeId] {
        &self.interior
    }

    fn bind_value(&mut self, name: &'static str, id: NodeId) -> bool {
        *self.values.entry(name).or_insert(id) == id
    }
}

impl Pattern {
    /// Matches `arg` of `graph`, adding to `found`; on failure `found` is left unchanged.
    fn match_arg(&self, graph: &Graph, arg: &Arg, found: &mut Match) -> bool {
        let mut trial = found.clone();
        let ok = match (self, arg) {
            (Pattern::Scalar(name), Arg::Scalar(s)) => *trial.scalars.entry(name).or_insert(s.0) == s.0,
            (Pattern::Any(name), Arg::Node(id)) => trial.bind_value(name, *id),
            (Pattern::Same(name), Arg::Node(id)) => trial.value(name) == Some(*id),
            (Pattern::Call { test, args, commutative, name, .. }, Arg::Node(id)) => {
                let node = graph.node(*id);
                let NodeKind::Call { args: actual, .. } = &node.kind else { return false };
                if !test(node) || actual.len() != args.len() {
                    return false;
                }
                trial.interior.push(*id);
                if name.is_some_and(|n| !trial.bind_value(n, *id)) {
                    return false;
                }
                let orders: Vec<Vec<&Arg>> = match actual.as_slice() {
                    [a, b] if *commutative => vec![vec![a, b], vec![b, a]],
                    _ => vec![actual.iter().collect()],
                };
                for order in orders {
                    let mut attempt = trial.clone();
                    if args.iter().zip(order).all(|(p, a)| p.match_arg(graph, a, &mut attempt)) {
                        *found = attempt;
                        return true;
                    }
                }
                return false;
            }
            _ => false,
        };
        if ok {
            *found = trial;
        }
        ok
    }
}

/// Builds the replacement of a match in the graph being rewritten.
pub struct Builder<'a> {
    graph: &'a mut Graph,
    old: &'a Graph,
    map: &'a [Option<NodeId>],
    root: NodeId,
}

impl Builder<'_> {
    /// The new graph's node for a value bound in the match.
    pub fn value(&self, id: NodeId) -> NodeId {
        self.map[id.index()].expect("a match's inputs come before its root")
    }

    /// The op of a value bound in the match (`None` for a graph input).
    pub fn op(&self, id: NodeId) -> Option<&Op> {
        self.old.node(id).op()
    }

    /// The `i`-th tensor argument of a value bound in the match.
    pub fn input(&self, id: NodeId, i: usize) -> NodeId {
        self.old.node(id).inputs().nth(i).expect("the op takes that many tensors")
    }

    /// The shape of a value bound in the match.
    pub fn shape(&self, id: NodeId) -> &[usize] {
        &self.old.node(id).meta.shape
    }

    /// Appends a call, at the replaced root's source line.
    pub fn call(&mut self, op: Op, args: Vec<Arg>) -> Result<NodeId> {
        let location = self.old.node(self.root).location.expect("call nodes have a location");
        self.graph.add_call(op, args, location)
    }
}

/// One rewrite: a named pattern, what else a match must satisfy, and how to build its
/// replacement.
pub struct Rewrite {
    /// Printed in the fusion log.
    pub name: String,
    /// What to look for; its root is the value replaced.
    pub pattern: Pattern,
    /// What the pattern cannot say (shapes, which dim a reduction runs over): a match failing it
    /// is left alone.
    pub check: fn(&Graph, &Match) -> bool,
    /// Builds the replacement and returns the node standing for the root.
    pub replace: fn(&Match, &mut Builder) -> Result<NodeId>,
}

/// `graph` with every self-contained match of `rewrites` replaced; one line per match (which
/// rewrite, where) is added to `matched`, for `ENGINE_LOGS=fusion`. Nodes are visited from the
/// last, so a larger match is found before its parts; the first rewrite that matches a root wins,
/// and a node belongs to one match at most.
pub fn rewrite(graph: &Graph, rewrites: &[Rewrite], matched: &mut Vec<String>) -> Result<Graph> {
    let mut owner: Vec<Option<usize>> = vec![None; graph.nodes().len()];
    let mut matches: Vec<(usize, Match)> = Vec::new();
    for id in graph.ids().collect::<Vec<_>>().into_iter().rev() {
        if owner[id.index()].is_some() || graph.node(id).op().is_none() {
            continue;
        }
        for (r, rule) in rewrites.iter().enumerate() {
            let mut found = Match::default();
            if rule.pattern.match_arg(graph, &Arg::Node(id), &mut found)
                && self_contained(graph, &found)
                && (rule.check)(graph, &found)
                && found.interior.iter().all(|n| owner[n.index()].is_none())
            {
                for n in &found.interior {
                    owner[n.index()] = Some(matches.len());
                }
                matches.push((r, found));
                break;
            }
        }
    }
    if matches.is_empty() {
        return Ok(graph.clone());
    }
    let (mut out, mut map) = start_copy(graph);
    for id in graph.ids() {
        let node = graph.node(id);
        if node.op().is_none() {
            continue;
        }
        map[id.index()] = match owner[id.index()] {
            None => Some(copy_call(&mut out, graph, id, &map)?),
            Some(m) if matches[m].1.interior[0] == id => {
                let (rule, found) = (&rewrites[matches[m].0], &matches[m].1);
                let mut builder = Builder { graph: &mut out, old: graph, map: &map, root: id };
                let new = (rule.replace)(found, &mut builder)?;
                let place = node.location.map(|l| l.short()).unwrap_or_default();
                matched.push(format!(
                    "pattern `{}` matched at {place} (%{}): {} nodes -> {}",
                    rule.name,
                    node.name,
                    found.interior.len(),
                    out.node(new).op().map(Op::name).unwrap_or_default()
                ));
                Some(new)
            }
            Some(_) => None,
        };
    }
    finish_copy(out, graph, &map)
}

/// A new graph with `graph`'s placeholders, and the map from `graph`'s nodes to the new graph's
/// (filled in as nodes are copied or replaced).
fn start_copy(graph: &Graph) -> (Graph, Vec<Option<NodeId>>) {
    let mut out = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; graph.nodes().len()];
    for (old, new) in graph.placeholders().iter().zip(out.add_placeholders_like(graph)) {
        map[old.index()] = Some(new);
    }
    (out, map)
}

/// Copies call `id` of `graph` into `out`, its arguments read through `map`.
fn copy_call(out: &mut Graph, graph: &Graph, id: NodeId, map: &[Option<NodeId>]) -> Result<NodeId> {
    let node = graph.node(id);
    let NodeKind::Call { op, args } = &node.kind else { unreachable!("only calls are copied") };
    let args = args
        .iter()
        .map(|a| match a {
            Arg::Node(n) => Arg::Node(map[n.index()].expect("nodes only read earlier nodes")),
            scalar => scalar.clone(),
        })
        .collect();
    out.add_call(op.clone(), args, node.location.expect("call nodes have a location"))
}

/// `out` with `graph`'s outputs, read through `map`.
fn finish_copy(mut out: Graph, graph: &Graph, map: &[Option<NodeId>]) -> Result<Graph> {
    let outputs = graph.outputs().iter().map(|o| map[o.index()].expect("outputs are computed")).collect();
    out.set_outputs(outputs)?;
    Ok(out)
}

/// True when no node inside the match except its root is read from outside it or returned.
fn self_contained(graph: &Graph, found: &Match) -> bool {
    found.interior[1..]
        .iter()
        .all(|&n| !graph.outputs().contains(&n) && graph.users(n).iter().all(|u| found.interior.contains(u)))
}
