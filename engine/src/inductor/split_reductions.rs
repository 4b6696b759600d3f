//! Split reductions, the analogue of TorchInductor's `Reduction.create` choosing `num_splits` and
//! building two layers with `create_multilayer` (`ir.py`): a reduction with too few outputs to keep
//! a GPU busy and a long reduced dimension becomes two reductions. The first computes `parts`
//! partial results per output, each over one chunk of the reduced range, so it has many outputs
//! and therefore many blocks or threads; the second reduces the partials.
//!
//! A loss's mean over 2 M elements is one row: one block of threads reads all 8 MB while the other
//! multiprocessors idle. Split 256 ways, 256 blocks read 32 KB each, and one small block adds up
//! 256 partials. A bias gradient (a sum over the batch of `[4096, 2048]`) has 2048 outputs, one
//! thread each, walking 4096 elements apiece; split 64 ways, 131 072 threads walk 64 each.
//!
//! The pass rewrites the loop-level IR between lowering and scheduling; nothing after it knows.
//! A reduction of `length` elements along `dim`, split into `parts` chunks of
//! `chunk = length / parts`, becomes:
//!
//! - the partials: the same reduction over an iteration space whose `dim` is split into
//!   `[parts, chunk]` (an index `k·i` becomes `k·chunk·p + k·j`), reducing the chunk dimension
//!   into an `f32` buffer, whatever the output's dtype: partial results keep their precision, as
//!   the kernels accumulate in `f32`;
//! - the total: the same reduction over the partials along `dim`, into the original node's buffer.
//!
//! Sum, mean and max, all the engine's reductions, split this way: a sum of partial sums, a max of
//! partial maxima, a mean of partial means (the mean, as every chunk has the same length).
//!
//! The IR has no masked loads, so a last chunk cannot stop short at the row's end (Inductor masks
//! it). Where `parts` does not divide the length, the `length % parts` elements left over at the
//! end of each row are reduced by a third reduction, and a pointwise node combines it with the
//! total (`add`, `maximum`); a mean's layers are then sums, and a last node divides by the whole
//! length. The heuristic prefers a divisor ([`parts`]), which needs neither.
//!
//! The pointwise nodes that compute a split reduction's input over the same elements (a ReLU's
//! gradient before a bias gradient) are re-expressed over the split iteration space as well, so
//! that the scheduler still fuses them into the partials' kernel: their buffers keep their bytes,
//! only the loops over them are shaped `[parts, chunk]`. Not for a split with a remainder, whose
//! partials do not cover every element those nodes compute.
//!
//! When to split is the target's to say ([`SplitRule`]): on a GPU, when the outputs leave
//! multiprocessors idle; not on the CPU, where it measured slower for outer reductions and
//! immaterial elsewhere (bench/NOTES-training.md). [`Config::split_reductions`](super::Config)
//! overrides it: tests force every possible split on the CPU so that the C code and the
//! interpreter run the split form.

use std::collections::HashMap;
use std::fmt;

use super::config::SplitReductions;
use super::index::Affine;
use super::ir::{BufferName, FallbackArg, IrId, IrNode, Load, LoweredGraph, NodeBody, Operand, PointwiseOp};
use super::kernel::PERSISTENT_MAX_ROW;
use super::scheduler;
use crate::dtype::DType;
use crate::op::{BinaryOp, ReduceOp};

/// Blocks per multiprocessor a split innermost reduction aims for (its kernels run one block per
/// row).
pub const BLOCKS_PER_SM: usize = 2;

/// Threads per multiprocessor a split outer reduction aims for (its kernels run one thread per
/// output): half of what an H100's multiprocessor holds.
pub const THREADS_PER_SM: usize = 1024;

/// Fewest elements a chunk of a split innermost reduction has: a block of threads' worth.
pub const MIN_INNER_CHUNK: usize = 1024;

/// Shortest reduced dimension of an outer reduction worth splitting.
pub const MIN_OUTER_LENGTH: usize = 256;

/// Which reductions are split, and into how many parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitRule {
    /// None.
    Never,
    /// Every reduction of four elements or more, into the divisor of its length nearest its
    /// square root, or that root with a remainder: what tests force, so that small shapes run the
    /// split form.
    Always,
    /// Those that would leave a GPU of `multiprocessors` multiprocessors idle (see [`parts`]).
    FillGpu {
        /// The GPU's multiprocessors (132 on an H100 SXM).
        multiprocessors: usize,
    },
}

impl SplitRule {
    /// The rule `setting` asks for, where `target` is the target's own (used for
    /// [`SplitReductions::Auto`]).
    pub fn of(setting: SplitReductions, target: SplitRule) -> SplitRule {
        match setting {
            SplitReductions::Auto => target,
            SplitReductions::Never => SplitRule::Never,
            SplitReductions::Always => SplitRule::Always,
        }
    }
}

/// One reduction split in two, as the fusion log prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The reduction's node in the graph (`mean`).
    pub node: String,
    /// Its outputs.
    pub outputs: usize,
    /// The elements reduced into each.
    pub length: usize,
    /// Partial results per output.
    pub parts: usize,
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Split { node, outputs, length, parts } = self;
        let (partials, chunk, remainder) = (outputs * parts, length / parts, length % parts);
        write!(
            f,
            "split {node}: {outputs} output(s) of {length} elements each → {partials} partial results of {chunk} elements"
        )?;
        if remainder > 0 {
            write!(f, " and {outputs} of the {remainder} left over")?;
        }
        write!(f, ", then {outputs} of {parts}")
    }
}

/// How many partial results per output a reduction over `input_shape` along `dim` gets under
/// `rule`; `None` to leave it whole.
///
/// On a GPU ([`SplitRule::FillGpu`]) the wanted number follows how the reduction's kernel is
/// launched (`codegen::cuda::launch`): an innermost reduction runs a block per row, so it aims at
/// [`BLOCKS_PER_SM`] blocks per multiprocessor, in chunks of at least [`MIN_INNER_CHUNK`], and is
/// split only when its rows are too long for one persistent block; an outer reduction runs a thread
/// per output, so it aims at [`THREADS_PER_SM`] threads per multiprocessor, but at no more parts
/// than the square root of the length (the second layer then walks as far as each thread of the
/// first). Either way `parts` is the divisor of the length nearest the wanted number, within a
/// factor of two; with none there, the wanted number itself, and the remainder is reduced apart
/// (see [`split_reductions`]).
pub fn parts(rule: SplitRule, input_shape: &[usize], dim: usize) -> Option<usize> {
    let length = input_shape[dim];
    let outputs: usize = input_shape.iter().enumerate().filter(|&(d, _)| d != dim).map(|(_, s)| s).product();
    if outputs == 0 || length < 4 {
        return None;
    }
    let innermost = input_shape[dim + 1..].iter().all(|&s| s == 1);
    let wanted = match rule {
        SplitRule::Never => return None,
        SplitRule::Always => {
            let root = length.isqrt();
            return Some(nearest_divisor(length, root, 1..length).unwrap_or(root));
        }
        SplitRule::FillGpu { multiprocessors } if innermost => {
            let blocks = BLOCKS_PER_SM * multiprocessors;
            if outputs >= blocks || length <= PERSISTENT_MAX_ROW {
                return None;
            }
            blocks.div_ceil(outputs).min(length / MIN_INNER_CHUNK)
        }
        SplitRule::FillGpu { multiprocessors } => {
            let threads = THREADS_PER_SM * multiprocessors;
            if 2 * outputs >= threads || length < MIN_OUTER_LENGTH {
                return None;
            }
            threads.div_ceil(outputs).min(length.isqrt())
        }
    };
    if wanted < 2 {
        return None;
    }
    Some(nearest_divisor(length, wanted, wanted.div_ceil(2)..2 * wanted + 1).unwrap_or(wanted))
}

/// The divisor of `length` in `range` (and strictly between 1 and `length`) nearest `wanted`.
/// Forced splits ([`SplitRule::Always`]) take the one nearest the square root, anywhere.
fn nearest_divisor(length: usize, wanted: usize, range: std::ops::Range<usize>) -> Option<usize> {
    (range.start.max(2)..range.end.min(length)).filter(|d| length.is_multiple_of(*d)).min_by_key(|d| d.abs_diff(wanted))
}

/// Splits the reductions of `graph` that `rule` picks, each into its partials and its total (see
/// the module comment), and re-expresses the pointwise nodes that feed each over the split
/// iteration space. Returns the graph and one record per split.
pub fn split_reductions(graph: LoweredGraph, rule: SplitRule) -> (LoweredGraph, Vec<Split>) {
    let chosen: HashMap<IrId, usize> = graph
        .enumerate()
        .filter_map(|(id, node)| match &node.body {
            NodeBody::Reduction { input_shape, dim, .. } => parts(rule, input_shape, *dim).map(|p| (id, p)),
            _ => None,
        })
        .collect();
    if chosen.is_empty() {
        return (graph, Vec::new());
    }
    // The pointwise nodes re-expressed over a split iteration space, and how: only for splits
    // without a remainder, whose partials cover every element the producers compute.
    let mut reshaped: HashMap<IrId, Reexpressed> = HashMap::new();
    for (id, node) in graph.enumerate() {
        if let (Some(&parts), NodeBody::Reduction { input, input_shape, dim, .. }) = (chosen.get(&id), &node.body)
            && input_shape[*dim].is_multiple_of(parts)
        {
            let split = Reexpressed { space: split_shape(input_shape, *dim, parts), how: How::SplitDim(*dim, parts) };
            let index = split.index(&input.index, input_shape);
            reexpress_producer(&graph, input.buffer, &index, input_shape, &split, &mut reshaped);
        }
    }
    keep_other_fusions(&graph, &chosen, &unsplit_groups(&graph), &mut reshaped);
    // Each node's id in the new graph: a split reduction's is its last layer's.
    let mut new_id: Vec<IrId> = Vec::with_capacity(graph.nodes.len());
    let mut nodes: Vec<IrNode> = Vec::with_capacity(graph.nodes.len() + chosen.len());
    let mut splits = Vec::new();
    for (id, node) in graph.enumerate() {
        let mut node = node.clone();
        rename(&mut node.body, &new_id);
        if let (Some(reexpressed), NodeBody::Pointwise { operands, .. }) = (reshaped.get(&id), &mut node.body) {
            for operand in operands {
                if let Operand::Load(load) = operand {
                    load.index = reexpressed.index(&load.index, &graph[id].shape);
                }
            }
            node.shape = reexpressed.space.clone();
        }
        match (chosen.get(&id), &node.body) {
            (Some(&parts), NodeBody::Reduction { input_shape, dim, .. }) => {
                let (length, outputs) = (input_shape[*dim], node.shape.iter().product());
                splits.push(Split { node: node.origin_name.clone(), outputs, length, parts });
                let first = nodes.len();
                nodes.extend(layers(&node, parts, first));
            }
            _ => nodes.push(node),
        }
        new_id.push(IrId(nodes.len() - 1));
    }
    let mut outputs = graph.outputs;
    for view in &mut outputs {
        view.buffer = renamed(view.buffer, &new_id);
    }
    (LoweredGraph { inputs: graph.inputs, nodes, outputs }, splits)
}

/// The nodes a reduction `node` becomes with `parts` partial results per output, numbered from
/// `first`; the last computes the node's value. Without a remainder: the partials, then their
/// total. With one (`parts` does not divide the length), the last `length % parts` elements of
/// each row are reduced apart, and the total combined with them: partials, remainder, total,
/// combination (`add` or `maximum`), and for a mean the division by the whole length, since a
/// mean of unequal chunks' means is not the mean.
fn layers(node: &IrNode, parts: usize, first: usize) -> Vec<IrNode> {
    let NodeBody::Reduction { kind, dim, input, input_shape } = &node.body else {
        unreachable!("only reductions are split")
    };
    let (kind, dim, length) = (*kind, *dim, input_shape[*dim]);
    let (chunk, remainder) = (length / parts, length % parts);
    let with = |shape: Vec<usize>, dtype, body| IrNode { shape, dtype, body, into_input: None, ..node.clone() };
    let layer = if remainder > 0 && kind == ReduceOp::Mean { ReduceOp::Sum } else { kind };
    let mut partial_shape = input_shape.clone();
    partial_shape[dim] = parts;
    let partials = NodeBody::Reduction {
        kind: layer,
        dim: dim + 1,
        input: Load { buffer: input.buffer, index: split_index(&input.index, dim, parts, length) },
        input_shape: split_shape(input_shape, dim, parts),
    };
    let total = |kind| NodeBody::Reduction {
        kind,
        dim,
        input: Load { buffer: BufferName::Node(IrId(first)), index: Affine::contiguous(&partial_shape) },
        input_shape: partial_shape.clone(),
    };
    if remainder == 0 {
        return vec![
            with(partial_shape.clone(), DType::F32, partials),
            with(node.shape.clone(), node.dtype, total(kind)),
        ];
    }
    let mut remainder_shape = input_shape.clone();
    remainder_shape[dim] = remainder;
    let mut index = input.index.clone();
    index.offset += index.coeffs[dim] * parts * chunk;
    if remainder == 1 {
        // A dimension of size 1 has no coefficient (see `Affine`).
        index.coeffs[dim] = 0;
    }
    let rest = NodeBody::Reduction {
        kind: layer,
        dim,
        input: Load { buffer: input.buffer, index },
        input_shape: remainder_shape,
    };
    let mut one = input_shape.clone();
    one[dim] = 1;
    // Both are read at the node's own elements (the remainder's buffer has a size-1 `dim`).
    let value_of = |i: usize| {
        Operand::Load(Load { buffer: BufferName::Node(IrId(first + i)), index: Affine::contiguous(&node.shape) })
    };
    let combine = if kind == ReduceOp::Max { BinaryOp::Maximum } else { BinaryOp::Add };
    let combined = NodeBody::Pointwise { op: PointwiseOp::Binary(combine), operands: vec![value_of(2), value_of(1)] };
    let mut layers = vec![
        with(partial_shape.clone(), DType::F32, partials),
        with(one, DType::F32, rest),
        with(node.shape.clone(), DType::F32, total(layer)),
        with(node.shape.clone(), if kind == ReduceOp::Mean { DType::F32 } else { node.dtype }, combined),
    ];
    if kind == ReduceOp::Mean {
        let operands = vec![value_of(3), Operand::Constant(length as f32)];
        layers.push(with(
            node.shape.clone(),
            node.dtype,
            NodeBody::Pointwise { op: PointwiseOp::Binary(BinaryOp::Div), operands },
        ));
    }
    layers
}

/// A node's loops over another iteration space of as many elements: `space`, and how an index
/// over the node's own shape becomes one over `space`.
#[derive(Clone, Debug)]
struct Reexpressed {
    space: Vec<usize>,
    how: How,
}

#[derive(Clone, Copy, Debug)]
enum How {
    /// The node's own shape with dimension `.0` split into `.1` parts: any index can follow.
    SplitDim(usize, usize),
    /// Another shape of as many elements, for a node whose every load reads its buffer densely in
    /// order (a loss's `(a - b)²` over `[4096, 512]`, flattened for its mean): the same flat
    /// offsets, counted over `space`.
    Flat,
}

impl Reexpressed {
    /// `index`, over `shape` (the node's own), over `space`.
    fn index(&self, index: &Affine, shape: &[usize]) -> Affine {
        match self.how {
            How::SplitDim(dim, parts) => split_index(index, dim, parts, shape[dim]),
            How::Flat => Affine { offset: index.offset, coeffs: Affine::contiguous(&self.space).coeffs },
        }
    }
}

/// Whether `index` reads a buffer densely in row-major order over `shape`, from some offset.
fn is_flat(index: &Affine, shape: &[usize]) -> bool {
    index.coeffs == Affine::contiguous(shape).coeffs
}

/// Re-expresses over `split.space` the pointwise node that writes `buffer`, when its reader reads
/// it at its own elements there (`index`, the reader's load over the split space), and then the
/// pointwise nodes it reads the same way: so that the scheduler fuses the chain into the partials'
/// kernel. A node of the reduction's own input shape `space` follows the split dimension; one of
/// another shape only when all its loads are dense (see [`How::Flat`]). Nodes written into an
/// input, or re-expressed already (for another split), are left alone: their readers read memory.
fn reexpress_producer(
    graph: &LoweredGraph,
    buffer: BufferName,
    index: &Affine,
    space: &[usize],
    split: &Reexpressed,
    reshaped: &mut HashMap<IrId, Reexpressed>,
) {
    let BufferName::Node(p) = buffer else { return };
    let producer = &graph[p];
    let NodeBody::Pointwise { operands, .. } = &producer.body else { return };
    if *index != Affine::contiguous(&split.space) || producer.into_input.is_some() || reshaped.contains_key(&p) {
        return;
    }
    let loads = || operands.iter().filter_map(|o| if let Operand::Load(l) = o { Some(l) } else { None });
    let how = if producer.shape == space {
        split.how
    } else if loads().all(|l| is_flat(&l.index, &producer.shape))
        && producer.shape.iter().product::<usize>() == split.space.iter().product::<usize>()
    {
        How::Flat
    } else {
        return;
    };
    let reexpressed = Reexpressed { space: split.space.clone(), how };
    for load in loads() {
        let index = reexpressed.index(&load.index, &producer.shape);
        reexpress_producer(graph, load.buffer, &index, space, split, reshaped);
    }
    reshaped.insert(p, reexpressed);
}

/// Leaves in their own shape the re-expressed nodes that would otherwise be cut out of the kernel
/// they share with other nodes in the graph as scheduled without splits (`group_of`): a forward
/// pass's GELU, whose derivative a bias gradient's chain recomputes from the same pre-activation,
/// stays in the forward's kernel. A node stays re-expressed only if every node it reads or is read
/// by in its unsplit kernel is re-expressed over the same space or is a split reduction; nodes in
/// other kernels (and extern calls) pass values through memory anyway. Dropping one can drop its
/// neighbours in turn.
fn keep_other_fusions(
    graph: &LoweredGraph,
    chosen: &HashMap<IrId, usize>,
    group_of: &[usize],
    reshaped: &mut HashMap<IrId, Reexpressed>,
) {
    let mut neighbours: HashMap<IrId, Vec<IrId>> = HashMap::new();
    for (id, node) in graph.enumerate() {
        for buffer in node.reads() {
            if let BufferName::Node(p) = buffer
                && group_of[p.0] == group_of[id.0]
            {
                neighbours.entry(p).or_default().push(id);
                neighbours.entry(id).or_default().push(p);
            }
        }
    }
    loop {
        let moves_along = |p: &IrId, n: &IrId| {
            reshaped.get(n).is_some_and(|re| re.space == reshaped[p].space) || chosen.contains_key(n)
        };
        let dropped: Vec<IrId> = reshaped
            .keys()
            .filter(|p| neighbours.get(p).is_some_and(|ns| ns.iter().any(|n| !moves_along(p, n))))
            .copied()
            .collect();
        if dropped.is_empty() {
            return;
        }
        for p in dropped {
            reshaped.remove(&p);
        }
    }
}

/// Each node's group in the graph as scheduled without splits, with the engine's own fusion
/// decision; every node in a group of its own if scheduling fails (it cannot with that decision).
fn unsplit_groups(graph: &LoweredGraph) -> Vec<usize> {
    let Ok(schedule) = scheduler::schedule(graph, scheduler::can_fuse) else {
        return (0..graph.nodes.len()).collect();
    };
    let mut group_of = vec![0; graph.nodes.len()];
    for (g, group) in schedule.groups.iter().enumerate() {
        for &m in &group.members {
            group_of[m.0] = g;
        }
    }
    group_of
}

/// `shape` with dimension `dim` split into `[parts, shape[dim] / parts]`.
fn split_shape(shape: &[usize], dim: usize, parts: usize) -> Vec<usize> {
    let mut split = shape.to_vec();
    split.splice(dim..=dim, [parts, shape[dim] / parts]);
    split
}

/// `index`, over a space whose dimension `dim` has `length` elements, over the same space with
/// that dimension split into `[parts, length / parts]`: coordinate `i = p·chunk + j` makes the
/// term `k·i` into `k·chunk·p + k·j`.
fn split_index(index: &Affine, dim: usize, parts: usize, length: usize) -> Affine {
    let k = index.coeffs[dim];
    let mut coeffs = index.coeffs.clone();
    coeffs.splice(dim..=dim, [k * (length / parts), k]);
    Affine { offset: index.offset, coeffs }
}

/// A buffer after renumbering: node `n` is now `new_id[n]`.
fn renamed(buffer: BufferName, new_id: &[IrId]) -> BufferName {
    match buffer {
        BufferName::Node(n) => BufferName::Node(new_id[n.0]),
        input => input,
    }
}

/// Renames every buffer `body` reads (see [`renamed`]).
fn rename(body: &mut NodeBody, new_id: &[IrId]) {
    let fix = |buffer: &mut BufferName| *buffer = renamed(*buffer, new_id);
    match body {
        NodeBody::Pointwise { operands, .. } => {
            for operand in operands {
                if let Operand::Load(load) = operand {
                    fix(&mut load.buffer);
                }
            }
        }
        NodeBody::Reduction { input, .. } => fix(&mut input.buffer),
        NodeBody::Matmul { a, b, epilogue } => {
            for view in [a, b].into_iter().chain(epilogue.bias.as_mut()).chain(epilogue.residual.as_deref_mut()) {
                fix(&mut view.buffer);
            }
        }
        NodeBody::ExternKernel { inputs, .. } => inputs.iter_mut().for_each(|view| fix(&mut view.buffer)),
        NodeBody::Fallback { args, .. } => {
            for arg in args {
                if let FallbackArg::Tensor(view) = arg {
                    fix(&mut view.buffer);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: SplitRule = SplitRule::FillGpu { multiprocessors: 132 };

    #[test]
    fn the_training_steps_reductions_split_on_an_h100() {
        // The MSE loss's mean over 2 M elements: 256 blocks of 8192.
        assert_eq!(parts(H100, &[1 << 21], 0), Some(256));
        // Bias gradients, summed over a batch of 4096.
        assert_eq!(parts(H100, &[4096, 2048], 0), Some(64));
        assert_eq!(parts(H100, &[4096, 512], 0), Some(64));
    }

    #[test]
    fn enough_outputs_or_short_rows_stay_whole() {
        // Softmax's rows: 4096 outputs fill the GPU.
        assert_eq!(parts(H100, &[4096, 4096], 1), None);
        // One row that one persistent block holds.
        assert_eq!(parts(H100, &[8192], 0), None);
        // 135 168 columns are as many threads as wanted.
        assert_eq!(parts(H100, &[4096, 135_168], 0), None);
        // A prime length has no divisor to split by: the wanted number, with a remainder.
        assert_eq!(parts(H100, &[1_000_003], 0), Some(264));
        assert_eq!(parts(SplitRule::Never, &[1 << 21], 0), None);
    }

    #[test]
    fn forced_splits_take_the_divisor_nearest_the_square_root_else_the_root() {
        assert_eq!(parts(SplitRule::Always, &[3, 100, 5], 1), Some(10));
        assert_eq!(parts(SplitRule::Always, &[6], 0), Some(2));
        assert_eq!(parts(SplitRule::Always, &[7], 0), Some(2));
        assert_eq!(parts(SplitRule::Always, &[3], 0), None);
        assert_eq!(parts(SplitRule::Always, &[0, 8], 1), None);
    }

    #[test]
    fn a_split_index_addresses_the_same_elements() {
        // A column of a [12, 5] matrix, read along dim 0 split 3 ways: i = 4p + j.
        let index = Affine { offset: 2, coeffs: vec![5, 1] };
        let split = split_index(&index, 0, 3, 12);
        assert_eq!(split.coeffs, vec![20, 5, 1]);
        for p in 0..3 {
            for j in 0..4 {
                assert_eq!(split.coeffs[0] * p + split.coeffs[1] * j, index.coeffs[0] * (4 * p + j));
            }
        }
        assert_eq!(split_shape(&[12, 5], 0, 3), vec![3, 4, 5]);
    }
}
