//! Adam with decoupled weight decay, `torch.optim.AdamW` (Loshchilov and Hutter).

use super::{Optimizer, with_grads, write_back};
use crate::error::Result;
use crate::tensor::{Tensor, autograd};

/// `torch.optim.AdamW(params, lr, betas, eps, weight_decay)`: each step `t`,
/// `p = p * (1 - lr * weight_decay)` (the decay acts on the parameter, not through the gradient),
/// `m = beta1 * m + (1 - beta1) * g`, `v = beta2 * v + (1 - beta2) * g^2`, and
/// `p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)`.
pub struct AdamW {
    params: Vec<Tensor>,
    lr: f32,
    betas: (f32, f32),
    eps: f32,
    weight_decay: f32,
    /// Per parameter: its step count and first and second moments (`None` before its first step).
    state: Vec<Option<(u32, Tensor, Tensor)>>,
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
            state: vec![None; params.len()],
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

/// A parameter's first and second moments (`exp_avg`, `exp_avg_sq`).
pub type Moments = (Tensor, Tensor);

/// One AdamW update as a pure function of lists (`_multi_tensor_adamw`): the new parameters and
/// first and second moments from `params`, their `grads`, their moments and their step numbers
/// (1 on a first step, whose moments are zeros).
#[allow(clippy::too_many_arguments)]
pub fn adamw_update(
    params: &[Tensor],
    grads: &[Tensor],
    moments: &[Moments],
    steps: &[u32],
    lr: f32,
    (beta1, beta2): (f32, f32),
    eps: f32,
    weight_decay: f32,
) -> Result<(Vec<Tensor>, Vec<Moments>)> {
    let mut new_params = Vec::with_capacity(params.len());
    let mut new_moments = Vec::with_capacity(params.len());
    for (((p, g), (m, v)), &t) in params.iter().zip(grads).zip(moments).zip(steps) {
        let decayed = p.mul(1.0 - lr * weight_decay)?;
        let m = m.mul(beta1)?.add(&g.mul(1.0 - beta1)?)?;
        let v = v.mul(beta2)?.add(&g.mul(g)?.mul(1.0 - beta2)?)?;
        let (correction1, correction2) = (1.0 - beta1.powi(t as i32), 1.0 - beta2.powi(t as i32));
        let denominator = v.div(correction2)?.sqrt()?.add(eps)?;
        new_params.push(decayed.sub(&m.div(&denominator)?.mul(lr / correction1)?)?);
        new_moments.push((m, v));
    }
    Ok((new_params, new_moments))
}

impl Optimizer for AdamW {
    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn step(&mut self) -> Result<()> {
        let stepped = with_grads(&self.params);
        let mut params = Vec::with_capacity(stepped.len());
        let mut grads = Vec::with_capacity(stepped.len());
        let mut moments = Vec::with_capacity(stepped.len());
        let mut steps = Vec::with_capacity(stepped.len());
        for (i, g) in &stepped {
            let p = self.params[*i].detach();
            let (t, m, v) = match &self.state[*i] {
                Some((t, m, v)) => (*t, m.clone(), v.clone()),
                None => {
                    let zeros = Tensor::zeros(p.shape()).to(p.device())?;
                    (0, zeros.clone(), zeros)
                }
            };
            params.push(p);
            grads.push(g.clone());
            moments.push((m, v));
            steps.push(t + 1);
        }
        let (new_params, new_moments) = autograd::no_grad(|| {
            adamw_update(&params, &grads, &moments, &steps, self.lr, self.betas, self.eps, self.weight_decay)
        })?;
        for (((i, _), (m, v)), t) in stepped.iter().zip(new_moments).zip(&steps) {
            self.state[*i] = Some((*t, m, v));
        }
        let updated: Vec<(usize, Tensor)> = stepped.iter().map(|(i, _)| *i).zip(new_params).collect();
        write_back(&self.params, &updated)
    }
}
