//! Creating concrete tensors on the CPU: from data, filled, ranges and seeded random values.
//! Move them to a GPU with `.to(Device::Cuda(0))`.

use std::sync::Arc;

use super::random::SplitMix64;
use super::{Storage, Tensor};
use crate::device::cpu::HostBuffer;
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::layout::{Layout, MAX_NUMEL, checked_numel};

impl Tensor {
    /// A CPU tensor holding `data` in row-major order with the given shape.
    #[track_caller]
    pub fn from_vec(data: Vec<f32>, shape: &[usize]) -> Result<Tensor> {
        let invalid =
            |message: String| Error::InvalidArgument { op: "from_vec", message, location: SourceLocation::caller() };
        let Some(elements) = checked_numel(shape) else {
            return Err(invalid(format!(
                "shape {shape:?} has more elements than a tensor can hold (at most {MAX_NUMEL}); {} values were given",
                data.len()
            )));
        };
        if data.len() != elements {
            return Err(invalid(format!("{} values cannot fill shape {shape:?} ({elements} elements)", data.len())));
        }
        Ok(Tensor::from_concrete(Arc::new(Storage::Cpu(data.into())), Layout::contiguous(shape)))
    }

    #[track_caller]
    fn filled_with(shape: &[usize], mut value: impl FnMut() -> f32) -> Tensor {
        let Some(elements) = checked_numel(shape) else {
            panic!(
                "a tensor of shape {shape:?} has more elements than a tensor can hold (at most {MAX_NUMEL}): check the \
                 sizes, or build it with `Tensor::from_vec`, which returns an error instead"
            )
        };
        let data: Vec<f32> = (0..elements).map(|_| value()).collect();
        Tensor::from_concrete(Arc::new(Storage::Cpu(data.into())), Layout::contiguous(shape))
    }

    /// A 0-d tensor holding one value.
    #[track_caller]
    pub fn scalar(value: f32) -> Tensor {
        Tensor::full(&[], value)
    }

    /// A tensor with every element equal to `value`.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn full(shape: &[usize], value: f32) -> Tensor {
        Tensor::filled_with(shape, || value)
    }

    /// A tensor of zeros.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn zeros(shape: &[usize]) -> Tensor {
        Tensor::full(shape, 0.0)
    }

    /// A tensor of ones.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn ones(shape: &[usize]) -> Tensor {
        Tensor::full(shape, 1.0)
    }

    /// `[0, 1, ..., n - 1]` as a 1-d tensor.
    #[track_caller]
    pub fn arange(n: usize) -> Tensor {
        let mut next = 0.0;
        Tensor::filled_with(&[n], || {
            next += 1.0;
            next - 1.0
        })
    }

    /// Standard normal values from a seed: the same seed always gives the same tensor.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn randn(shape: &[usize], seed: u64) -> Tensor {
        let mut rng = SplitMix64::new(seed);
        Tensor::filled_with(shape, || rng.next_normal())
    }

    /// Uniform values in `[low, high)` from a seed.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn uniform(shape: &[usize], low: f32, high: f32, seed: u64) -> Tensor {
        let mut rng = SplitMix64::new(seed);
        Tensor::filled_with(shape, || low + (high - low) * rng.next_f32())
    }

    /// A CPU tensor of `dtype` holding `data` rounded to it (to nearest, ties to even).
    #[track_caller]
    pub fn from_vec_dtype(data: Vec<f32>, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Ok(Tensor::from_vec(data, shape)?.rounded_to(dtype))
    }

    /// [`Tensor::full`] in `dtype` (`torch.full(shape, value, dtype=dtype)`).
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn full_dtype(shape: &[usize], value: f32, dtype: DType) -> Tensor {
        Tensor::full(shape, value).rounded_to(dtype)
    }

    /// [`Tensor::zeros`] in `dtype`.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn zeros_dtype(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full_dtype(shape, 0.0, dtype)
    }

    /// [`Tensor::ones`] in `dtype`.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn ones_dtype(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full_dtype(shape, 1.0, dtype)
    }

    /// [`Tensor::randn`] in `dtype`: the same seeded values, rounded to it, so a model's `bf16`
    /// parameters are its `f32` ones rounded.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn randn_dtype(shape: &[usize], seed: u64, dtype: DType) -> Tensor {
        Tensor::randn(shape, seed).rounded_to(dtype)
    }

    /// [`Tensor::uniform`] in `dtype`.
    ///
    /// Panics when the shape has more elements than a tensor can hold, as `Vec` does past
    /// `isize::MAX` bytes (PyTorch raises); [`Tensor::from_vec`] returns an error instead.
    #[track_caller]
    pub fn uniform_dtype(shape: &[usize], low: f32, high: f32, seed: u64, dtype: DType) -> Tensor {
        Tensor::uniform(shape, low, high, seed).rounded_to(dtype)
    }

    /// A fresh dense CPU tensor of this (dense, CPU, `f32`) tensor's values rounded to `dtype`.
    fn rounded_to(self, dtype: DType) -> Tensor {
        if dtype == DType::F32 {
            return self;
        }
        let c = self.concrete().expect("constructors make concrete tensors");
        let Storage::Cpu(values) = &*c.storage else { unreachable!("constructors make CPU tensors") };
        Tensor::from_concrete(Arc::new(Storage::Cpu(HostBuffer::rounded(values, dtype))), c.layout.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_values_repeat_and_differ_by_seed() {
        let a = Tensor::randn(&[64], 7).to_vec().unwrap();
        assert_eq!(a, Tensor::randn(&[64], 7).to_vec().unwrap());
        assert_ne!(a, Tensor::randn(&[64], 8).to_vec().unwrap());
        let mean = a.iter().sum::<f32>() / 64.0;
        assert!(mean.abs() < 0.5, "mean {mean}");
    }

    #[test]
    fn from_vec_rejects_a_wrong_length() {
        let err = Tensor::from_vec(vec![1.0; 5], &[2, 3]).unwrap_err().to_string();
        assert!(err.contains("5 values cannot fill shape [2, 3]"), "{err}");
    }

    #[test]
    fn constructors_round_to_their_dtype() {
        let x = Tensor::randn_dtype(&[64], 7, DType::BF16);
        assert_eq!(x.dtype(), DType::BF16);
        let rounded: Vec<f32> =
            Tensor::randn(&[64], 7).to_vec().unwrap().iter().map(|&v| DType::BF16.round(v)).collect();
        assert_eq!(x.to_vec().unwrap(), rounded);
        assert_eq!(Tensor::ones_dtype(&[2], DType::F16).to_string(), "tensor([1.0000, 1.0000], dtype=f16)");
    }

    #[test]
    fn from_vec_rejects_a_shape_whose_size_overflows() {
        for shape in [vec![usize::MAX, 2], vec![1 << 40, 1 << 40], vec![MAX_NUMEL + 1]] {
            let err = Tensor::from_vec(vec![1.0; 4], &shape).unwrap_err().to_string();
            assert!(err.contains("has more elements than a tensor can hold"), "{shape:?}: {err}");
        }
    }

    #[test]
    fn uniform_stays_in_range() {
        let v = Tensor::uniform(&[1000], -2.0, 3.0, 1).to_vec().unwrap();
        assert!(v.iter().all(|&x| (-2.0..3.0).contains(&x)));
    }

    #[test]
    #[should_panic(expected = "has more elements than a tensor can hold")]
    fn an_overflowing_shape_panics_with_a_message_that_names_it() {
        let _ = Tensor::zeros(&[usize::MAX / 2, 4]);
    }
}
