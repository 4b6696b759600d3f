//! Running a partitioned graph under autograd, the analogue of AOTAutograd's `CompiledFunction`
//! (an `autograd.Function` whose forward runs the compiled forward graph and whose backward runs
//! the compiled backward graph): the forward runs outside the tape, then one node goes on the tape
//! for all its outputs, holding the saved values until backward.

use std::sync::{Arc, Mutex};

use super::partitioner::Partition;
use crate::error::{Error, Result, SourceLocation};
use crate::tensor::Tensor;
use crate::tensor::autograd::{self, Function};

/// A compiled graph as AOT calls it: inputs in placeholder order, outputs in output order.
pub type CompiledFn = Arc<dyn Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync>;

/// A forward and a backward graph, compiled, with the calling convention between them: what a
/// training backend returns for a captured graph whose inputs require grad.
pub struct AotModule {
    forward: CompiledFn,
    backward: CompiledFn,
    convention: Arc<Convention>,
}

/// How the halves talk: the forward returns `outputs` values then the saved ones; the backward
/// takes the saved values and the tangents of the differentiable outputs, and returns the
/// gradients of the primals marked in `gradients`, in order.
struct Convention {
    outputs: usize,
    differentiable: Vec<bool>,
    gradients: Vec<bool>,
}

impl AotModule {
    /// The module running `partition` with its forward and backward graphs compiled as `forward`
    /// and `backward`.
    pub fn new(partition: &Partition, forward: CompiledFn, backward: CompiledFn) -> AotModule {
        let joint = &partition.joint;
        let convention = Convention {
            outputs: joint.forward_outputs,
            differentiable: joint.differentiable.clone(),
            gradients: joint.gradients.iter().map(Option::is_some).collect(),
        };
        AotModule { forward, backward, convention: Arc::new(convention) }
    }

    /// Runs the forward on `inputs` and, when grad mode is on and an input requires grad, puts the
    /// backward on the tape behind the outputs that are differentiable.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let detached: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
        let mut results = autograd::no_grad(|| (self.forward)(&detached))?;
        let saved = results.split_off(self.convention.outputs);
        let backward = CompiledBackward {
            backward: self.backward.clone(),
            convention: self.convention.clone(),
            saved: Mutex::new(Some(saved)),
        };
        Ok(autograd::attach(backward, inputs, results, &self.convention.differentiable))
    }
}

/// The node on the tape: the compiled backward and the values the forward saved for it.
struct CompiledBackward {
    backward: CompiledFn,
    convention: Arc<Convention>,
    saved: Mutex<Option<Vec<Tensor>>>,
}

impl Function for CompiledBackward {
    fn name(&self) -> String {
        "CompiledFunctionBackward".into()
    }

    #[track_caller]
    fn backward(&self, grad_outputs: Vec<Tensor>) -> Result<Vec<Option<Tensor>>> {
        let Some(saved) = self.saved.lock().expect("saved lock").clone() else {
            return Err(Error::Autograd {
                message: "trying to backward through a compiled function a second time: its saved values were \
                          freed by the first backward; pass retain_graph = true to the first one to keep them"
                    .into(),
                location: SourceLocation::caller(),
            });
        };
        // The backward graph was traced with dense saved values and tangents.
        let mut inputs = saved.iter().map(Tensor::with_dense_strides).collect::<Result<Vec<_>>>()?;
        for (g, &differentiable) in grad_outputs.iter().zip(&self.convention.differentiable) {
            if differentiable {
                inputs.push(g.with_dense_strides()?);
            }
        }
        let mut grads = (self.backward)(&inputs)?.into_iter();
        Ok(self.convention.gradients.iter().map(|&has| if has { grads.next() } else { None }).collect())
    }

    fn release(&self) {
        *self.saved.lock().expect("saved lock") = None;
    }
}
