//! A float64 reference for every op, written as directly from the definitions as possible:
//! index arithmetic over row-major data, no strides, no fusion, no cleverness.

use engine::op::{BinaryOp, ReduceOp, UnaryOp};

/// A dense row-major float64 tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct RefTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of row-major position `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        index[d] = flat % shape[d];
        flat /= shape[d];
    }
    index
}

/// The position in `shape` that broadcast index `index` (of a larger rank) reads.
fn broadcast_position(index: &[usize], shape: &[usize]) -> usize {
    let lead = index.len() - shape.len();
    let st = strides(shape);
    (0..shape.len()).map(|d| if shape[d] == 1 { 0 } else { index[lead + d] * st[d] }).sum()
}

fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    engine::layout::broadcast_shapes(a, b).expect("reference inputs broadcast")
}

impl RefTensor {
    pub fn new(shape: Vec<usize>, data: Vec<f64>) -> Self {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        RefTensor { shape, data }
    }

    pub fn scalar(v: f64) -> Self {
        RefTensor::new(vec![], vec![v])
    }

    pub fn to_f32(&self) -> Vec<f32> {
        self.data.iter().map(|&v| v as f32).collect()
    }

    pub fn map(&self, f: impl Fn(f64) -> f64) -> RefTensor {
        RefTensor::new(self.shape.clone(), self.data.iter().map(|&v| f(v)).collect())
    }

    pub fn abs(&self) -> RefTensor {
        self.map(f64::abs)
    }

    /// Elementwise `f` over any number of broadcast operands.
    pub fn zip(operands: &[&RefTensor], f: impl Fn(&[f64]) -> f64) -> RefTensor {
        let shape = operands.iter().fold(Vec::new(), |acc, t| broadcast_shape(&acc, &t.shape));
        let n = shape.iter().product();
        let data = (0..n)
            .map(|flat| {
                let index = unravel(flat, &shape);
                let args: Vec<f64> = operands.iter().map(|t| t.data[broadcast_position(&index, &t.shape)]).collect();
                f(&args)
            })
            .collect();
        RefTensor::new(shape, data)
    }

    pub fn permute(&self, dims: &[usize]) -> RefTensor {
        let shape: Vec<usize> = dims.iter().map(|&d| self.shape[d]).collect();
        let st = strides(&self.shape);
        let data = (0..self.data.len())
            .map(|flat| {
                let index = unravel(flat, &shape);
                self.data[dims.iter().enumerate().map(|(i, &d)| index[i] * st[d]).sum::<usize>()]
            })
            .collect();
        RefTensor::new(shape, data)
    }

    pub fn reduce(&self, kind: ReduceOp, dim: usize, keepdim: bool) -> RefTensor {
        let mut out_shape = self.shape.clone();
        out_shape[dim] = 1;
        let n: usize = out_shape.iter().product();
        let st = strides(&self.shape);
        let data = (0..n)
            .map(|flat| {
                let index = unravel(flat, &out_shape);
                let base: usize = index.iter().zip(&st).map(|(i, s)| i * s).sum();
                let line = (0..self.shape[dim]).map(|k| self.data[base + k * st[dim]]);
                match kind {
                    ReduceOp::Sum => line.sum(),
                    ReduceOp::Mean => line.sum::<f64>() / self.shape[dim] as f64,
                    ReduceOp::Max => {
                        line.fold(f64::NEG_INFINITY, |m, v| if m.is_nan() || v.is_nan() { f64::NAN } else { m.max(v) })
                    }
                }
            })
            .collect();
        if !keepdim {
            out_shape.remove(dim);
        }
        RefTensor::new(out_shape, data)
    }

    pub fn matmul(&self, other: &RefTensor) -> RefTensor {
        let (ra, rb) = (self.shape.len(), other.shape.len());
        let (m, k, n) = (self.shape[ra - 2], self.shape[ra - 1], other.shape[rb - 1]);
        let batch = broadcast_shape(&self.shape[..ra - 2], &other.shape[..rb - 2]);
        let batches: usize = batch.iter().product();
        let mut data = Vec::with_capacity(batches * m * n);
        for b in 0..batches {
            let index = unravel(b, &batch);
            let a0 = broadcast_position(&index, &self.shape[..ra - 2]) * m * k;
            let b0 = broadcast_position(&index, &other.shape[..rb - 2]) * k * n;
            for i in 0..m {
                for j in 0..n {
                    data.push((0..k).map(|p| self.data[a0 + i * k + p] * other.data[b0 + p * n + j]).sum());
                }
            }
        }
        RefTensor::new([batch, vec![m, n]].concat(), data)
    }

    pub fn softmax(&self, dim: usize, log: bool) -> RefTensor {
        let max = self.reduce(ReduceOp::Max, dim, true);
        let shifted = RefTensor::zip(&[self, &max], |v| v[0] - v[1]);
        let sum = shifted.map(f64::exp).reduce(ReduceOp::Sum, dim, true);
        if log {
            RefTensor::zip(&[&shifted, &sum], |v| v[0] - v[1].ln())
        } else {
            RefTensor::zip(&[&shifted, &sum], |v| v[0].exp() / v[1])
        }
    }

    pub fn layer_norm(&self, weight: &RefTensor, bias: &RefTensor, eps: f64) -> RefTensor {
        let last = self.shape.len() - 1;
        let mean = self.reduce(ReduceOp::Mean, last, true);
        let centered = RefTensor::zip(&[self, &mean], |v| v[0] - v[1]);
        let var = centered.map(|v| v * v).reduce(ReduceOp::Mean, last, true);
        RefTensor::zip(&[&centered, &var, weight, bias], |v| v[0] / (v[1] + eps).sqrt() * v[2] + v[3])
    }
}

impl RefTensor {
    /// The same elements with a new shape.
    pub fn reshape(&self, shape: &[usize]) -> RefTensor {
        RefTensor::new(shape.to_vec(), self.data.clone())
    }

    /// Broadcast to `shape`.
    pub fn expand(&self, shape: &[usize]) -> RefTensor {
        let target = RefTensor::new(shape.to_vec(), vec![0.0; shape.iter().product()]);
        RefTensor::zip(&[self, &target], |v| v[0])
    }

    /// Every `step`-th element of `start..end` along `dim`.
    pub fn slice(&self, dim: usize, start: usize, end: usize, step: usize) -> RefTensor {
        let mut shape = self.shape.clone();
        shape[dim] = (end - start).div_ceil(step);
        let st = strides(&self.shape);
        let data = (0..shape.iter().product())
            .map(|flat| {
                let mut index = unravel(flat, &shape);
                index[dim] = start + index[dim] * step;
                self.data[index.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>()]
            })
            .collect();
        RefTensor::new(shape, data)
    }

    /// `tensors` joined along `dim`.
    pub fn cat(tensors: &[&RefTensor], dim: usize) -> RefTensor {
        let mut shape = tensors[0].shape.clone();
        shape[dim] = tensors.iter().map(|t| t.shape[dim]).sum();
        let data = (0..shape.iter().product())
            .map(|flat| {
                let mut index = unravel(flat, &shape);
                let mut t = 0;
                while index[dim] >= tensors[t].shape[dim] {
                    index[dim] -= tensors[t].shape[dim];
                    t += 1;
                }
                let st = strides(&tensors[t].shape);
                tensors[t].data[index.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>()]
            })
            .collect();
        RefTensor::new(shape, data)
    }

    /// `x @ weight^T (+ bias)`.
    pub fn linear(&self, weight: &RefTensor, bias: Option<&RefTensor>) -> RefTensor {
        let product = self.matmul(&weight.permute(&[1, 0]));
        match bias {
            Some(b) => RefTensor::zip(&[&product, b], |v| v[0] + v[1]),
            None => product,
        }
    }

    /// `softmax(q @ k^T * scale + mask) @ v` over the last two dims, from the definition (the
    /// scores materialized); `mask` is `(values, additive)`: a boolean mask keeps nonzero
    /// entries, an additive one is added. `causal` hides keys after each query.
    pub fn attention(
        q: &RefTensor,
        k: &RefTensor,
        v: &RefTensor,
        mask: Option<(&RefTensor, bool)>,
        causal: bool,
        scale: f64,
    ) -> RefTensor {
        let rank = q.shape.len();
        let mut dims: Vec<usize> = (0..rank).collect();
        dims.swap(rank - 2, rank - 1);
        let scores = q.matmul(&k.permute(&dims)).map(|s| s * scale);
        let (l, s) = (scores.shape[rank - 2], scores.shape[rank - 1]);
        let mut masked = scores.clone();
        for (flat, value) in masked.data.iter_mut().enumerate() {
            let (i, j) = ((flat / s) % l, flat % s);
            if causal && j > i {
                *value = f64::NEG_INFINITY;
            }
        }
        if let Some((m, additive)) = mask {
            masked = RefTensor::zip(&[&masked, m], |x| {
                if additive {
                    x[0] + x[1]
                } else if x[1] != 0.0 {
                    x[0]
                } else {
                    f64::NEG_INFINITY
                }
            });
        }
        masked.softmax(rank - 1, false).matmul(v)
    }
}

pub fn unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Log1p => x.ln_1p(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Relu => {
            if x.is_nan() {
                x
            } else {
                x.max(0.0)
            }
        }
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Gelu => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
    }
}

pub fn binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    let mask = |c: bool| if c { 1.0 } else { 0.0 };
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Maximum => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }
        BinaryOp::Minimum => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.min(b)
            }
        }
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Eq => mask(a == b),
        BinaryOp::Ne => mask(a != b),
        BinaryOp::Lt => mask(a < b),
        BinaryOp::Le => mask(a <= b),
        BinaryOp::Gt => mask(a > b),
        BinaryOp::Ge => mask(a >= b),
    }
}
