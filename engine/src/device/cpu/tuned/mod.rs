//! The tuned CPU kernels, the fast paths that make eager a fair baseline (the role MKL, oneDNN,
//! SLEEF and ATen's vectorized kernels play for PyTorch on a CPU). Each implements a family the
//! plain kernels (`plain.rs`) also implement, and is tested against them:
//!
//! | family | fast path | module |
//! | --- | --- | --- |
//! | pointwise | hot loops compiled again for AVX2/AVX-512; [`vecmath`](super::vecmath)'s polynomials for `exp`, `tanh`, `erf`... | `simd`, `super::pointwise` |
//! | reductions, softmax, layer norm | eight running results per row, columns accumulated in strips | `reduce`, `normalize` |
//! | matmul | the `gemm` crate's packed GEMM, a matrix-vector path, the engine's own dot-product tiles for linear layers, a fused bias and ReLU for compiled code | `matmul`, `dot_tiles`, `epilogue` |
//! | attention | flash attention: tiles of keys, online softmax, outer-product tiles | `attention`, `outer_tiles` |
//! | the microkernels' vector registers and instruction sets | `Lanes`, `Kernel` | `lanes` |

mod attention;
mod attention_backward;
mod dot_tiles;
mod epilogue;
pub(crate) use epilogue::Epilogue;
mod lanes;
mod matmul;
pub(crate) use matmul::matmul_into;
mod normalize;
mod outer_tiles;
mod reduce;
mod simd;

use std::convert::Infallible;

use super::{Cpu, HostBuffer, Input, pointwise, vecmath};
use crate::device::provider::KernelProvider;
use crate::op::{AttentionParams, BinaryOp, ReduceOp, UnaryOp};
use simd::Vectorized;

/// The CPU's tuned kernels, what eager ops run on by default.
pub(crate) struct Tuned;

impl KernelProvider for Tuned {
    type Device = Cpu;

    fn device(&self) -> &Cpu {
        &Cpu
    }

    /// Transcendental functions come from [`vecmath`], whose polynomials run in vector lanes
    /// where libm's calls cannot.
    fn unary(&self, op: UnaryOp, x: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(match op {
            UnaryOp::Exp => pointwise::map1::<Vectorized>(x, out_shape, vecmath::exp),
            UnaryOp::Log => pointwise::map1::<Vectorized>(x, out_shape, vecmath::log),
            UnaryOp::Sin => pointwise::map1::<Vectorized>(x, out_shape, vecmath::sin),
            UnaryOp::Cos => pointwise::map1::<Vectorized>(x, out_shape, vecmath::cos),
            UnaryOp::Tanh => pointwise::map1::<Vectorized>(x, out_shape, vecmath::tanh),
            UnaryOp::Erf => pointwise::map1::<Vectorized>(x, out_shape, vecmath::erf),
            UnaryOp::Sigmoid => pointwise::map1::<Vectorized>(x, out_shape, vecmath::sigmoid),
            UnaryOp::Gelu => pointwise::map1::<Vectorized>(x, out_shape, vecmath::gelu),
            _ => pointwise::unary::<Vectorized>(op, x, out_shape),
        })
    }

    fn binary(&self, op: BinaryOp, a: Input, b: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::binary::<Vectorized>(op, a, b, out_shape))
    }

    fn where_(&self, [cond, a, b]: [Input; 3], out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::where_::<Vectorized>(cond, a, b, out_shape))
    }

    fn reduce(&self, kind: ReduceOp, x: Input, dim: usize) -> Result<HostBuffer, Infallible> {
        Ok(reduce::reduce(kind, x, dim))
    }

    fn softmax(&self, x: Input, dim: usize, log: bool) -> Result<HostBuffer, Infallible> {
        Ok(normalize::softmax(x, dim, log))
    }

    fn layer_norm(&self, [x, weight, bias]: [Input; 3], eps: f32) -> Result<HostBuffer, Infallible> {
        Ok(normalize::layer_norm(x, weight, bias, eps))
    }

    fn matmul(&self, a: Input, b: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(matmul::matmul(a, b, out_shape))
    }

    fn attention(&self, inputs: &[Input], params: AttentionParams) -> Result<HostBuffer, Infallible> {
        Ok(attention::attention(inputs, params))
    }

    fn attention_backward(&self, inputs: &[Input], params: AttentionParams) -> Result<HostBuffer, Infallible> {
        Ok(attention_backward::attention_backward(inputs, params))
    }
}
