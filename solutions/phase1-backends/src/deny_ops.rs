//! Stretch exercise `deny_ops`: a backend that refuses graphs calling certain ops, with an error
//! naming the op and the learner's source line, as a deployment target without some kernels would.

use engine::backends::{Backend, CompiledGraph, Eager};
use engine::fx::Graph;
use engine::{Error, Result, Tensor};

// ANCHOR: deny_ops
/// **Stretch exercise `deny_ops`.** A backend that refuses any graph calling one of the denied
/// ops (by op name, as graphs print it: `softmax`, `exp`), and otherwise compiles with [`Eager`].
#[derive(Clone, Debug)]
pub struct DenyOps {
    // ANCHOR: solution
    // stub: // Your fields.
    denied: Vec<String>,
    // ANCHOR_END: solution
}

impl DenyOps {
    /// A backend refusing the ops named in `ops`.
    pub fn new(ops: &[&str]) -> DenyOps {
        // ANCHOR: solution
        DenyOps { denied: ops.iter().map(|op| op.to_string()).collect() }
        // ANCHOR_END: solution
    }
}

impl Backend for DenyOps {
    fn name(&self) -> &str {
        "deny_ops"
    }

    /// Fails with [`Error::Backend`] naming the first denied op found and its source line
    /// (`file:line`, from the node's location); otherwise compiles with [`Eager`].
    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        // ANCHOR: solution
        for node in graph.nodes() {
            let Some(op) = node.op() else { continue };
            if self.denied.iter().any(|d| d == op.name()) {
                let place = node.location.map(|l| l.short()).unwrap_or_else(|| "an unknown line".into());
                return Err(Error::Backend {
                    backend: self.name().into(),
                    message: format!(
                        "the graph calls `{}` (node %{}, at {place}), which this backend refuses",
                        op.name(),
                        node.name
                    ),
                });
            }
        }
        Eager.compile(graph, example_inputs)
        // ANCHOR_END: solution
    }
}
// ANCHOR_END: deny_ops
