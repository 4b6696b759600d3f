//! An fx [`Graph`] as the [`Subgraph`] of a higher-order op: the op catalogue sees a branch's
//! input count, output shape and structure; every layer above gets the graph back by `Deref`.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use super::graph::Graph;
use crate::op::{Subgraph, SubgraphBody};

impl crate::op::subgraph::sealed::Sealed for Graph {}

impl SubgraphBody for Graph {
    fn input_count(&self) -> usize {
        self.placeholders().len()
    }

    fn output_shape(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let bindings = self.symbol_bindings(inputs).map_err(|mismatch| mismatch.to_string())?;
        let [output] = self.outputs() else {
            return Err(format!("must return exactly one tensor, got {}", self.outputs().len()));
        };
        Ok(self.node(*output).sym_shape.eval(&bindings).expect("bindings cover the graph's symbols"))
    }

    fn output_dtype(&self) -> crate::dtype::DType {
        self.outputs().first().map(|o| self.node(*o).meta.dtype).unwrap_or_default()
    }

    fn same_as(&self, other: &dyn SubgraphBody) -> bool {
        other.as_any().downcast_ref::<Graph>().is_some_and(|other| self == other)
    }

    fn hash_into(&self, mut state: &mut dyn Hasher) {
        self.hash(&mut state);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl From<Graph> for Subgraph {
    fn from(graph: Graph) -> Subgraph {
        // A subgraph may be run eagerly (a `cond` outside a trace): the dispatcher needs fx.
        super::proxy::register_mode();
        Subgraph::new(Arc::new(graph))
    }
}

impl Deref for Subgraph {
    type Target = Graph;

    fn deref(&self) -> &Graph {
        self.body().as_any().downcast_ref::<Graph>().expect("fx builds every Subgraph from a Graph")
    }
}

impl fmt::Display for Subgraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
