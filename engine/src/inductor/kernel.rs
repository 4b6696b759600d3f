//! The kernel IR: one fused group as straight-line statements over the loop variables `x` and `r`,
//! the form both printers ([`super::codegen::c`] and [`super::codegen::cuda`]) consume. It plays
//! the part of Inductor's `SIMDKernel` body (the loads, computes and stores it buffers before
//! printing Triton or C++).
//!
//! A pointwise kernel is one loop over `x` with a body of statements. A reduction kernel loops
//! over rows `x`; each row runs [`Phase`]s: loops over the row's elements `r` that accumulate
//! reductions, and per-row statements between them. A foreach kernel runs several pointwise
//! loops, each over its own elements ([`Part`]), in one launch. Values computed inside the kernel
//! pass in temporaries (`tmpN`); only buffers read by other kernels or returned are stored.
//!
//! A kernel that writes a graph input in place (an optimizer's update) reads and writes it
//! through one argument, `in_out_ptrN`, as Inductor's kernels do.

use std::collections::HashMap;
use std::fmt;

use super::index::{Affine, FlatIndex};
use super::ir::{BufferName, IrId, IrNode, LoweredGraph, NodeBody, Operand, PointwiseOp};
use super::scheduler::{Group, KernelId, LoopKind, Schedule, is_row_shape};
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::op::{BinaryOp, ReduceOp};

/// Longest row a persistent reduction keeps in registers (1024 threads, 8 elements each).
pub const PERSISTENT_MAX_ROW: usize = 8192;

/// An operand of a statement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// The temporary `tmpN`.
    Tmp(usize),
    /// A constant.
    Constant(f32),
}

/// One statement of a kernel body.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `tmp = args[arg][index]`
    Load {
        /// The temporary defined.
        tmp: usize,
        /// Which kernel argument is read.
        arg: usize,
        /// Which element.
        index: FlatIndex,
    },
    /// `tmp = op(operands)`
    Compute {
        /// The temporary defined.
        tmp: usize,
        /// The scalar function.
        op: PointwiseOp,
        /// Its operands.
        operands: Vec<Value>,
    },
    /// `args[arg][index] = value`
    Store {
        /// Which kernel argument is written.
        arg: usize,
        /// Which element.
        index: FlatIndex,
        /// What is written.
        value: Value,
    },
}

/// How a reduction combines values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// `acc + v`, starting at 0.
    Sum,
    /// NaN-propagating maximum, starting at -inf.
    Max,
}

/// `tmp = combine over the row of value`: the accumulator `tmp` starts at the identity before
/// the loop and holds the row's result after it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reduce {
    /// The accumulator, a per-row temporary.
    pub tmp: usize,
    /// How values combine.
    pub combine: Combine,
    /// The per-element value combined (defined in the loop's statements).
    pub value: Value,
}

/// One step of a row in a reduction kernel.
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    /// Statements run once per row (on reduced values).
    Row(Vec<Stmt>),
    /// A loop over the row's elements: statements per element, then the reductions they feed.
    /// A statement may appear in several loops (recomputed, or kept in registers by a persistent
    /// kernel); it defines the same temporary each time.
    Loop {
        /// Per-element statements, including stores of per-element outputs.
        stmts: Vec<Stmt>,
        /// Accumulations done per element.
        reductions: Vec<Reduce>,
    },
}

/// One loop of a foreach kernel: `x` runs over this part's own elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    /// The extent of `x` in this loop.
    pub xnumel: usize,
    /// Its statements, as a pointwise kernel's.
    pub stmts: Vec<Stmt>,
}

/// A kernel's loops and statements.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelBody {
    /// One loop over `x`, the flat element index.
    Pointwise(Vec<Stmt>),
    /// Independent pointwise loops run one after another in one launch (Inductor's foreach and
    /// combo kernels): the kernel's `x` covers the parts end to end, so that its range can be
    /// split over threads as one.
    Foreach(Vec<Part>),
    /// A loop over rows `x`, each row running the phases.
    Reduction {
        /// Elements per row: the range of `r`.
        row_len: usize,
        /// Whether the reduced dimension is the innermost one, so a row is contiguous in `r`
        /// (a block of threads can share it) rather than strided (one thread walks it).
        innermost: bool,
        /// Whether a row fits in one thread block's registers (`per_` kernels) rather than being
        /// re-read by each loop (`red_` kernels).
        persistent: bool,
        /// The phases, in order.
        phases: Vec<Phase>,
    },
}

/// A pointer argument of a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelArg {
    /// Its name in the source (`in_ptr0`, `in_out_ptr0`, `out_ptr0`).
    pub name: String,
    /// The memory passed for it (see [`LoweredGraph::memory`]).
    pub buffer: BufferName,
    /// Whether the kernel writes it (an output, or an input it updates in place).
    pub output: bool,
    /// The element type of the buffer: a load widens it to `f32`, a store rounds to it, as
    /// Inductor's generated code upcasts half-precision loads (`codegen_upcast_to_fp32`).
    pub dtype: DType,
    /// How many elements of the buffer the kernel can reach (see
    /// [`LoweredGraph::buffer_elements`]): every index into it is smaller.
    pub elements: usize,
}

/// An op's name as [`crate::op::Op::name`] gives it. (Named so that serde's derive, which reads
/// types as written, does not take `&'static str` for text borrowed from the input: op names are
/// interned when read back.)
type OpName = &'static str;

/// A graph node a kernel computes, for annotations.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// The node's name in the graph.
    pub node: String,
    /// Its op.
    #[serde(with = "super::serde_refs::op_name")]
    pub op: OpName,
    /// The learner's line.
    #[serde(with = "super::serde_refs::location")]
    pub location: Option<SourceLocation>,
}

/// One generated kernel: name, pointer arguments (inputs first), the loop extent and the body.
/// Every kernel also takes `xnumel`, the extent of `x`, at run time.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// `poi_fused_add_relu_mul_0`: kind (`poi`ntwise, `per`sistent or looped `red`uction, `for`each), the
    /// ops fused in the order they first run, and the kernel's position. An op's name is written
    /// without underscores (a custom op `phase3::log_clip` reads `logclip`), so that the name
    /// splits at `_` into exactly its parts.
    pub name: String,
    /// Pointer arguments: inputs, then inputs updated in place, then outputs.
    pub args: Vec<KernelArg>,
    /// The extent of `x` for the traced shapes (elements, rows of a reduction, or the elements of
    /// every part of a foreach kernel).
    pub xnumel: usize,
    /// Loops and statements.
    pub body: KernelBody,
    /// The graph nodes fused into it, in order.
    pub origins: Vec<Origin>,
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Tmp(t) => write!(f, "tmp{t}"),
            Value::Constant(c) => write!(f, "{c:?}"),
        }
    }
}

impl Kernel {
    /// The largest element count any index of the kernel can reach: its largest buffer, or its
    /// iteration space (`xnumel`, times the row length in a reduction; a foreach kernel's
    /// `xnumel` covers every part) when that is larger. Every index the kernel computes, and
    /// every loop variable while it is inside its loop, is below it. Inductor reads the same
    /// bound from the buffer sizes and `sizevars` to choose a kernel's `index_dtype` (see
    /// [`super::codegen::cuda::index_type`]).
    pub fn index_extent(&self) -> usize {
        let iterations = match &self.body {
            KernelBody::Reduction { row_len, .. } => self.xnumel * row_len,
            KernelBody::Pointwise(_) | KernelBody::Foreach(_) => self.xnumel,
        };
        self.args.iter().map(|a| a.elements).fold(iterations, usize::max)
    }

    fn stmt_text(&self, stmt: &Stmt) -> String {
        match stmt {
            Stmt::Load { tmp, arg, index } => format!("tmp{tmp} = {}[{}]", self.args[*arg].name, index.to_c()),
            Stmt::Compute { tmp, op, operands } => {
                let args: Vec<String> = operands.iter().map(ToString::to_string).collect();
                format!("tmp{tmp} = {}({})", op.name(), args.join(", "))
            }
            Stmt::Store { arg, index, value } => format!("{}[{}] = {value}", self.args[*arg].name, index.to_c()),
        }
    }
}

impl fmt::Display for Kernel {
    /// The kernel IR as indented pseudo-code: arguments, loops and statements.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The dtype of each buffer that is not `f32`: where its loads widen and its stores round.
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| match a.dtype {
                DType::F32 => format!("{} = {}", a.name, a.buffer),
                dtype => format!("{} = {}: {dtype}", a.name, a.buffer),
            })
            .collect();
        writeln!(f, "kernel {}({})", self.name, args.join(", "))?;
        match &self.body {
            KernelBody::Pointwise(stmts) => {
                writeln!(f, "  for x in 0..{}:", self.xnumel)?;
                for s in stmts {
                    writeln!(f, "    {}", self.stmt_text(s))?;
                }
            }
            KernelBody::Foreach(parts) => {
                for (i, part) in parts.iter().enumerate() {
                    writeln!(f, "  for x in 0..{} (loop {} of {}):", part.xnumel, i + 1, parts.len())?;
                    for s in &part.stmts {
                        writeln!(f, "    {}", self.stmt_text(s))?;
                    }
                }
            }
            KernelBody::Reduction { row_len, phases, .. } => {
                writeln!(f, "  for x in 0..{} (rows of {row_len}):", self.xnumel)?;
                for phase in phases {
                    match phase {
                        Phase::Row(stmts) => {
                            for s in stmts {
                                writeln!(f, "    {}", self.stmt_text(s))?;
                            }
                        }
                        Phase::Loop { stmts, reductions } => {
                            writeln!(f, "    for r in 0..{row_len}:")?;
                            for s in stmts {
                                writeln!(f, "      {}", self.stmt_text(s))?;
                            }
                            for r in reductions {
                                let combine = if r.combine == Combine::Sum { "sum" } else { "max" };
                                writeln!(f, "      tmp{} = {combine} over r of {}", r.tmp, r.value)?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Builds the kernel for `group`, numbered `id` (see [`Schedule::kernel_ids`]). An extern group (a matmul,
/// a fallback) is a library call, not a kernel: asking for its kernel is an error.
#[track_caller]
pub fn build(graph: &LoweredGraph, schedule: &Schedule, group: &Group, id: KernelId) -> Result<Kernel> {
    let (shape, dim): (&[usize], _) = match &group.kind {
        LoopKind::Pointwise { shape } => (shape, None),
        LoopKind::Reduction { shape, dim } => (shape, Some(*dim)),
        LoopKind::Foreach { .. } => (&[], None),
        LoopKind::Extern => {
            return Err(Error::InvalidArgument {
                op: "kernel::build",
                message: "an extern group (matmul or fallback) is a library call, not a kernel".into(),
                location: SourceLocation::caller(),
            });
        }
    };
    let mut builder = Builder::new(graph, schedule, group, shape, dim);
    let mut body = match (&group.kind, dim) {
        (LoopKind::Foreach { parts }, _) => {
            let mut built = Vec::with_capacity(parts.len());
            for part in parts {
                let LoopKind::Pointwise { shape } = &part.kind else {
                    unreachable!("the horizontal pass puts only pointwise groups into a foreach kernel")
                };
                builder.members = &part.members;
                builder.shape = shape;
                builder.load_tmp.clear();
                built.push(Part { xnumel: shape.iter().product(), stmts: builder.pointwise(&part.members) });
            }
            KernelBody::Foreach(built)
        }
        (_, None) => KernelBody::Pointwise(builder.pointwise(&group.members)),
        (_, Some(d)) => {
            let innermost = shape[d + 1..].iter().all(|&s| s == 1);
            KernelBody::Reduction {
                row_len: shape[d],
                innermost,
                persistent: innermost && shape[d] <= PERSISTENT_MAX_ROW,
                phases: builder.phases(),
            }
        }
    };
    store_unrounded(&mut body, &builder.args);
    let xnumel = match &body {
        KernelBody::Foreach(parts) => parts.iter().map(|p| p.xnumel).sum(),
        _ => shape.iter().enumerate().filter(|&(i, _)| Some(i) != dim).map(|(_, s)| s).product(),
    };
    let prefix = match &body {
        KernelBody::Pointwise(_) => "poi",
        KernelBody::Foreach(_) => "for",
        KernelBody::Reduction { persistent: true, .. } => "per",
        KernelBody::Reduction { .. } => "red",
    };
    // Ops in the order they first run, so the name reads as the computation does; without their
    // own underscores, so that the name splits unambiguously at `_`.
    let mut ops: Vec<String> = Vec::new();
    for &m in &group.members {
        let op = graph[m].op_name.replace('_', "");
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    let origins = group
        .members
        .iter()
        .map(|&m| {
            let n = &graph[m];
            Origin { node: n.origin_name.clone(), op: n.op_name, location: n.location }
        })
        .collect();
    Ok(Kernel { name: format!("{prefix}_fused_{}_{}", ops.join("_"), id.0), args: builder.args, xnumel, body, origins })
}

/// Every statement list of a kernel body.
fn stmt_lists(body: &mut KernelBody) -> Vec<&mut Vec<Stmt>> {
    match body {
        KernelBody::Pointwise(stmts) => vec![stmts],
        KernelBody::Foreach(parts) => parts.iter_mut().map(|p| &mut p.stmts).collect(),
        KernelBody::Reduction { phases, .. } => phases
            .iter_mut()
            .map(|p| match p {
                Phase::Row(stmts) | Phase::Loop { stmts, .. } => stmts,
            })
            .collect(),
    }
}

/// A store of `to_dtype(v)` into a buffer of that dtype stores `v`: the store rounds it the same
/// way, and rounding twice to one dtype is rounding once. So a conversion that only feeds its own
/// store costs one rounding, not a rounding and a widening in the computation and another
/// rounding at the store (what an e4m3 quantization ends with, where each rounding is real work
/// on GPUs without a conversion instruction). The conversion's statement goes when nothing else
/// reads it; a kernel that computes with the rounded value keeps it.
fn store_unrounded(body: &mut KernelBody, args: &[KernelArg]) {
    let mut rounded: HashMap<usize, (DType, Value)> = HashMap::new();
    for stmts in stmt_lists(body) {
        for s in stmts.iter() {
            if let Stmt::Compute { tmp, op: PointwiseOp::ToDtype(dtype), operands } = s
                && *dtype != DType::F32
            {
                rounded.insert(*tmp, (*dtype, operands[0]));
            }
        }
    }
    if rounded.is_empty() {
        return;
    }
    let mut bypassed = Vec::new();
    for stmts in stmt_lists(body) {
        // Only values defined alongside the store (not a row's value stored per element).
        let defined: Vec<usize> = stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Load { tmp, .. } | Stmt::Compute { tmp, .. } => Some(*tmp),
                Stmt::Store { .. } => None,
            })
            .collect();
        for s in stmts.iter_mut() {
            if let Stmt::Store { arg, value, .. } = s
                && let Value::Tmp(t) = *value
                && let Some(&(dtype, unrounded @ Value::Tmp(u))) = rounded.get(&t)
                && args[*arg].dtype == dtype
                && defined.contains(&u)
            {
                *value = unrounded;
                bypassed.push(t);
            }
        }
    }
    let mut used: Vec<usize> = Vec::new();
    if let KernelBody::Reduction { phases, .. } = body {
        for phase in phases.iter() {
            if let Phase::Loop { reductions, .. } = phase {
                used.extend(reductions.iter().filter_map(|r| match r.value {
                    Value::Tmp(t) => Some(t),
                    Value::Constant(_) => None,
                }));
            }
        }
    }
    for stmts in stmt_lists(body) {
        for s in stmts.iter() {
            let values: &[Value] = match s {
                Stmt::Compute { operands, .. } => operands,
                Stmt::Store { value, .. } => std::slice::from_ref(value),
                Stmt::Load { .. } => &[],
            };
            used.extend(values.iter().filter_map(|v| match v {
                Value::Tmp(t) => Some(*t),
                Value::Constant(_) => None,
            }));
        }
    }
    for stmts in stmt_lists(body) {
        stmts.retain(|s| !matches!(s, Stmt::Compute { tmp, .. } if bypassed.contains(tmp) && !used.contains(tmp)));
    }
}

/// Where a member's value lives while the kernel runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// One value per element of the iteration space.
    Element,
    /// One value per row.
    Row,
}

struct Builder<'a> {
    graph: &'a LoweredGraph,
    schedule: &'a Schedule,
    members: &'a [IrId],
    shape: &'a [usize],
    dim: Option<usize>,
    args: Vec<KernelArg>,
    /// The temporary holding each member's value.
    tmp_of: HashMap<IrId, usize>,
    /// The temporary holding each distinct load.
    load_tmp: HashMap<(usize, FlatIndex), usize>,
    next_tmp: usize,
}

impl<'a> Builder<'a> {
    /// The builder for `group`, whose arguments are the memory its members read from other
    /// groups and inputs, then the memory they store: inputs first, then inputs written in place
    /// (read and written through one pointer), then outputs.
    fn new(
        graph: &'a LoweredGraph,
        schedule: &'a Schedule,
        group: &'a Group,
        shape: &'a [usize],
        dim: Option<usize>,
    ) -> Self {
        let mut reads: Vec<BufferName> = Vec::new();
        for &m in &group.members {
            for buffer in graph[m].reads() {
                let internal = matches!(buffer, BufferName::Node(p) if group.members.contains(&p));
                let memory = graph.memory(buffer);
                if !internal && !reads.contains(&memory) {
                    reads.push(memory);
                }
            }
        }
        let writes: Vec<BufferName> =
            group.members.iter().filter(|&&m| schedule.stored[m]).map(|&m| graph.memory(BufferName::Node(m))).collect();
        let arg = |prefix: &str, k: usize, buffer: BufferName, output: bool| KernelArg {
            name: format!("{prefix}{k}"),
            buffer,
            output,
            dtype: graph.buffer_dtype(buffer),
            elements: graph.buffer_elements(buffer),
        };
        let inputs = reads.iter().filter(|b| !writes.contains(b));
        let in_outs = writes.iter().filter(|b| reads.contains(b));
        let outputs = writes.iter().filter(|b| !reads.contains(b));
        let args = (inputs.enumerate().map(|(k, &b)| arg("in_ptr", k, b, false)))
            .chain(in_outs.enumerate().map(|(k, &b)| arg("in_out_ptr", k, b, true)))
            .chain(outputs.enumerate().map(|(k, &b)| arg("out_ptr", k, b, true)))
            .collect();
        Builder {
            graph,
            schedule,
            members: &group.members,
            shape,
            dim,
            args,
            tmp_of: HashMap::new(),
            load_tmp: HashMap::new(),
            next_tmp: 0,
        }
    }

    fn fresh(&mut self) -> usize {
        self.next_tmp += 1;
        self.next_tmp - 1
    }

    fn arg_of(&self, buffer: BufferName) -> usize {
        let memory = self.graph.memory(buffer);
        self.args.iter().position(|a| a.buffer == memory).expect("every buffer read or written has an argument")
    }

    /// The statements of a pointwise loop computing and storing `members`.
    fn pointwise(&mut self, members: &[IrId]) -> Vec<Stmt> {
        let (mut stmts, mut emitted) = (Vec::new(), Vec::new());
        for &m in members {
            self.emit(m, &mut stmts, &mut emitted);
            self.store(m, &mut stmts);
        }
        stmts
    }

    fn node(&self, m: IrId) -> &'a IrNode {
        &self.graph[m]
    }

    fn scope(&self, m: IrId) -> Scope {
        let node = self.node(m);
        match (&node.body, self.dim) {
            (NodeBody::Reduction { .. }, _) => Scope::Row,
            (_, Some(d)) if node.shape != self.shape && is_row_shape(&node.shape, self.shape, d) => Scope::Row,
            _ => Scope::Element,
        }
    }

    /// An index over the member's own iteration space, as the kernel's loop variables compute it.
    fn flat(&self, index: &Affine, space: &[usize]) -> FlatIndex {
        let embedded = match self.dim {
            Some(d) if space != self.shape => {
                if space.len() == self.shape.len() {
                    let mut keep = index.clone();
                    keep.coeffs[d] = 0;
                    keep
                } else {
                    index.with_dim_inserted(d)
                }
            }
            _ => index.clone(),
        };
        FlatIndex::new(&embedded, self.shape, self.dim)
    }

    /// Appends the statements computing member `m` (and, for element members, the element
    /// members it needs that are not yet in `emitted`) to `out`. Reductions are not emitted
    /// here: their accumulation belongs to a loop, their value to the rows after it.
    fn emit(&mut self, m: IrId, out: &mut Vec<Stmt>, emitted: &mut Vec<IrId>) -> Value {
        if emitted.contains(&m) || (self.scope(m) == Scope::Row && self.tmp_of.contains_key(&m)) {
            return Value::Tmp(self.tmp_of[&m]);
        }
        let node = self.node(m);
        let NodeBody::Pointwise { op, operands } = &node.body else {
            unreachable!("reductions are emitted by their phase")
        };
        let values: Vec<Value> = operands
            .iter()
            .map(|operand| match operand {
                Operand::Constant(c) => Value::Constant(*c),
                Operand::Load(load) => match load.buffer {
                    BufferName::Node(p) if self.members.contains(&p) => {
                        if self.scope(p) == Scope::Element {
                            self.emit(p, out, emitted)
                        } else {
                            Value::Tmp(self.tmp_of[&p])
                        }
                    }
                    buffer => {
                        let index = self.flat(&load.index, node.iteration_shape());
                        self.load(buffer, index, out)
                    }
                },
            })
            .collect();
        // A copy of a value the kernel holds (a `copy_` of an update) is that value: no statement.
        if let (PointwiseOp::Copy, [Value::Tmp(t)]) = (op, values.as_slice()) {
            self.tmp_of.insert(m, *t);
            emitted.push(m);
            return Value::Tmp(*t);
        }
        let tmp = *self.tmp_of.entry(m).or_insert_with(|| {
            self.next_tmp += 1;
            self.next_tmp - 1
        });
        out.push(Stmt::Compute { tmp, op: op.clone(), operands: values });
        emitted.push(m);
        Value::Tmp(tmp)
    }

    fn load(&mut self, buffer: BufferName, index: FlatIndex, out: &mut Vec<Stmt>) -> Value {
        let arg = self.arg_of(buffer);
        let key = (arg, index.clone());
        let (tmp, new) = match self.load_tmp.get(&key) {
            Some(&t) => (t, false),
            None => {
                let t = self.fresh();
                self.load_tmp.insert(key, t);
                (t, true)
            }
        };
        let already_here = !new && out.iter().any(|s| matches!(s, Stmt::Load { tmp: t, .. } if *t == tmp));
        if !already_here {
            out.push(Stmt::Load { tmp, arg, index });
        }
        Value::Tmp(tmp)
    }

    /// Appends the store of member `m` when its buffer must be in memory.
    fn store(&self, m: IrId, out: &mut Vec<Stmt>) {
        if !self.schedule.stored[m] {
            return;
        }
        let node = self.node(m);
        let own = match self.scope(m) {
            Scope::Row => {
                let mut keep = self.shape.to_vec();
                keep[self.dim.expect("row values exist in reductions")] = 1;
                self.flat(&Affine::contiguous(&keep), &keep)
            }
            Scope::Element => self.flat(&Affine::contiguous(&node.shape), &node.shape),
        };
        out.push(Stmt::Store { arg: self.arg_of(BufferName::Node(m)), index: own, value: Value::Tmp(self.tmp_of[&m]) });
    }

    /// The number of row loops that must finish before member `m`'s value exists.
    fn level(&self, m: IrId, memo: &mut HashMap<IrId, usize>) -> usize {
        if let Some(&l) = memo.get(&m) {
            return l;
        }
        let node = self.node(m);
        let inputs = node
            .reads()
            .into_iter()
            .filter_map(|b| match b {
                BufferName::Node(p) if self.members.contains(&p) => Some(self.level(p, memo)),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let level = if matches!(node.body, NodeBody::Reduction { .. }) { inputs + 1 } else { inputs };
        memo.insert(m, level);
        level
    }

    /// The phases of a reduction kernel: for each level, the per-row statements whose inputs
    /// are ready, then the loop that computes what the next level needs.
    fn phases(&mut self) -> Vec<Phase> {
        let mut memo = HashMap::new();
        let levels: Vec<usize> = self.members.iter().map(|&m| self.level(m, &mut memo)).collect();
        let row_len = self.shape[self.dim.expect("reduction kernels have a reduced dim")];
        let top = levels.iter().copied().max().unwrap_or(0);
        let mut phases = Vec::new();
        let mut accumulators: HashMap<IrId, (usize, ReduceOp)> = HashMap::new();
        for level in 0..=top {
            let mut row = Vec::new();
            for (&m, &l) in self.members.iter().zip(&levels) {
                if l != level || self.scope(m) != Scope::Row {
                    continue;
                }
                match self.node(m).body {
                    NodeBody::Reduction { .. } => {
                        let (acc, kind) = accumulators[&m];
                        let tmp = if kind == ReduceOp::Mean {
                            let t = self.fresh();
                            row.push(Stmt::Compute {
                                tmp: t,
                                op: PointwiseOp::Binary(BinaryOp::Div),
                                operands: vec![Value::Tmp(acc), Value::Constant(row_len as f32)],
                            });
                            t
                        } else {
                            acc
                        };
                        self.tmp_of.insert(m, tmp);
                    }
                    _ => {
                        self.emit(m, &mut row, &mut Vec::new());
                    }
                }
                self.store(m, &mut row);
            }
            if !row.is_empty() {
                phases.push(Phase::Row(row));
            }
            let mut stmts = Vec::new();
            let mut emitted = Vec::new();
            let mut reductions = Vec::new();
            for (&m, &l) in self.members.iter().zip(&levels) {
                match &self.node(m).body {
                    NodeBody::Reduction { kind, input, input_shape, .. } if l == level + 1 => {
                        let value = match input.buffer {
                            BufferName::Node(p) if self.members.contains(&p) => self.emit(p, &mut stmts, &mut emitted),
                            buffer => {
                                let index = self.flat(&input.index, input_shape);
                                self.load(buffer, index, &mut stmts)
                            }
                        };
                        let acc = self.fresh();
                        accumulators.insert(m, (acc, *kind));
                        let combine = if *kind == ReduceOp::Max { Combine::Max } else { Combine::Sum };
                        reductions.push(Reduce { tmp: acc, combine, value });
                    }
                    NodeBody::Pointwise { .. }
                        if l == level && self.scope(m) == Scope::Element && self.schedule.stored[m] =>
                    {
                        self.emit(m, &mut stmts, &mut emitted);
                        self.store(m, &mut stmts);
                    }
                    _ => {}
                }
            }
            if !stmts.is_empty() || !reductions.is_empty() {
                phases.push(Phase::Loop { stmts, reductions });
            }
        }
        phases
    }
}
