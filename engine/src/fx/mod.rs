//! The graph IR, the analogue of `torch.fx`: a flat list of nodes in execution order
//! (placeholders, op calls) plus the outputs, printable as code or as a table, runnable by an
//! interpreter, built by tracing with symbolic tensors ([`proxy`]), and saved and loaded whole
//! with the tensors it captured ([`export`], as `torch.export`).
//!
//! Sizes may be symbolic ([`symbolic`]): a node's [`Node::sym_shape`] says which of its sizes are
//! written in terms of the graph's size symbols, so that one graph runs for many input shapes.

pub mod export;
mod generalize;
mod graph;
mod interpreter;
mod print;
pub mod proxy;
mod subgraph;
mod sym_rules;
pub mod symbolic;

pub use graph::{Arg, Graph, Node, NodeId, NodeKind, SizeMismatch, Specialization, SymbolInfo};
pub use interpreter::Interpreter;
pub use proxy::{Traced, trace};
pub use symbolic::{SymBindings, SymInt, SymShape, Symbol};
