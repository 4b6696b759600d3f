//! The graph IR, the analogue of `torch.fx`: a flat list of nodes in execution order
//! (placeholders, op calls) plus the outputs, printable as code or as a table, runnable by an
//! interpreter, and built by tracing with symbolic tensors ([`proxy`]).

mod graph;
mod interpreter;
mod print;
pub mod proxy;

pub use graph::{Arg, Graph, Node, NodeId, NodeKind};
pub use interpreter::Interpreter;
