//! Launching the pointwise kernels (`unary_*`, `binary_*`, `where`, `copy`), ATen's
//! `gpu_kernel` with its `TensorIterator`: contiguous operands take the vectorised kernel (four
//! elements per load), anything else (broadcasts, transposes, slices) the strided one after
//! merging dims. Each operand is passed with its dtype and the output's dtype with the launch.
//! Where all of them share one dtype the kernels instantiated for it run; any other combination
//! runs the instance that reads the dtypes at run time (`copy` into another dtype is `to_dtype`).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

use super::buffer::CudaBuffer;
use super::context::CudaDevice;
use super::error::CudaError;
use super::params::{DenseIn, Geometry, MAX_DIMS, StridedIn, dtype_code, merge_dims, reversed};
use super::source::{Instance, custom_source};
use super::{Input, launch_config};
use crate::dtype::DType;
use crate::layout::{Layout, contiguous_strides, numel};
use crate::op::CustomOp;

/// Threads per block of the pointwise kernels.
const THREADS: u32 = 256;

/// Where a pointwise op's two kernels, `<name>_dense` and `<name>_strided`, come from.
#[derive(Clone, Copy)]
pub(super) enum Kernels<'a> {
    /// An eager family: `unary_exp`, `binary_add`, `where`, `copy`.
    Eager(&'a str),
    /// A custom op's module, built from its CUDA source (kernels `custom_*`).
    Custom(&'a CustomOp),
}

impl Kernels<'_> {
    /// The `variant` kernel (`dense`, `strided`) in `instance`.
    fn function(self, device: &CudaDevice, variant: &str, instance: Instance) -> Result<CudaFunction, CudaError> {
        match self {
            Kernels::Eager(family) => {
                device.eager_kernel(&instance.name(family), &instance.name(&format!("{family}_{variant}")))
            }
            Kernels::Custom(op) => {
                let module = device.load(&custom_source(op, instance)?)?;
                Ok(module.function(&instance.name(&format!("custom_{variant}")))?)
            }
        }
    }
}

/// The instance of the kernels that reads `inputs` and writes `out`.
fn instance(inputs: &[Input], out: &CudaBuffer) -> Instance {
    let tensors = inputs.iter().filter_map(|input| match input {
        Input::Scalar(_) => None,
        Input::Tensor { buffer, .. } => Some(buffer.dtype()),
    });
    Instance::of(std::iter::once(out.dtype()).chain(tensors))
}

/// Runs a pointwise op's kernels over up to three operands into a new dense buffer of
/// `out_shape` and `dtype`.
pub(super) fn run(
    device: &Arc<CudaDevice>,
    kernel: Kernels,
    inputs: &[Input],
    out_shape: &[usize],
    dtype: DType,
) -> Result<CudaBuffer, CudaError> {
    debug_assert!(inputs.len() <= 3);
    let n = numel(out_shape);
    let out = CudaBuffer::alloc_of(device, dtype, n)?;
    if n == 0 {
        return Ok(out);
    }
    let dense = inputs.iter().all(|input| match input {
        Input::Scalar(_) => true,
        Input::Tensor { layout, .. } => layout.shape() == out_shape && layout.is_contiguous(),
    });
    if dense {
        launch_dense(device, kernel, inputs, &out, n)?;
    } else {
        launch_strided(device, kernel, inputs, &out, out_shape)?;
    }
    Ok(out)
}

fn launch_dense(
    device: &Arc<CudaDevice>,
    kernel: Kernels,
    inputs: &[Input],
    out: &CudaBuffer,
    n: usize,
) -> Result<(), CudaError> {
    let mut operands = [DenseIn::default(); 3];
    let mut aligned = out.ptr().is_multiple_of(vector_bytes(out.dtype()));
    for (operand, input) in operands.iter_mut().zip(inputs) {
        *operand = match *input {
            Input::Scalar(value) => DenseIn { ptr: 0, value, dtype: 0 },
            Input::Tensor { buffer, layout } => {
                let ptr = buffer.ptr_at(layout.offset());
                aligned &= ptr.is_multiple_of(vector_bytes(buffer.dtype()));
                DenseIn { ptr, value: 0.0, dtype: dtype_code(buffer.dtype()) }
            }
        };
    }
    // A vector of four elements needs every address on its size's boundary (a view may start
    // mid-vector).
    let vec = aligned;
    let threads = if vec { n.div_ceil(4) } else { n };
    let function = kernel.function(device, "dense", instance(inputs, out))?;
    let (out_ptr, out_dtype, n, vec) = (out.ptr(), dtype_code(out.dtype()), n as i64, i32::from(vec));
    let mut launch = device.stream().launch_builder(&function);
    launch.arg(&out_ptr).arg(&out_dtype).arg(&operands[0]).arg(&operands[1]).arg(&operands[2]).arg(&n).arg(&vec);
    // SAFETY: the arguments match the kernel's signature; every pointer addresses at least n
    // elements (shape inference checked the operands against the output shape).
    unsafe { launch.launch(grid_stride_config(device, threads)) }?;
    Ok(())
}

fn launch_strided(
    device: &Arc<CudaDevice>,
    kernel: Kernels,
    inputs: &[Input],
    out: &CudaBuffer,
    out_shape: &[usize],
) -> Result<(), CudaError> {
    // The output's own strides join the merge, so merged dims still enumerate it in order.
    let mut strides = vec![contiguous_strides(out_shape).iter().map(|&s| s as i64).collect::<Vec<_>>()];
    for input in inputs {
        strides.push(match input {
            Input::Scalar(_) => vec![0; out_shape.len()],
            Input::Tensor { layout, .. } => layout.expand(out_shape).strides().iter().map(|&s| s as i64).collect(),
        });
    }
    let (shape, merged) = merge_dims(out_shape, &strides);
    if shape.len() > MAX_DIMS {
        return Err(CudaError::new(format!(
            "the operands' layouts need {} dims after merging, more than the {MAX_DIMS} the CUDA kernels index; \
             call .contiguous() on them first",
            shape.len()
        )));
    }
    let mut operands = [StridedIn::default(); 3];
    let mut aligned = [true; 3];
    for (((operand, input), strides), aligned) in operands.iter_mut().zip(inputs).zip(&merged[1..]).zip(&mut aligned) {
        *operand = match *input {
            Input::Scalar(value) => StridedIn { value, ..StridedIn::default() },
            Input::Tensor { buffer, layout } => {
                let ptr = buffer.ptr_at(layout.offset());
                *aligned = ptr.is_multiple_of(vector_bytes(buffer.dtype()));
                StridedIn { ptr, value: 0.0, dtype: dtype_code(buffer.dtype()), strides: reversed(strides) }
            }
        };
    }
    let geometry = Geometry::new(&shape);
    let n = numel(out_shape);
    let vec = out.ptr().is_multiple_of(vector_bytes(out.dtype()))
        && inner_vectorizable(&shape, &operands[..inputs.len()], &aligned);
    let function = kernel.function(device, "strided", instance(inputs, out))?;
    let (out_ptr, out_dtype, n_arg, vec_arg) = (out.ptr(), dtype_code(out.dtype()), n as i64, i32::from(vec));
    let mut launch = device.stream().launch_builder(&function);
    launch
        .arg(&out_ptr)
        .arg(&out_dtype)
        .arg(&operands[0])
        .arg(&operands[1])
        .arg(&operands[2])
        .arg(&geometry)
        .arg(&n_arg)
        .arg(&vec_arg);
    // SAFETY: the arguments match the kernel's signature; every offset the strides produce lies
    // inside its operand's buffer, because the layouts were validated when the views were made.
    unsafe { launch.launch(grid_stride_config(device, if vec { n / 4 } else { n })) }?;
    Ok(())
}

/// The bytes of four elements of `dtype`: the alignment a vector load of them needs.
pub(super) fn vector_bytes(dtype: DType) -> u64 {
    4 * dtype.size_in_bytes() as u64
}

/// Whether each thread can take 4 neighbouring outputs along the innermost (merged) dim: its size
/// is a multiple of 4, and every tensor operand either steps through it with stride 1 from a
/// start aligned for a vector of four (`aligned`, per operand) or repeats one value along it
/// (stride 0).
fn inner_vectorizable(shape: &[usize], operands: &[StridedIn], aligned: &[bool]) -> bool {
    let Some(&inner) = shape.last() else { return false };
    inner.is_multiple_of(4)
        && operands.iter().zip(aligned).all(|(o, &aligned)| {
            let rank = shape.len();
            o.ptr == 0
                || o.strides[0] == 0
                || (o.strides[0] == 1 && aligned && o.strides[1..rank].iter().all(|s| s % 4 == 0))
        })
}

/// A grid-stride launch over `threads` work items: enough blocks to fill every multiprocessor
/// (2048 resident threads each), and no more.
fn grid_stride_config(device: &CudaDevice, threads: usize) -> LaunchConfig {
    let resident = device.facts().multiprocessors as usize * (2048 / THREADS as usize);
    launch_config(threads.div_ceil(THREADS as usize).clamp(1, resident), (THREADS, 1))
}

/// A dense copy of a view: the view itself when it already is one, else a new buffer.
pub(super) struct Dense {
    /// Address of the first element.
    pub ptr: u64,
    /// The element type.
    pub dtype: DType,
    /// The shape (its strides are the contiguous ones).
    pub shape: Vec<usize>,
    /// The copy, when one was made; dropping it after the kernels reading it are queued is safe,
    /// because freeing is ordered on the same stream.
    _copy: Option<CudaBuffer>,
}

impl Dense {
    pub(super) fn of(device: &Arc<CudaDevice>, input: Input) -> Result<Dense, CudaError> {
        let (buffer, layout) = input.tensor();
        if layout.is_contiguous() {
            return Ok(Dense {
                ptr: buffer.ptr_at(layout.offset()),
                dtype: buffer.dtype(),
                shape: layout.shape().to_vec(),
                _copy: None,
            });
        }
        let copy = run(device, Kernels::Eager("copy"), &[input], layout.shape(), buffer.dtype())?;
        Ok(Dense { ptr: copy.ptr(), dtype: buffer.dtype(), shape: layout.shape().to_vec(), _copy: Some(copy) })
    }

    /// The dense layout.
    pub(super) fn layout(&self) -> Layout {
        Layout::contiguous(&self.shape)
    }
}
