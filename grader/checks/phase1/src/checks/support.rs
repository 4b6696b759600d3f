//! What several checks share: the reference capture of the MLP, and a probe backend whose
//! compile and run behaviour the grader controls.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use engine::backends::{Backend, CompiledGraph, Eager};
use engine::fx::Graph;
use engine::fx::proxy::Tracer;
use engine::{Device, Result, Tensor};

use crate::subject::Mlp;

/// The graph that compiling `mlp.forward` captures for input `x` (traced exactly as
/// `Compiled::call` traces), with the concrete tensor bound to each placeholder.
pub fn capture(mlp: &Mlp, x: &Tensor) -> Result<(Graph, Vec<Tensor>)> {
    let tracer = Tracer::new();
    let output = mlp.forward(&tracer.input(x)?)?;
    let traced = tracer.finish(&[output])?;
    let inputs = traced.inputs.into_iter().map(|t| t.expect("a capture binds every placeholder")).collect();
    Ok((traced.graph, inputs))
}

/// How often a [`Probe`] compiled and ran, shared with the check that made it.
#[derive(Debug, Default)]
pub struct Counts {
    /// Graphs compiled.
    pub compiles: AtomicUsize,
    /// Compiled graphs run.
    pub runs: AtomicUsize,
}

impl Counts {
    /// `(compiles, runs)` so far.
    pub fn get(&self) -> (usize, usize) {
        (self.compiles.load(Ordering::SeqCst), self.runs.load(Ordering::SeqCst))
    }
}

/// A backend that compiles with [`Eager`] and lets the grader observe and shape what happens:
/// it counts compiles and runs, sleeps a time the check chose in each (a secret one, drawn from
/// the run's seed, which the learner's process is not given), can keep the device busy a known
/// time after each run (so a timer that does not wait for the GPU measures too little), and can
/// shift every output by a known offset.
#[derive(Clone, Default)]
pub struct Probe {
    /// Shared counters; keep a clone of the `Arc` to read them.
    pub counts: Arc<Counts>,
    compile_delay: Duration,
    run_delays: Arc<[Duration]>,
    device_work: Option<(Device, Duration)>,
    offset: f32,
}

impl Probe {
    /// A probe that adds nothing: no delays, no offset.
    pub fn new() -> Probe {
        Probe::default()
    }

    /// Each compile sleeps at least `delay`.
    pub fn compile_delay(self, delay: Duration) -> Probe {
        Probe { compile_delay: delay, ..self }
    }

    /// Run `k` sleeps at least `delays[k]` (the last one for every later run).
    pub fn run_delays(self, delays: Vec<Duration>) -> Probe {
        Probe { run_delays: delays.into(), ..self }
    }

    /// After each run, `device` is kept busy for at least `busy` ([`engine::bench::spin`]); the
    /// outputs' values are ready only after that.
    pub fn device_work(self, device: Device, busy: Duration) -> Probe {
        Probe { device_work: Some((device, busy)), ..self }
    }

    /// Every output element is shifted by `offset`.
    pub fn offset(self, offset: f32) -> Probe {
        Probe { offset, ..self }
    }
}

impl Backend for Probe {
    fn name(&self) -> &str {
        "probe"
    }

    fn compile(&self, graph: &Graph, example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        std::thread::sleep(self.compile_delay);
        self.counts.compiles.fetch_add(1, Ordering::SeqCst);
        let inner = Eager.compile(graph, example_inputs)?;
        let (counts, run_delays, device_work, offset) =
            (self.counts.clone(), self.run_delays.clone(), self.device_work, self.offset);
        Ok(Box::new(move |inputs: &[Tensor]| {
            let run = counts.runs.fetch_add(1, Ordering::SeqCst);
            if let Some(&delay) = run_delays.get(run).or(run_delays.last()) {
                std::thread::sleep(delay);
            }
            let outputs = inner.run(inputs)?;
            if let Some((device, busy)) = device_work {
                engine::bench::spin(device, busy)?;
            }
            if offset == 0.0 { Ok(outputs) } else { outputs.iter().map(|t| t.add(offset)).collect() }
        }))
    }
}
