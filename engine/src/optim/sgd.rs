//! Stochastic gradient descent with momentum and weight decay, `torch.optim.SGD`.

use std::sync::Mutex;

use super::{Optimizer, new_state, with_grads, write_back};
use crate::error::Result;
use crate::tensor::{Tensor, autograd};

/// `torch.optim.SGD(params, lr, momentum, weight_decay)` (no dampening, no Nesterov): each step
/// `g = grad + weight_decay * p`, then with momentum `buf = momentum * buf + g` (the buffer starts
/// at zeros, so the first step's `buf` is `g`, as PyTorch's) and `g = buf`, then `p = p - lr * g`.
pub struct Sgd {
    params: Vec<Tensor>,
    lr: f32,
    momentum: f32,
    weight_decay: f32,
    /// Per parameter, the momentum buffer: made on its first step with momentum, then written in
    /// place.
    buffers: Mutex<Vec<Option<Tensor>>>,
}

impl Sgd {
    /// Plain SGD over `params` with learning rate `lr` (no momentum, no weight decay).
    pub fn new(params: &[Tensor], lr: f32) -> Sgd {
        Sgd {
            params: params.to_vec(),
            lr,
            momentum: 0.0,
            weight_decay: 0.0,
            buffers: Mutex::new(vec![None; params.len()]),
        }
    }

    /// With momentum `momentum` (PyTorch's `momentum=`).
    pub fn momentum(mut self, momentum: f32) -> Sgd {
        self.momentum = momentum;
        self
    }

    /// With L2 weight decay `weight_decay` added to the gradient (PyTorch's `weight_decay=`).
    pub fn weight_decay(mut self, weight_decay: f32) -> Sgd {
        self.weight_decay = weight_decay;
        self
    }
}

/// One SGD update as a pure function of lists (`_multi_tensor_sgd`): the new parameters and, with
/// momentum, the new momentum buffers, from `params`, their `grads` and their `buffers` (one per
/// parameter with momentum, zeros before the first step; none without).
pub fn sgd_update(
    params: &[Tensor],
    grads: &[Tensor],
    buffers: &[Tensor],
    lr: f32,
    momentum: f32,
    weight_decay: f32,
) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let mut new_params = Vec::with_capacity(params.len());
    let mut new_buffers = Vec::with_capacity(buffers.len());
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        let mut g = if weight_decay != 0.0 { g.add(&p.mul(weight_decay)?)? } else { g.clone() };
        if momentum != 0.0 {
            let buf = buffers[i].mul(momentum)?.add(&g)?;
            new_buffers.push(buf.clone());
            g = buf;
        }
        new_params.push(p.sub(&g.mul(lr)?)?);
    }
    Ok((new_params, new_buffers))
}

impl Optimizer for Sgd {
    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn step(&self) -> Result<()> {
        let stepped = with_grads(&self.params);
        let (params, grads): (Vec<Tensor>, Vec<Tensor>) =
            stepped.iter().map(|(i, g)| (self.params[*i].detach(), g.clone())).unzip();
        let mut state = self.buffers.lock().expect("optimizer state lock");
        let mut buffers = Vec::new();
        if self.momentum != 0.0 {
            for (i, _) in &stepped {
                if state[*i].is_none() {
                    let param = &self.params[*i];
                    state[*i] = Some(new_state(param, param.shape(), "momentum_buffer")?);
                }
                buffers.push(state[*i].clone().expect("made above"));
            }
        }
        let (new_params, new_buffers) =
            autograd::no_grad(|| sgd_update(&params, &grads, &buffers, self.lr, self.momentum, self.weight_decay))?;
        write_back(&buffers, &new_buffers)?;
        write_back(&params, &new_params)
    }
}
