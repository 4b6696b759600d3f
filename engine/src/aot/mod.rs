//! AOTAutograd, the stage between capture and the compiler:
//!
//! - **decompositions** (`decompositions.rs`): composite ops replaced by primitives, so that
//!   `softmax` arrives at the compiler as `amax`, `sub`, `exp`, `sum` and `div`;
//! - **the joint graph** (`joint.rs`): for a graph whose inputs require grad, the forward and the
//!   backward traced together, by running autograd's derivative formulas while fx records;
//! - **the partitioner** (`partitioner.rs`, with `min_cut.rs`): the joint graph split into a
//!   forward and a backward graph by a minimum cut that saves the fewest bytes and recomputes cheap
//!   ops (PyTorch's `min_cut_rematerialization_partition`);
//! - **the runtime** (`runtime.rs`): the two compiled halves run as one node of the tape (PyTorch's
//!   `CompiledFunction`).
//!
//! [`aot_module`] does it all for a backend, as `aot_autograd(fw_compiler, bw_compiler)` does;
//! `ENGINE_LOGS=aot_graphs` prints the joint, forward and backward graphs and what is saved.

mod decompositions;
mod joint;
mod min_cut;
mod partitioner;
mod runtime;

pub use decompositions::decompose_op;
pub use joint::{JointGraph, joint_graph};
pub use min_cut::{INFINITE, Network};
pub use partitioner::{Partition, SavedTensor, SavedTensors, ban_reason, partition};
pub use runtime::{AotModule, CompiledFn};

use crate::error::{Error, Result};
use crate::fx::proxy::Tracer;
use crate::fx::{Graph, Interpreter};
use crate::logs::{self, Artifact};
use crate::trace_structured;

// ANCHOR: decompose
/// The same computation as `graph` with every composite op replaced by primitive ops (inside
/// `cond` branches too). Each new node keeps the source location of the composite it came from,
/// and a dynamic graph stays dynamic in the same sizes.
pub fn decompose(graph: &Graph) -> Result<Graph> {
    let tracer = Tracer::with_decompositions(decompose_op);
    let inputs = tracer.placeholders_like(graph);
    let outputs = Interpreter::new(graph.clone()).run(&inputs)?;
    let traced = tracer.finish(&outputs)?;
    if traced.inputs.len() != inputs.len() {
        return Err(Error::Backend {
            backend: "aot".into(),
            message: "a decomposition captured a constant tensor; decompositions must use scalar operands".into(),
        });
    }
    Ok(traced.graph)
}
// ANCHOR_END: decompose

// ANCHOR: min_cut_partition
/// The forward and backward graphs of `forward` (placeholder `i` requiring grad when
/// `requires_grad[i]`): its joint graph traced, then partitioned by a minimum cut. Logged under
/// `ENGINE_LOGS=aot_graphs`, and written to the compile trace (`ENGINE_TRACE`).
pub fn min_cut_partition(forward: &Graph, requires_grad: &[bool]) -> Result<Partition> {
    let joint = joint_graph(forward, requires_grad)?;
    logs::log(Artifact::AotGraphs, || format!("joint graph:\n{}", joint.graph));
    trace_structured::graph("aot_joint_graph", || joint.graph.to_string());
    let partition = partition(joint)?;
    logs::log(Artifact::AotGraphs, || format!("forward graph:\n{}", partition.forward));
    logs::log(Artifact::AotGraphs, || format!("backward graph:\n{}", partition.backward));
    logs::log(Artifact::AotGraphs, || partition.saved.to_string());
    trace_structured::graph("aot_forward_graph", || partition.forward.to_string());
    trace_structured::graph("aot_backward_graph", || format!("{}\n{}", partition.backward, partition.saved));
    Ok(partition)
}
// ANCHOR_END: min_cut_partition

/// A graph whose inputs require grad made trainable, as `aot_autograd(fw_compiler, bw_compiler)`:
/// partitioned, each half handed to its compiler, and the two run as one node of the tape.
pub fn aot_module(
    forward: &Graph,
    requires_grad: &[bool],
    forward_compiler: impl FnOnce(&Graph) -> Result<CompiledFn>,
    backward_compiler: impl FnOnce(&Graph) -> Result<CompiledFn>,
) -> Result<AotModule> {
    let partition = min_cut_partition(forward, requires_grad)?;
    let compiled_forward = forward_compiler(&partition.forward)?;
    let compiled_backward = backward_compiler(&partition.backward)?;
    Ok(AotModule::new(&partition, compiled_forward, compiled_backward))
}
