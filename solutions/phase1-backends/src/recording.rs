//! Exercise `recording`: a backend that keeps every graph it is handed, the way one debugs what
//! Dynamo captured with a custom backend that stores `gm.graph`.

use std::sync::{Arc, Mutex};

use engine::backends::{Backend, CompiledGraph, Eager};
use engine::fx::Graph;
use engine::{Result, Tensor};

// ANCHOR: recording
/// **Exercise `recording`.** A backend that records each graph it compiles, then runs it with
/// [`Eager`]. Clones share one record: keep a clone, hand another to
/// `dynamo::compile(...).backend(...)`, and read the graphs through yours.
#[derive(Clone, Debug, Default)]
pub struct RecordingBackend {
    // ANCHOR: solution
    // stub: // Your fields: what must a clone share with the original?
    graphs: Arc<Mutex<Vec<Graph>>>,
    // ANCHOR_END: solution
}

impl RecordingBackend {
    /// A backend with no graphs recorded yet.
    pub fn new() -> RecordingBackend {
        // ANCHOR: solution
        RecordingBackend::default()
        // ANCHOR_END: solution
    }

    /// Every graph compiled so far, oldest first.
    pub fn graphs(&self) -> Vec<Graph> {
        // ANCHOR: solution
        self.graphs.lock().expect("no panic while recording").clone()
        // ANCHOR_END: solution
    }
}

impl Backend for RecordingBackend {
    fn name(&self) -> &str {
        "recording"
    }

    /// Keeps a copy of `graph`, then compiles it with [`Eager`].
    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        // ANCHOR: solution
        self.graphs.lock().expect("no panic while recording").push(graph.clone());
        Eager.compile(graph, example_inputs)
        // ANCHOR_END: solution
    }
}
// ANCHOR_END: recording
