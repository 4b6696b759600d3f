//! The `inductor` backend, `torch.compile`'s default: decompose, fuse, generate C or CUDA C,
//! compile and run it (see [`crate::inductor`]).

use std::sync::{Arc, Mutex};

use super::{Backend, CompiledGraph};
use crate::aot;
use crate::compile_mode::Mode;
use crate::error::Result;
use crate::fx::Graph;
use crate::inductor::scheduler::FusionPolicy;
use crate::inductor::{CompiledModule, Config, OutputCode, compile_fx};
use crate::tensor::Tensor;

/// Compiles captured graphs with [`compile_fx`]. Clones share the record of output code, so keep
/// a clone to read what was generated:
///
/// ```
/// use engine::{backends::Inductor, dynamo, Tensor};
/// let inductor = Inductor::default();
/// let f = dynamo::compile(|x: Tensor| x.exp()?.sum(-1, false)).backend(inductor.clone());
/// f.call(&Tensor::randn(&[4, 8], 0))?;
/// println!("{}", inductor.output_codes()[0]);
/// # Ok::<(), engine::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Inductor {
    config: Config,
    generated: Arc<Mutex<Vec<OutputCode>>>,
}

impl Inductor {
    /// An Inductor compiling with `config` (fusion decision, printers) instead of the defaults.
    pub fn with_config(config: Config) -> Self {
        Inductor { config, generated: Arc::new(Mutex::new(Vec::new())) }
    }

    /// An Inductor that decides fusions with `policy` instead of the engine's
    /// [`can_fuse`](crate::inductor::scheduler::can_fuse): how a learner's fusion decision is
    /// plugged in.
    pub fn with_fusion_policy(policy: FusionPolicy) -> Self {
        Inductor::with_config(Config { fusion: policy, ..Config::default() })
    }

    /// The output code of every graph compiled so far, oldest first.
    pub fn output_codes(&self) -> Vec<OutputCode> {
        self.generated.lock().expect("output code lock").clone()
    }
}

impl Backend for Inductor {
    fn name(&self) -> &str {
        "inductor"
    }

    fn compile(&self, graph: &Graph, _example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        crate::wires::trip(crate::wires::Wire::InductorBackend);
        let module = compile_fx(graph, &self.config)?;
        self.generated.lock().expect("output code lock").push(module.output_code().clone());
        Ok(Box::new(module))
    }

    /// A mode other than the default replaces the configured one (`torch.compile(mode=...)`
    /// overrides the inductor config it implies).
    fn compile_in_mode(&self, graph: &Graph, inputs: &[Tensor], mode: Mode) -> Result<Box<dyn CompiledGraph>> {
        Inductor { config: self.config_for(mode), generated: self.generated.clone() }.compile(graph, inputs)
    }

    /// The joint graph partitioned, and each half compiled by [`compile_fx`] (fused backward
    /// kernels); both output codes are recorded, forward first.
    fn compile_for_training(
        &self,
        graph: &Graph,
        _inputs: &[Tensor],
        requires_grad: &[bool],
        mode: Mode,
    ) -> Result<Box<dyn CompiledGraph>> {
        let config = self.config_for(mode);
        let compile = |g: &Graph| -> Result<aot::CompiledFn> {
            let module = compile_fx(g, &config)?;
            self.generated.lock().expect("output code lock").push(module.output_code().clone());
            Ok(Arc::new(move |inputs: &[Tensor]| module.run(inputs)))
        };
        Ok(Box::new(aot::aot_module(graph, requires_grad, compile, compile)?))
    }
}

impl Inductor {
    /// The config for `mode`: a mode other than the default replaces the configured one.
    fn config_for(&self, mode: Mode) -> Config {
        Config { mode: if mode == Mode::Default { self.config.mode } else { mode }, ..self.config }
    }
}

/// Inductor's compiled module is a backend's compiled graph.
impl CompiledGraph for CompiledModule {
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        CompiledModule::run(self, inputs)
    }
}
