//! A float64 reference for the eager ops, written as plainly as possible (loops over indices), so
//! that both the CPU and the CUDA kernels can be checked against something independent of them.

#![allow(dead_code)]

use engine::op::{BinaryOp, ReduceOp, UnaryOp};

/// Row-major values in double precision with their shape.
#[derive(Clone, Debug)]
pub struct Host {
    pub data: Vec<f64>,
    pub shape: Vec<usize>,
}

impl Host {
    pub fn new(data: &[f32], shape: &[usize]) -> Host {
        Host { data: data.iter().map(|&v| v as f64).collect(), shape: shape.to_vec() }
    }

    /// The element at `index` of a shape that this one broadcasts to (trailing dims aligned).
    pub fn at_broadcast(&self, index: &[usize]) -> f64 {
        let lead = index.len() - self.shape.len();
        let mut flat = 0;
        for (d, &size) in self.shape.iter().enumerate() {
            let i = if size == 1 { 0 } else { index[lead + d] };
            flat = flat * size + i;
        }
        self.data[flat]
    }
}

/// Every multi-index of `shape` in row-major order.
pub fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut flat| {
            let mut index = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                index[d] = flat % shape[d];
                flat /= shape[d];
            }
            index
        })
        .collect()
}

pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    engine::layout::broadcast_shapes(a, b).expect("test shapes broadcast")
}

fn erf(x: f64) -> f64 {
    libm::erf(x)
}

pub fn unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => erf(x),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
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

/// `f` applied elementwise over broadcast operands.
pub fn map(operands: &[&Host], f: impl Fn(&[f64]) -> f64) -> Host {
    let shape = operands.iter().fold(Vec::new(), |s, o| broadcast_shape(&s, &o.shape));
    let data = indices(&shape)
        .iter()
        .map(|index| f(&operands.iter().map(|o| o.at_broadcast(index)).collect::<Vec<_>>()))
        .collect();
    Host { data, shape }
}

/// The lines along `dim`: for each position of the other dims, the flat indices along `dim`.
fn lines(shape: &[usize], dim: usize) -> Vec<Vec<usize>> {
    let mut kept = shape.to_vec();
    kept[dim] = 1;
    indices(&kept)
        .into_iter()
        .map(|mut index| {
            (0..shape[dim])
                .map(|k| {
                    index[dim] = k;
                    index.iter().zip(shape).fold(0, |flat, (&i, &s)| flat * s + i)
                })
                .collect()
        })
        .collect()
}

/// The reduction over `dim` in the keepdim shape.
pub fn reduce(kind: ReduceOp, x: &Host, dim: usize) -> Host {
    let data = lines(&x.shape, dim)
        .iter()
        .map(|line| {
            let values = line.iter().map(|&i| x.data[i]);
            match kind {
                ReduceOp::Sum => values.sum(),
                ReduceOp::Mean => values.sum::<f64>() / line.len() as f64,
                ReduceOp::Max => values.fold(f64::NEG_INFINITY, |m, v| if v > m || v.is_nan() { v } else { m }),
            }
        })
        .collect();
    let mut shape = x.shape.clone();
    shape[dim] = 1;
    Host { data, shape }
}

/// The sum of |x| along each line, the scale a reduction's rounding error is measured against.
pub fn abs_sum(x: &Host, dim: usize) -> Vec<f64> {
    lines(&x.shape, dim).iter().map(|line| line.iter().map(|&i| x.data[i].abs()).sum()).collect()
}

pub fn softmax(x: &Host, dim: usize, log: bool) -> Host {
    let mut data = vec![0.0; x.data.len()];
    for line in lines(&x.shape, dim) {
        let max = line.iter().map(|&i| x.data[i]).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = line.iter().map(|&i| (x.data[i] - max).exp()).sum();
        for &i in &line {
            data[i] = if log { x.data[i] - max - sum.ln() } else { (x.data[i] - max).exp() / sum };
        }
    }
    Host { data, shape: x.shape.clone() }
}

/// Layer norm over the last dim, and each element's error scale: rounding `x` and its mean by one
/// part in 2^24 moves the result by that part of `(|x| + |mean|) / std * |w|`, which is large
/// when a row is nearly constant.
pub fn layer_norm(x: &Host, weight: &Host, bias: &Host, eps: f64) -> (Host, Vec<f64>) {
    let last = x.shape.len() - 1;
    let mut data = vec![0.0; x.data.len()];
    let mut scale = vec![0.0; x.data.len()];
    for line in lines(&x.shape, last) {
        let n = line.len() as f64;
        let mean = line.iter().map(|&i| x.data[i]).sum::<f64>() / n;
        let var = line.iter().map(|&i| (x.data[i] - mean).powi(2)).sum::<f64>() / n;
        let std = (var + eps).sqrt();
        for (k, &i) in line.iter().enumerate() {
            data[i] = (x.data[i] - mean) / std * weight.data[k] + bias.data[k];
            scale[i] = (x.data[i].abs() + mean.abs()) / std * weight.data[k].abs() + bias.data[k].abs() + 1.0;
        }
    }
    (Host { data, shape: x.shape.clone() }, scale)
}

/// `a @ b` over broadcast batch dims.
pub fn matmul(a: &Host, b: &Host) -> Host {
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    let batch = broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2]);
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let mut data = Vec::with_capacity(shape.iter().product());
    for index in indices(&shape) {
        let (i, j) = (index[batch.len()], index[batch.len() + 1]);
        let mut at_a = index.clone();
        let mut at_b = index.clone();
        let mut acc = 0.0;
        for p in 0..k {
            at_a[batch.len() + 1] = p;
            at_a[batch.len()] = i;
            at_b[batch.len()] = p;
            at_b[batch.len() + 1] = j;
            acc += a.at_broadcast(&at_a) * b.at_broadcast(&at_b);
        }
        data.push(acc);
    }
    Host { data, shape }
}

/// Checks `actual` against `expected` elementwise: |a - e| <= tol * scale_i, where `scale_i` is the
/// magnitude the rounding error grows with (|e| + 1 for pointwise ops, sum |x| for reductions).
/// NaN must meet NaN. Panics with the worst element otherwise.
pub fn assert_close(what: &str, actual: &[f32], expected: &[f64], scale: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len(), "{what}: element count");
    let mut worst: Option<(usize, f64)> = None;
    for (i, ((&a, &e), &s)) in actual.iter().zip(expected).zip(scale).enumerate() {
        let a = a as f64;
        let bad = if e.is_nan() || a.is_nan() {
            e.is_nan() != a.is_nan()
        } else if e.is_infinite() {
            a != e
        } else {
            (a - e).abs() > tol * s
        };
        if bad {
            let err = if (a - e).is_nan() { f64::INFINITY } else { (a - e).abs() / s };
            if worst.is_none_or(|(_, w)| err > w) {
                worst = Some((i, err));
            }
        }
    }
    if let Some((i, err)) = worst {
        panic!(
            "{what}: element {i} is {} but the float64 reference says {} (relative error {err:.3e} > {tol:.0e})",
            actual[i], expected[i]
        );
    }
}

/// The usual scale for values that are computed directly: |e| + 1.
pub fn pointwise_scale(expected: &[f64]) -> Vec<f64> {
    expected.iter().map(|e| e.abs() + 1.0).collect()
}
