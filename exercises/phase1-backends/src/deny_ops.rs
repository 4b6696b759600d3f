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
    // Your fields.
}

impl DenyOps {
    /// A backend refusing the ops named in `ops`.
    pub fn new(ops: &[&str]) -> DenyOps {
        todo!()
    }
}

impl Backend for DenyOps {
    fn name(&self) -> &str {
        "deny_ops"
    }

    /// Fails with [`Error::Backend`] naming the first denied op found and its source line
    /// (`file:line`, from the node's location); otherwise compiles with [`Eager`].
    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        todo!()
    }
}
// ANCHOR_END: deny_ops
