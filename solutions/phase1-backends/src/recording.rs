//! Exercise `recording`: a backend that keeps every graph it is handed, the way one debugs what
//! Dynamo captured with a custom backend that stores `gm.graph`.

use std::sync::{Arc, Mutex};

use engine::backends::{Backend, CompiledGraph, Eager};
use engine::fx::Graph;
use engine::{Result, Tensor};

/// **Exercise `recording`.** A backend that records each graph it compiles, then runs it with
/// [`Eager`]. Clones share one record: keep a clone, hand another to
/// `dynamo::compile(...).backend(...)`, and read the graphs through yours.
#[derive(Clone, Debug, Default)]
pub struct RecordingBackend {
    graphs: Arc<Mutex<Vec<Graph>>>,
}

impl RecordingBackend {
    /// A backend with no graphs recorded yet.
    pub fn new() -> RecordingBackend {
        RecordingBackend::default()
    }

    /// Every graph compiled so far, oldest first.
    pub fn graphs(&self) -> Vec<Graph> {
        self.graphs.lock().expect("no panic while recording").clone()
    }
}

impl Backend for RecordingBackend {
    fn name(&self) -> &str {
        "recording"
    }

    /// Keeps a copy of `graph`, then compiles it with [`Eager`].
    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        self.graphs.lock().expect("no panic while recording").push(graph.clone());
        Eager.compile(graph, example_inputs)
    }
}
