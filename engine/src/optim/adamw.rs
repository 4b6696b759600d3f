//! Adam with decoupled weight decay, `torch.optim.AdamW` (Loshchilov and Hutter).

use std::sync::Mutex;

use super::{Optimizer, new_state, with_grads, write_back};
use crate::error::Result;
use crate::tensor::{Tensor, autograd};

/// `torch.optim.AdamW(params, lr, betas, eps, weight_decay)`: each step `t`,
/// `p = p * (1 - lr * weight_decay)` (the decay acts on the parameter, not through the gradient),
/// `m = beta1 * m + (1 - beta1) * g`, `v = beta2 * v + (1 - beta2) * g^2`, and
/// `p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)`.
///
/// The step count `t` is a tensor, as with PyTorch's `capturable=True`: the bias corrections are
/// computed from it by tensor ops, so a compiled step's graph is the same on every step.
pub struct AdamW {
    params: Vec<Tensor>,
    lr: f32,
    betas: (f32, f32),
    eps: f32,
    weight_decay: f32,
    /// Per parameter, its state (`None` before its first step).
    state: Mutex<Vec<Option<AdamWState>>>,
}

/// One parameter's AdamW state: its step count and its first and second moments (PyTorch's
/// `state["step"]`, `exp_avg` and `exp_avg_sq`).
#[derive(Clone)]
pub struct AdamWState {
    /// Steps taken, a one-element tensor on the parameter's device.
    pub step: Tensor,
    /// The first moment, `exp_avg`.
    pub exp_avg: Tensor,
    /// The second moment, `exp_avg_sq`.
    pub exp_avg_sq: Tensor,
}

impl AdamW {
    /// AdamW over `params` with learning rate `lr` and PyTorch's defaults: betas (0.9, 0.999),
    /// eps 1e-8, weight decay 0.01.
    pub fn new(params: &[Tensor], lr: f32) -> AdamW {
        AdamW {
            params: params.to_vec(),
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-2,
            state: Mutex::new(vec![None; params.len()]),
        }
    }

    /// With these decay rates of the two moments (PyTorch's `betas=`).
    pub fn betas(mut self, beta1: f32, beta2: f32) -> AdamW {
        self.betas = (beta1, beta2);
        self
    }

    /// With `eps` added to the denominator (PyTorch's `eps=`).
    pub fn eps(mut self, eps: f32) -> AdamW {
        self.eps = eps;
        self
    }

    /// With decoupled weight decay `weight_decay` (PyTorch's `weight_decay=`).
    pub fn weight_decay(mut self, weight_decay: f32) -> AdamW {
        self.weight_decay = weight_decay;
        self
    }
}

/// One AdamW update as a pure function of lists (`_multi_tensor_adamw`): the new parameters and
/// states from `params`, their `grads` and their `states` (zeros before a first step).
#[allow(clippy::too_many_arguments)]
pub fn adamw_update(
    params: &[Tensor],
    grads: &[Tensor],
    states: &[AdamWState],
    lr: f32,
    (beta1, beta2): (f32, f32),
    eps: f32,
    weight_decay: f32,
) -> Result<(Vec<Tensor>, Vec<AdamWState>)> {
    // `1 - beta^t` from the step tensor: `beta^t = exp(t ln(beta))`.
    let correction = |t: &Tensor, beta: f32| t.mul(beta.ln())?.exp()?.neg()?.add(1.0);
    let mut new_params = Vec::with_capacity(params.len());
    let mut new_states = Vec::with_capacity(params.len());
    for ((p, g), state) in params.iter().zip(grads).zip(states) {
        let step = state.step.add(1.0)?;
        let decayed = p.mul(1.0 - lr * weight_decay)?;
        let m = state.exp_avg.mul(beta1)?.add(&g.mul(1.0 - beta1)?)?;
        let v = state.exp_avg_sq.mul(beta2)?.add(&g.mul(g)?.mul(1.0 - beta2)?)?;
        let denominator = v.div(&correction(&step, beta2)?)?.sqrt()?.add(eps)?;
        let update = m.div(&correction(&step, beta1)?)?.div(&denominator)?.mul(lr)?;
        new_params.push(decayed.sub(&update)?);
        new_states.push(AdamWState { step, exp_avg: m, exp_avg_sq: v });
    }
    Ok((new_params, new_states))
}

impl Optimizer for AdamW {
    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn step(&self) -> Result<()> {
        let stepped = with_grads(&self.params);
        let mut state = self.state.lock().expect("optimizer state lock");
        let mut params = Vec::with_capacity(stepped.len());
        let mut grads = Vec::with_capacity(stepped.len());
        let mut states = Vec::with_capacity(stepped.len());
        for (i, g) in &stepped {
            let param = &self.params[*i];
            if state[*i].is_none() {
                state[*i] = Some(AdamWState {
                    step: new_state(param, &[], "step")?,
                    exp_avg: new_state(param, param.shape(), "exp_avg")?,
                    exp_avg_sq: new_state(param, param.shape(), "exp_avg_sq")?,
                });
            }
            let p = param.detach();
            states.push(state[*i].clone().expect("made above"));
            params.push(p);
            grads.push(g.clone());
        }
        let (new_params, new_states) = autograd::no_grad(|| {
            adamw_update(&params, &grads, &states, self.lr, self.betas, self.eps, self.weight_decay)
        })?;
        let parts = |s: &[AdamWState]| -> Vec<Tensor> {
            s.iter().flat_map(|s| [s.step.clone(), s.exp_avg.clone(), s.exp_avg_sq.clone()]).collect()
        };
        write_back(&parts(&states), &parts(&new_states))?;
        write_back(&params, &new_params)
    }
}
