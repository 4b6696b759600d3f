//! Subgraphs held by higher-order ops (`cond`), the analogue of the `GraphModule` attributes
//! (`true_graph_0`) that `torch.cond` nodes point at.
//!
//! The op catalogue sits below fx, so it cannot name [`fx::Graph`](crate::fx::Graph): it holds a
//! branch as a [`Subgraph`], which knows only what the catalogue needs (how many inputs the branch
//! takes, its output shape, structural equality and hashing for cache keys). fx implements
//! [`SubgraphBody`] for its graph, builds every `Subgraph` (`From<Graph>`) and derefs one back to
//! the graph.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// What the op catalogue asks of a subgraph; implemented by `fx::Graph` alone. The trait is
/// sealed: every layer above gets a subgraph's fx graph back from it, so a body of another type
/// would have nothing to give back. Build a subgraph from a graph with `Subgraph::from(graph)`;
/// implementing the trait for a type of your own does not compile:
///
/// ```compile_fail
/// #[derive(Debug)]
/// struct MyBody;
/// impl engine::op::SubgraphBody for MyBody {
///     fn input_count(&self) -> usize { 1 }
///     fn output_shape(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> { Ok(inputs[0].to_vec()) }
///     fn same_as(&self, _: &dyn engine::op::SubgraphBody) -> bool { false }
///     fn hash_into(&self, _: &mut dyn std::hash::Hasher) {}
///     fn as_any(&self) -> &dyn std::any::Any { self }
/// }
/// ```
pub trait SubgraphBody: sealed::Sealed + fmt::Debug + Send + Sync + 'static {
    /// How many inputs the subgraph takes.
    fn input_count(&self) -> usize;
    /// The shape of the subgraph's single output for inputs of these shapes, or what is wrong.
    fn output_shape(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String>;
    /// The dtype of the subgraph's output (for the dtypes it was traced with).
    fn output_dtype(&self) -> crate::dtype::DType;
    /// Structural equality with another subgraph (the same ops on the same shapes).
    fn same_as(&self, other: &dyn SubgraphBody) -> bool;
    /// Hashes what [`SubgraphBody::same_as`] compares.
    fn hash_into(&self, state: &mut dyn Hasher);
    /// The concrete type, for the layer that built it to get it back.
    fn as_any(&self) -> &dyn Any;
}

/// What makes [`SubgraphBody`] sealed: a trait only this crate can implement (for `fx::Graph`).
pub(crate) mod sealed {
    /// Implemented by the types that may be a subgraph's body.
    pub trait Sealed {}
}

/// A shared, immutable subgraph of a higher-order op. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Subgraph(Arc<dyn SubgraphBody>);

impl Subgraph {
    /// Wraps a subgraph body; fx's `From<Graph>` is the one caller.
    pub(crate) fn new(body: Arc<dyn SubgraphBody>) -> Self {
        Subgraph(body)
    }

    /// The body, for the layer that built it to downcast.
    pub(crate) fn body(&self) -> &dyn SubgraphBody {
        self.0.as_ref()
    }
}

impl PartialEq for Subgraph {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.same_as(other.0.as_ref())
    }
}

impl Eq for Subgraph {}

impl Hash for Subgraph {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash_into(state);
    }
}
