//! Scheduling and fusion, the analogue of TorchInductor's `scheduler.py`: IR nodes are grouped
//! into kernels. A node joins the group of its latest producer when a fusion decision (Inductor's
//! `can_fuse`) allows it; every refusal carries a reason, printed by `ENGINE_LOGS=fusion` like
//! Inductor's "why no fuse" messages.
//!
//! Inside a group, values pass from producer to consumer in registers, so a consumer may only
//! read a producer of its own group at the element it is computing itself (or, inside a reduction
//! kernel, the reduced value of its own row). Anything else needs the producer's buffer in memory
//! and therefore another kernel.
//!
//! A node that writes a graph input in place (`copy_`, [`IrNode::into_input`]) joins a group only
//! where no later kernel still reads the input's old values, and where the group reads the input
//! at exactly the elements it writes.
//!
//! After this *vertical* fusion, a *horizontal* pass (Inductor's `ForeachKernelSchedulerNode`
//! and combo kernels) puts the independent pointwise groups that nothing else reads (an
//! optimizer's update of each parameter, say) into one **foreach** kernel: one launch runs each
//! group's loop in turn over its own elements, however different their sizes.

use std::fmt;

use super::index::Affine;
use super::ir::{BufferName, IrId, IrNode, LoweredGraph, NodeBody, PerNode};
use crate::error::{Error, Result};

/// The loops a kernel group runs, or a single node would run on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoopKind {
    /// One loop over every element of `shape`.
    Pointwise {
        /// The iteration space.
        shape: Vec<usize>,
    },
    /// Rows of `shape` along `dim`: an outer loop over rows, inner loops along each row.
    Reduction {
        /// The iteration space of the rows' elements.
        shape: Vec<usize>,
        /// The dimension reduced.
        dim: usize,
    },
    /// A library call (matmul) or an eager fallback (`cond`); never fused.
    Extern,
    /// Independent pointwise loops in one kernel (a foreach kernel), each its own group over its
    /// own shape: made by the horizontal pass after fusion, never offered to a fusion policy.
    Foreach {
        /// The pointwise groups, in the order they run.
        parts: Vec<Group>,
    },
}

impl fmt::Display for LoopKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoopKind::Pointwise { shape } => write!(f, "pointwise over {shape:?}"),
            LoopKind::Reduction { shape, dim } => write!(f, "reduction over dim {dim} of {shape:?}"),
            LoopKind::Extern => f.write_str("extern call"),
            LoopKind::Foreach { parts } => write!(f, "foreach kernel of {} pointwise loops", parts.len()),
        }
    }
}

/// How a candidate reads one buffer computed inside the group it might join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The same element the reader computes: passes in a register.
    SameElement,
    /// The reduced value of the reader's own row: passes in a register once the row is reduced.
    RowValue,
    /// Any other element (a transpose, a slice, a broadcast across rows): needs memory.
    Other,
}

/// One read of a group's buffer by the candidate node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRead {
    /// The buffer read (`buf3`).
    pub buffer: String,
    /// How it is read.
    pub access: Access,
}

/// Everything a fusion decision looks at: the group so far and the node that could join it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusionCandidate {
    /// The group's loop structure.
    pub group: LoopKind,
    /// The ops already in the group, in order.
    pub group_ops: Vec<String>,
    /// The candidate's name in the graph (`add_2`).
    pub node: String,
    /// The candidate's op (`add`, `amax`, `matmul`).
    pub op: String,
    /// The loops the candidate runs on its own.
    pub own: LoopKind,
    /// Its reads of buffers computed in the group.
    pub reads: Vec<GroupRead>,
}

/// How a node joins a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FusionKind {
    /// A pointwise node in a pointwise group over the same elements.
    Pointwise,
    /// A reduction whose input the pointwise group computes: the group becomes a reduction
    /// kernel with the pointwise nodes as its prologue.
    ReductionPrologue,
    /// A pointwise node over the elements of the rows a reduction group loops over: it runs in
    /// the row loop, reading reduced values of its row (softmax's `exp(x - max)`).
    RowEpilogue,
    /// A pointwise node over the reduced values, one per row (layer norm's `rsqrt(var + eps)`).
    PerRow,
    /// Another reduction over the same rows (softmax's `sum` after its `amax`).
    AnotherReduction,
    /// An independent pointwise loop that nothing else reads, beside others in one foreach kernel
    /// (the horizontal pass's decision, never a fusion policy's).
    Foreach,
}

impl fmt::Display for FusionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FusionKind::Pointwise => "a pointwise op over the same elements",
            FusionKind::ReductionPrologue => "a reduction of what the kernel computes (pointwise prologue)",
            FusionKind::RowEpilogue => "an op on the rows' elements (epilogue)",
            FusionKind::PerRow => "an op on the reduced values (one per row)",
            FusionKind::AnotherReduction => "another reduction of the same rows",
            FusionKind::Foreach => "an independent pointwise loop of its own (horizontal, foreach)",
        })
    }
}

/// The answer of a fusion decision: join, and how, or stay apart, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The node joins the group.
    Fuse(FusionKind),
    /// The node starts a new kernel; the reason is printed in the fusion log.
    Refuse(String),
}

/// A fusion policy: decides for one candidate. [`can_fuse`] is the engine's own.
pub type FusionPolicy = fn(&FusionCandidate) -> Decision;

// ANCHOR: can_fuse
/// The engine's fusion decision, TorchInductor's rules in small:
///
/// - matmul is an extern library call and never fuses;
/// - pointwise nodes over the same elements fuse into one loop;
/// - a reduction fuses with the pointwise nodes that compute its input (a prologue);
/// - a reduction group takes pointwise nodes over its rows' elements or over its reduced values,
///   and further reductions of the same rows (softmax and layer norm become one kernel);
/// - a consumer that reads a group's buffer at any other element than its own needs that buffer
///   in memory, so it starts a new kernel.
pub fn can_fuse(c: &FusionCandidate) -> Decision {
    crate::wires::trip(crate::wires::Wire::CanFuse);
    let kind = match (&c.group, &c.own) {
        (_, LoopKind::Extern) => {
            return Decision::Refuse(format!(
                "{} runs outside generated code (a library call such as sgemm/cuBLAS, or an eager fallback): it \
                 reads its inputs from memory and cannot be fused",
                c.op
            ));
        }
        (LoopKind::Extern, _) => {
            return Decision::Refuse(
                "the producer runs outside generated code (an extern call); its epilogue starts a new kernel"
                    .to_string(),
            );
        }
        (LoopKind::Pointwise { shape }, LoopKind::Pointwise { shape: s }) if s == shape => FusionKind::Pointwise,
        (LoopKind::Pointwise { shape }, LoopKind::Reduction { shape: s, .. }) if s == shape => {
            FusionKind::ReductionPrologue
        }
        (LoopKind::Reduction { shape, .. }, LoopKind::Pointwise { shape: s }) if s == shape => FusionKind::RowEpilogue,
        (LoopKind::Reduction { shape, dim }, LoopKind::Pointwise { shape: s }) if is_row_shape(s, shape, *dim) => {
            FusionKind::PerRow
        }
        (LoopKind::Reduction { shape, dim }, LoopKind::Reduction { shape: s, dim: d }) if s == shape && d == dim => {
            FusionKind::AnotherReduction
        }
        (group, own) => {
            return Decision::Refuse(format!(
                "different iteration spaces: the kernel is a {group}, {} is a {own}",
                c.node
            ));
        }
    };
    match c.reads.iter().find(|r| r.access == Access::Other) {
        Some(r) => Decision::Refuse(format!(
            "{} reads {} at other elements than the ones it computes (a view or broadcast of it), so {} must be \
             written to memory first",
            c.node, r.buffer, r.buffer
        )),
        None => Decision::Fuse(kind),
    }
}
// ANCHOR_END: can_fuse

/// True when `s` is the shape of one value per row of `full` reduced along `dim` (keepdim or not).
pub fn is_row_shape(s: &[usize], full: &[usize], dim: usize) -> bool {
    let mut keep = full.to_vec();
    keep[dim] = 1;
    let mut squeezed = full.to_vec();
    squeezed.remove(dim);
    s == keep || s == squeezed
}

/// One group of IR nodes that becomes one kernel (or one extern call).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The loop structure.
    pub kind: LoopKind,
    /// IR node indices, in execution order.
    pub members: Vec<IrId>,
}

/// One fusion decision, as the fusion log prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusionRecord {
    /// The candidate node (`add_2 (buf5)`).
    pub node: String,
    /// The nodes of the group it was tried against.
    pub group_nodes: Vec<String>,
    /// The decision.
    pub decision: Decision,
}

impl fmt::Display for FusionRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = self.group_nodes.join(", ");
        match &self.decision {
            Decision::Fuse(kind) => write!(f, "fused {} into [{group}] as {kind}", self.node),
            Decision::Refuse(why) => write!(f, "cannot fuse {} into [{group}]: {why}", self.node),
        }
    }
}

/// The groups in execution order, the decisions that made them, and which buffers must exist in
/// memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Kernels and extern calls, in execution order.
    pub groups: Vec<Group>,
    /// Every fusion decision taken.
    pub decisions: Vec<FusionRecord>,
    /// For each IR node, whether its output is written to memory (read by another group or
    /// returned) rather than living only in registers inside its kernel.
    pub stored: PerNode<bool>,
}

/// A kernel's number: its place among the schedule's kernels in launch order (extern calls are
/// not kernels), and the suffix of its name (`poi_fused_add_0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelId(pub usize);

impl Schedule {
    /// The kernel each group becomes, `None` for an extern call: the one place kernels are
    /// numbered, read by kernel building and by the call plan alike.
    pub fn kernel_ids(&self) -> Vec<Option<KernelId>> {
        let mut next = 0;
        self.groups
            .iter()
            .map(|g| {
                (g.kind != LoopKind::Extern).then(|| {
                    next += 1;
                    KernelId(next - 1)
                })
            })
            .collect()
    }
}

/// Groups the nodes of `graph` with the fusion decision `policy`.
///
/// Fails when the policy fuses what cannot be fused (a read that cannot pass in a register, or a
/// loop structure the node does not have): the decision is checked, not trusted.
pub fn schedule(graph: &LoweredGraph, policy: FusionPolicy) -> Result<Schedule> {
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: PerNode<usize> = PerNode(Vec::with_capacity(graph.nodes.len()));
    let mut decisions = Vec::new();
    for (n, node) in graph.enumerate() {
        let latest_producer = node
            .reads()
            .iter()
            .filter_map(|b| match b {
                BufferName::Node(p) => Some(group_of[*p]),
                BufferName::Input(_) => None,
            })
            .max();
        let joined = match latest_producer {
            Some(g) => {
                let candidate = candidate(graph, &groups[g], n);
                let decision = match write_hazard(graph, &groups, g, n) {
                    Some(why) => Decision::Refuse(why),
                    None => policy(&candidate),
                };
                decisions.push(FusionRecord {
                    node: format!("{} ({})", node.origin_name, BufferName::Node(n)),
                    group_nodes: groups[g].members.iter().map(|&m| graph[m].origin_name.clone()).collect(),
                    decision: decision.clone(),
                });
                match decision {
                    Decision::Fuse(kind) => {
                        check_legal(&candidate, kind)?;
                        let group = &mut groups[g];
                        if let (FusionKind::ReductionPrologue, LoopKind::Reduction { shape, dim }) =
                            (kind, &candidate.own)
                        {
                            group.kind = LoopKind::Reduction { shape: shape.clone(), dim: *dim };
                        }
                        group.members.push(n);
                        Some(g)
                    }
                    Decision::Refuse(_) => None,
                }
            }
            None => None,
        };
        let g = joined.unwrap_or_else(|| {
            groups.push(Group { kind: own_kind(node), members: vec![n] });
            groups.len() - 1
        });
        group_of.0.push(g);
    }
    let (groups, group_of) = combine_independent(graph, groups, group_of, &mut decisions);
    let stored = stored_buffers(graph, &group_of);
    Ok(Schedule { groups, decisions, stored })
}

/// Why node `n`, which writes a graph input in place, may not join group `g` (its latest
/// producer's); `None` when it may. Every reader of the input's old values must have run by the
/// time the write happens: no later group may read the input, and the group itself may read it
/// only at the elements it writes, each before writing it, which only a pointwise loop does.
fn write_hazard(graph: &LoweredGraph, groups: &[Group], g: usize, n: IrId) -> Option<String> {
    let node = &graph[n];
    let input = node.into_input?;
    let buffer = BufferName::Input(input);
    let name = &graph.inputs[input].name;
    if let Some(later) = groups[g + 1..].iter().flat_map(|h| &h.members).find(|&&m| graph[m].reads().contains(&buffer))
    {
        return Some(format!(
            "{} writes {name} in place, and {} (a later kernel) still reads its old values, so the write runs \
             after it",
            node.origin_name, graph[*later].origin_name
        ));
    }
    let written = Affine::contiguous(&node.shape);
    let pointwise = matches!(groups[g].kind, LoopKind::Pointwise { .. });
    let reads_elsewhere = |m: &IrId| {
        let member = &graph[*m];
        member.reads().contains(&buffer)
            && !(pointwise
                && member.iteration_shape() == node.shape
                && member.loads().iter().filter(|l| l.buffer == buffer).all(|l| l.index == written))
    };
    groups[g].members.iter().find(|m| reads_elsewhere(m)).map(|m| {
        format!(
            "{} writes {name} in place, and {} in that kernel reads {name} at other elements, so the write starts \
             a new kernel",
            node.origin_name, graph[*m].origin_name
        )
    })
}

/// The horizontal pass: the pointwise groups whose buffers no other group reads (only returned
/// or written into inputs) run as the parts of one foreach kernel, at the place of the last of
/// them. A group moves later only if nothing between its place and that one writes an input it
/// reads. Returns the groups and each node's group.
fn combine_independent(
    graph: &LoweredGraph,
    groups: Vec<Group>,
    group_of: PerNode<usize>,
    decisions: &mut Vec<FusionRecord>,
) -> (Vec<Group>, PerNode<usize>) {
    let mut read_elsewhere = vec![false; groups.len()];
    for (n, node) in graph.enumerate() {
        for read in node.reads() {
            if let BufferName::Node(p) = read
                && group_of[p] != group_of[n]
            {
                read_elsewhere[group_of[p]] = true;
            }
        }
    }
    let independent: Vec<usize> = (0..groups.len())
        .filter(|&g| matches!(groups[g].kind, LoopKind::Pointwise { .. }) && !read_elsewhere[g])
        .collect();
    let Some(&last) = independent.last() else { return (groups, group_of) };
    let writes = |h: usize| -> Vec<usize> { groups[h].members.iter().filter_map(|&m| graph[m].into_input).collect() };
    let reads_written = |g: usize| {
        let written: Vec<usize> = (g + 1..=last).flat_map(writes).collect();
        groups[g]
            .members
            .iter()
            .flat_map(|&m| graph[m].reads())
            .any(|b| matches!(b, BufferName::Input(i) if written.contains(&i)))
    };
    let moved: Vec<usize> =
        independent[..independent.len() - 1].iter().copied().filter(|&g| !reads_written(g)).collect();
    if moved.is_empty() {
        return (groups, group_of);
    }
    let names = |g: &Group| -> Vec<String> { g.members.iter().map(|&m| graph[m].origin_name.clone()).collect() };
    for &g in &moved {
        let first = groups[g].members[0];
        decisions.push(FusionRecord {
            node: format!("{} ({})", graph[first].origin_name, BufferName::Node(first)),
            group_nodes: names(&groups[last]),
            decision: Decision::Fuse(FusionKind::Foreach),
        });
    }
    let mut combined: Vec<Group> = Vec::with_capacity(groups.len() - moved.len());
    let mut parts: Vec<Group> = Vec::with_capacity(moved.len() + 1);
    for (g, group) in groups.into_iter().enumerate() {
        if moved.contains(&g) {
            parts.push(group);
        } else if g == last {
            parts.push(group);
            let members = parts.iter().flat_map(|p| p.members.iter().copied()).collect();
            combined.push(Group { kind: LoopKind::Foreach { parts: std::mem::take(&mut parts) }, members });
        } else {
            combined.push(group);
        }
    }
    let mut group_of = group_of;
    for (g, group) in combined.iter().enumerate() {
        for &m in &group.members {
            group_of[m] = g;
        }
    }
    (combined, group_of)
}

/// The loops a node runs on its own.
fn own_kind(node: &IrNode) -> LoopKind {
    match &node.body {
        NodeBody::Pointwise { .. } => LoopKind::Pointwise { shape: node.shape.clone() },
        NodeBody::Reduction { dim, input_shape, .. } => LoopKind::Reduction { shape: input_shape.clone(), dim: *dim },
        NodeBody::Matmul { .. } | NodeBody::ExternKernel { .. } | NodeBody::Fallback { .. } => LoopKind::Extern,
    }
}

/// The facts a fusion decision needs about node `n` joining `group`.
fn candidate(graph: &LoweredGraph, group: &Group, n: IrId) -> FusionCandidate {
    let node = &graph[n];
    let reads = node
        .loads()
        .iter()
        .filter_map(|load| match load.buffer {
            BufferName::Node(p) if group.members.contains(&p) => Some(GroupRead {
                buffer: load.buffer.to_string(),
                access: access(graph, &group.kind, node, p, &load.index),
            }),
            _ => None,
        })
        .collect();
    FusionCandidate {
        group: group.kind.clone(),
        group_ops: group.members.iter().map(|&m| graph[m].op_name.to_string()).collect(),
        node: node.origin_name.clone(),
        op: node.op_name.to_string(),
        own: own_kind(node),
        reads,
    }
}

/// How `reader` reads node `p`'s buffer at `index` (over the reader's iteration space), were it
/// in a group of kind `group`.
fn access(graph: &LoweredGraph, group: &LoopKind, reader: &IrNode, p: IrId, index: &Affine) -> Access {
    let producer = &graph[p];
    let (full, dim) = match group {
        LoopKind::Pointwise { shape } => (shape.as_slice(), None),
        LoopKind::Reduction { shape, dim } => (shape.as_slice(), Some(*dim)),
        LoopKind::Extern | LoopKind::Foreach { .. } => return Access::Other,
    };
    // A per-row value is computed once per row, outside the loops over the row's elements, so it
    // cannot take an element's value from a register, even where a row has a single element.
    let per_row = |n: &IrNode| dim.is_some() && !matches!(n.body, NodeBody::Reduction { .. }) && n.shape != full;
    let per_element = |n: &IrNode| !matches!(n.body, NodeBody::Reduction { .. }) && !per_row(n);
    if per_row(reader) && per_element(producer) {
        return Access::Other;
    }
    let (Some(read), Some(written)) =
        (embed(index, reader.iteration_shape(), full, dim), store_index(producer, full, dim))
    else {
        return Access::Other;
    };
    if read != written {
        return Access::Other;
    }
    let row_value = dim.is_some_and(|d| full[d] != 1 && written.coeffs[d] == 0);
    if row_value { Access::RowValue } else { Access::SameElement }
}

/// Where a group member stores its value, over the group's coordinates: elements at their dense
/// position, per-row values at their row's position.
fn store_index(node: &IrNode, full: &[usize], dim: Option<usize>) -> Option<Affine> {
    let own = match node.body {
        NodeBody::Reduction { .. } => {
            let d = dim?;
            let mut keep = full.to_vec();
            keep[d] = 1;
            return Some(Affine::contiguous(&keep));
        }
        _ => Affine::contiguous(&node.shape),
    };
    embed(&own, &node.shape, full, dim)
}

/// An index over a node's own iteration space rewritten over the group's: the same space, or a
/// row space missing the reduced dimension.
fn embed(index: &Affine, space: &[usize], full: &[usize], dim: Option<usize>) -> Option<Affine> {
    if space == full {
        return Some(index.clone());
    }
    let d = dim?;
    if !is_row_shape(space, full, d) {
        return None;
    }
    if space.len() == full.len() {
        let mut keep = index.clone();
        keep.coeffs[d] = 0;
        Some(keep)
    } else {
        Some(index.with_dim_inserted(d))
    }
}

/// Checks a policy's "fuse" against the facts, so that a wrong policy fails loudly instead of
/// generating a wrong kernel.
fn check_legal(c: &FusionCandidate, kind: FusionKind) -> Result<()> {
    let legal = match can_fuse(c) {
        Decision::Fuse(k) => k == kind,
        Decision::Refuse(_) => false,
    };
    if legal {
        return Ok(());
    }
    Err(Error::Backend {
        backend: "inductor".into(),
        message: format!(
            "the fusion policy fused {} ({}) into [{}] as {kind:?}, which cannot work: the kernel is a {} and the reads \
             are {:?}",
            c.node,
            c.own,
            c.group_ops.join(", "),
            c.group,
            c.reads
        ),
    })
}

/// Which nodes' outputs must be written to memory: those read by another group, outputs, and
/// writes into graph inputs.
fn stored_buffers(graph: &LoweredGraph, group_of: &PerNode<usize>) -> PerNode<bool> {
    let mut stored = PerNode::filled(graph.nodes.len(), false);
    for (n, node) in graph.enumerate() {
        for read in node.reads() {
            if let BufferName::Node(p) = read
                && group_of[p] != group_of[n]
            {
                stored[p] = true;
            }
        }
    }
    for out in &graph.outputs {
        if let BufferName::Node(p) = out.buffer {
            stored[p] = true;
        }
    }
    for (_, node) in graph.written_inputs() {
        stored[node] = true;
    }
    stored
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(group: LoopKind, own: LoopKind, access: Access) -> FusionCandidate {
        FusionCandidate {
            group,
            group_ops: vec!["add".into()],
            node: "mul".into(),
            op: "mul".into(),
            own,
            reads: vec![GroupRead { buffer: "buf0".into(), access }],
        }
    }

    #[test]
    fn same_space_pointwise_fuses() {
        let shape = vec![4, 8];
        let c =
            candidate(LoopKind::Pointwise { shape: shape.clone() }, LoopKind::Pointwise { shape }, Access::SameElement);
        assert_eq!(can_fuse(&c), Decision::Fuse(FusionKind::Pointwise));
    }

    #[test]
    fn a_transposed_read_is_refused_with_the_buffer_named() {
        let c = candidate(
            LoopKind::Pointwise { shape: vec![4, 4] },
            LoopKind::Pointwise { shape: vec![4, 4] },
            Access::Other,
        );
        let Decision::Refuse(why) = can_fuse(&c) else { panic!() };
        assert!(why.contains("buf0"), "{why}");
    }

    #[test]
    fn row_values_fuse_into_reductions() {
        let group = LoopKind::Reduction { shape: vec![4, 8], dim: 1 };
        let c = candidate(group.clone(), LoopKind::Pointwise { shape: vec![4, 1] }, Access::RowValue);
        assert_eq!(can_fuse(&c), Decision::Fuse(FusionKind::PerRow));
        let c = candidate(group, LoopKind::Pointwise { shape: vec![4, 8] }, Access::RowValue);
        assert_eq!(can_fuse(&c), Decision::Fuse(FusionKind::RowEpilogue));
    }

    #[test]
    fn externs_never_fuse() {
        let c = candidate(LoopKind::Pointwise { shape: vec![4, 8] }, LoopKind::Extern, Access::SameElement);
        assert!(matches!(can_fuse(&c), Decision::Refuse(why) if why.contains("outside generated code")));
    }
}
