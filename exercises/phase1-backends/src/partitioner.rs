//! Exercise `partitioner` (deep): a backend for a compiler that runs only some ops, as
//! `torch.fx.passes.infra.partitioner.CapabilityBasedPartitioner` builds them for TensorRT or ONNX
//! Runtime: the graph's supported nodes grouped into partitions, each partition compiled as one
//! graph, and the rest run eagerly.

use std::sync::Arc;

use engine::backends::{Backend, CompiledGraph};
use engine::fx::{Graph, NodeId};
use engine::op::Op;
use engine::{Result, Tensor};

// ANCHOR: partition
/// **Exercise `partitioner` (deep), part 1.** Groups the call nodes of `graph` whose op
/// `supports` accepts into partitions: one `Vec` of node ids per partition, each in increasing
/// order.
///
/// A partition is legal when it can run as **one** call: replace it with a single node that reads
/// every value its nodes read from outside it and produces every value the rest of the graph (or
/// the graph's outputs) reads from it. Do that for every partition at once; the result must still
/// be a graph, with no cycle (no partition that needs a value which itself needs one of the
/// partition's values). A partition need not be connected.
///
/// The goal: every supported call node in exactly one partition, no other node (placeholder or
/// unsupported call) in any, every partition legal, and **as few partitions as possible**. The
/// graph's own node order is one topological order of many; grouping by it is legal but not always
/// fewest, and merging every supported node is fewest but not always legal.
///
/// Judged on graphs drawn from the run's seed (random DAGs of pointwise ops on a few inputs, with
/// branches and joins, and a few graphs made to tell wrong answers apart), with a supported set of
/// op names drawn from the seed too: the grader tests your partitions' legality itself, and
/// compares their number with the fewest possible, which it computes its own way.
///
/// Book: `book/src/phase1/exercises.md`, section "partitioner". Check: `cargo grader check phase1`.
pub fn partition(graph: &Graph, supports: &dyn Fn(&Op) -> bool) -> Vec<Vec<NodeId>> {
    todo!()
}
// ANCHOR_END: partition

// ANCHOR: capability_backend
/// **Exercise `partitioner` (deep), part 2.** A backend for a compiler that runs only the ops
/// `supports` accepts: each partition of [`partition`] is compiled by `compiler` as a graph of its
/// own and run as one call, and every other call node runs eagerly, each in an order that has
/// every value ready before it is read.
#[derive(Clone)]
pub struct CapabilityBackend {
    /// Whether `compiler` can run an op.
    pub supports: Arc<dyn Fn(&Op) -> bool + Send + Sync>,
    /// The compiler of the partitions.
    pub compiler: Arc<dyn Backend>,
}

impl Backend for CapabilityBackend {
    fn name(&self) -> &str {
        "capability"
    }

    /// Compiles each partition of `graph` with the compiler (a graph holding only that partition's
    /// nodes, taking the values it reads from outside as its inputs, with example inputs of their
    /// shapes, dtypes and devices, and returning the values read outside it), and returns something
    /// that runs the whole graph: the partitions through what the compiler returned, the other call
    /// nodes eagerly (`op.apply`, as in `interpreter`), giving the graph's outputs in order. The
    /// graph has static sizes. A graph is built with `Graph::new`, `add_placeholder` (contiguous
    /// strides: `engine::layout::contiguous_strides`), `add_call` and `set_outputs`.
    ///
    /// Judged by running your backend on the seed's graphs with a compiler of the grader's whose
    /// results differ from eager ones by a secret amount per node, as a real backend's may: the
    /// outputs must be the eager ones for the unsupported nodes and the compiler's for the
    /// supported ones, the compiler must be handed exactly your partitions (each supported node
    /// once, no unsupported op), and each compiled partition must run once per call.
    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        todo!()
    }
}
// ANCHOR_END: capability_backend
