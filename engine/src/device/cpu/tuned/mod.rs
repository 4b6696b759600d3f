//! The tuned CPU kernels, the fast paths that make eager a fair baseline (the role MKL, oneDNN,
//! SLEEF and ATen's vectorized kernels play for PyTorch on a CPU). Each implements a family the
//! plain kernels (`plain.rs`) also implement, and is tested against them:
//!
//! | family | fast path | module |
//! | --- | --- | --- |
//! | pointwise | hot loops compiled again for AVX2/AVX-512; [`vecmath`](super::vecmath)'s polynomials for `exp`, `tanh`, `erf`... | `simd`, `super::pointwise` |
//! | `bf16` and `f16` loads and stores | F16C, AVX-512 BF16's rounding, vectorised integer conversions | `simd` |
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

use super::pointwise::input_dtype;
use super::{Cpu, HostBuffer, Input, in_f32, pointwise, vecmath};
use crate::device::provider::KernelProvider;
use crate::dtype::DType;
use crate::op::{AttentionParams, BinaryOp, ReduceOp, UnaryOp};
use simd::Vectorized;

/// The CPU's tuned kernels, what eager ops run on by default.
pub(crate) struct Tuned;

impl KernelProvider for Tuned {
    type Device = Cpu<Vectorized>;

    fn device(&self) -> &Cpu<Vectorized> {
        &Cpu::NEW
    }

    /// Transcendental functions come from [`vecmath`], whose polynomials run in vector lanes
    /// where libm's calls cannot.
    fn unary(&self, op: UnaryOp, x: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        // Each function passed as its own item type (not a `fn` pointer), so that it inlines
        // into the vectorised loop.
        fn map(x: Input, out_shape: &[usize], f: impl Fn(f32) -> f32 + Sync) -> HostBuffer {
            pointwise::map1::<Vectorized>(x, out_shape, input_dtype(x), f)
        }
        Ok(match op {
            UnaryOp::Exp => map(x, out_shape, vecmath::exp),
            UnaryOp::Log => map(x, out_shape, vecmath::log),
            UnaryOp::Sin => map(x, out_shape, vecmath::sin),
            UnaryOp::Cos => map(x, out_shape, vecmath::cos),
            UnaryOp::Tanh => map(x, out_shape, vecmath::tanh),
            UnaryOp::Erf => map(x, out_shape, vecmath::erf),
            UnaryOp::Sigmoid => map(x, out_shape, vecmath::sigmoid),
            UnaryOp::Gelu => map(x, out_shape, vecmath::gelu),
            _ => pointwise::unary::<Vectorized>(op, x, out_shape),
        })
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: Input,
        b: Input,
        out_shape: &[usize],
        dtype: DType,
    ) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::binary::<Vectorized>(op, a, b, out_shape, dtype))
    }

    fn where_(&self, [cond, a, b]: [Input; 3], out_shape: &[usize], dtype: DType) -> Result<HostBuffer, Infallible> {
        Ok(pointwise::where_::<Vectorized>(cond, a, b, out_shape, dtype))
    }

    fn reduce(&self, kind: ReduceOp, x: Input, dim: usize) -> Result<HostBuffer, Infallible> {
        let dtype = input_dtype(x);
        Ok(match reduce::reduce_half_rows::<Vectorized>(kind, x, dim) {
            Some(reduced) => reduced.converted::<Vectorized>(dtype),
            None => in_f32::<Vectorized>(&[x], dtype, |i| reduce::reduce(kind, i[0], dim)),
        })
    }

    fn softmax(&self, x: Input, dim: usize, log: bool) -> Result<HostBuffer, Infallible> {
        Ok(normalize::softmax(x, dim, log))
    }

    fn layer_norm(&self, [x, weight, bias]: [Input; 3], eps: f32) -> Result<HostBuffer, Infallible> {
        Ok(normalize::layer_norm(x, weight, bias, eps))
    }

    fn matmul(&self, a: Input, b: Input, out_shape: &[usize]) -> Result<HostBuffer, Infallible> {
        Ok(in_f32::<Vectorized>(&[a, b], input_dtype(a), |i| matmul::matmul(i[0], i[1], out_shape)))
    }

    fn attention(&self, inputs: &[Input], params: AttentionParams) -> Result<HostBuffer, Infallible> {
        Ok(in_f32::<Vectorized>(inputs, input_dtype(inputs[0]), |i| attention::attention(i, params)))
    }

    fn attention_backward(&self, inputs: &[Input], params: AttentionParams) -> Result<HostBuffer, Infallible> {
        Ok(in_f32::<Vectorized>(inputs, input_dtype(inputs[1]), |i| attention_backward::attention_backward(i, params)))
    }
}
