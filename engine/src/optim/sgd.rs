//! Stochastic gradient descent with momentum and weight decay, `torch.optim.SGD`.

use super::{Optimizer, with_grads, write_back};
use crate::error::Result;
use crate::tensor::{Tensor, autograd};

/// `torch.optim.SGD(params, lr, momentum, weight_decay)` (no dampening, no Nesterov): each step
/// `g = grad + weight_decay * p`, then with momentum `buf = momentum * buf + g` (the first step's
/// `buf` is `g`) and `g = buf`, then `p = p - lr * g`.
pub struct Sgd {
    params: Vec<Tensor>,
    lr: f32,
    momentum: f32,
    weight_decay: f32,
    /// Per parameter, the momentum buffer (`None` until its first step).
    buffers: Vec<Option<Tensor>>,
}

impl Sgd {
    /// Plain SGD over `params` with learning rate `lr` (no momentum, no weight decay).
    pub fn new(params: &[Tensor], lr: f32) -> Sgd {
        Sgd { params: params.to_vec(), lr, momentum: 0.0, weight_decay: 0.0, buffers: vec![None; params.len()] }
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

/// One SGD update as a pure function of lists (`_multi_tensor_sgd`): the new parameters and the
/// new momentum buffers (empty without momentum) from `params`, their `grads` and their `buffers`
/// (`None` on a first step).
pub fn sgd_update(
    params: &[Tensor],
    grads: &[Tensor],
    buffers: &[Option<Tensor>],
    lr: f32,
    momentum: f32,
    weight_decay: f32,
) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let mut new_params = Vec::with_capacity(params.len());
    let mut new_buffers = Vec::new();
    for ((p, g), buffer) in params.iter().zip(grads).zip(buffers) {
        let mut g = if weight_decay != 0.0 { g.add(&p.mul(weight_decay)?)? } else { g.clone() };
        if momentum != 0.0 {
            let buf = match buffer {
                Some(buf) => buf.mul(momentum)?.add(&g)?,
                None => g.clone(),
            };
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

    fn step(&mut self) -> Result<()> {
        let stepped = with_grads(&self.params);
        let (params, grads): (Vec<Tensor>, Vec<Tensor>) =
            stepped.iter().map(|(i, g)| (self.params[*i].detach(), g.clone())).unzip();
        let buffers: Vec<Option<Tensor>> = stepped.iter().map(|(i, _)| self.buffers[*i].clone()).collect();
        let (new_params, new_buffers) =
            autograd::no_grad(|| sgd_update(&params, &grads, &buffers, self.lr, self.momentum, self.weight_decay))?;
        for ((i, _), buf) in stepped.iter().zip(new_buffers) {
            self.buffers[*i] = Some(buf);
        }
        let updated: Vec<(usize, Tensor)> = stepped.iter().map(|(i, _)| *i).zip(new_params).collect();
        write_back(&self.params, &updated)
    }
}
