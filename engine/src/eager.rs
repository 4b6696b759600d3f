//! Eager execution, the analogue of PyTorch's dispatcher in eager mode: check devices and shapes,
//! then either build a view (no kernel) or run one device kernel.

use std::sync::Arc;

use crate::device::cuda::{self, CudaError};
use crate::device::{Device, cpu};
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::layout::{Layout, numel};
use crate::op::Op;
use crate::op::{BinaryOp, ViewOf};
use crate::profiler::{self, EventKind};
use crate::tensor::{Concrete, Operand, Storage, Tensor, dispatch};

/// Runs `op` on concrete operands now.
pub(crate) fn run(op: &Op, operands: &[Operand], location: SourceLocation) -> Result<Tensor> {
    if operands.iter().any(|o| matches!(o, Operand::Tensor(t) if t.is_symbolic())) {
        return Err(Error::Capture {
            message: format!(
                "{}: a symbolic tensor escaped its trace; tensors seen inside a compiled function exist only \
                 during that call, so return them from the function instead of storing them",
                op.name()
            ),
            location,
        });
    }
    let device = common_device(op.name(), operands, location)?;
    let shapes: Vec<Option<&[usize]>> = operands.iter().map(Operand::shape).collect();
    let out_shape = op.infer_shape(&shapes, location)?;
    let dtypes: Vec<Option<(DType, usize)>> =
        operands.iter().map(|o| o.tensor().map(|t| (t.dtype(), t.rank()))).collect();
    let dtype = op.infer_dtype(&dtypes, location)?;
    let first = || match operands[0] {
        Operand::Tensor(t) => t.concrete().expect("eager operands are concrete"),
        Operand::Scalar(_) => unreachable!("shape inference rejects a scalar first operand here"),
    };
    let view = |layout: Layout| Ok(Tensor::from_concrete(first().storage.clone(), layout));
    let view_of = match operands[0] {
        Operand::Tensor(_) => op.view_of(&first().layout),
        Operand::Scalar(_) => ViewOf::NotAView,
    };
    match view_of {
        ViewOf::Layout(layout) => return view(layout),
        ViewOf::CopyFirst => {
            let dense = run(&Op::Contiguous, &operands[..1], location)?;
            return run(op, &[Operand::Tensor(&dense)], location);
        }
        ViewOf::NotAView => {}
    }
    match op {
        Op::Contiguous if first().layout.is_contiguous() => match operands[0] {
            Operand::Tensor(t) => Ok(t.clone()),
            Operand::Scalar(_) => unreachable!(),
        },
        // Like ATen's linear, a matmul kernel then a bias add: no dedicated kernel.
        Op::Linear => {
            let tensor = |i: usize| match operands.get(i) {
                Some(Operand::Tensor(t)) => Some(*t),
                _ => None,
            };
            linear(tensor(0).expect("checked"), tensor(1).expect("checked"), tensor(2), location)
        }
        // Like ATen's `cat`, operands of another dtype are converted to the promoted one first.
        Op::Cat { .. } if dtypes.iter().flatten().any(|&(d, _)| d != dtype) => {
            let converted = operands
                .iter()
                .map(|o| match o {
                    Operand::Tensor(t) => t.to_dtype_at(dtype, location),
                    Operand::Scalar(_) => unreachable!("shape inference rejects scalar operands of cat"),
                })
                .collect::<Result<Vec<Tensor>>>()?;
            let operands: Vec<Operand> = converted.iter().map(Operand::Tensor).collect();
            run(op, &operands, location)
        }
        Op::ScaledMm { .. } => {
            scaled_mm_support(device).map_err(|reason| Error::Unsupported {
                op: op.name(),
                device,
                reason,
                location,
            })?;
            kernel(op, operands, &out_shape, dtype, device)
                .map_err(|e| e.at(op.name(), device, operand_shapes(operands), location))
        }
        Op::CopyInto => match operands {
            [Operand::Tensor(target), Operand::Tensor(src)] => crate::tensor::inplace::write(target, src, location),
            _ => unreachable!("shape inference rejects scalar operands of copy_"),
        },
        Op::Cond { true_graph, false_graph } => {
            let Operand::Tensor(pred) = operands[0] else { unreachable!("shape inference rejects a scalar predicate") };
            let inputs: Vec<Tensor> = operands[1..]
                .iter()
                .map(|o| match o {
                    Operand::Tensor(t) => (*t).clone(),
                    Operand::Scalar(_) => unreachable!("shape inference rejects scalar operands of cond"),
                })
                .collect();
            let branch = if pred.item()? != 0.0 { true_graph } else { false_graph };
            let Some(mode) = dispatch::mode() else {
                unreachable!("a Subgraph is built by fx, which registers its dispatch mode first")
            };
            let mut outputs = mode.run_subgraph(branch, &inputs, location)?;
            Ok(outputs.remove(0))
        }
        _ => {
            if device == Device::Cpu {
                fits_in_memory(op, operands, &out_shape, location)?;
            }
            kernel(op, operands, &out_shape, dtype, device)
                .map_err(|e| e.at(op.name(), device, operand_shapes(operands), location))
        }
    }
}

/// Why `device` cannot run an FP8 matrix product, if it cannot: the FP8 tensor cores arrived with
/// compute capability 8.9 (Ada) and 9.0 (Hopper); `torch._scaled_mm` refuses other devices too.
fn scaled_mm_support(device: Device) -> std::result::Result<(), String> {
    match device {
        Device::Cpu => Err("FP8 matrix products need a GPU of compute capability 8.9 or newer (Ada, Hopper); \
                            on the CPU, convert the operands to bf16 and use matmul"
            .into()),
        Device::Cuda(ordinal) => {
            let gpu = cuda::CudaDevice::get(ordinal).map_err(|e| e.to_string())?;
            let (major, minor) = gpu.facts().compute_capability;
            if (major, minor) < (8, 9) {
                return Err(format!(
                    "FP8 matrix products need compute capability 8.9 or newer; this GPU has {major}.{minor}: \
                     convert the operands to bf16 and use matmul"
                ));
            }
            Ok(())
        }
    }
}

/// `x @ weight.T + bias`, as ATen's linear computes it: a matmul kernel then a bias add, no
/// dedicated kernel. AOT's decomposition of `linear` is this function, recorded.
pub(crate) fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, location: SourceLocation) -> Result<Tensor> {
    let weight_t = Op::Permute { dims: vec![1, 0] }.apply(&[Operand::Tensor(weight)], location)?;
    let product = Op::Matmul.apply(&[Operand::Tensor(x), Operand::Tensor(&weight_t)], location)?;
    match bias {
        Some(b) => Op::Binary(BinaryOp::Add).apply(&[Operand::Tensor(&product), Operand::Tensor(b)], location),
        None => Ok(product),
    }
}

/// Runs one device kernel into a fresh dense buffer of `dtype`, from the provider this thread runs
/// on ([`crate::device::with_kernels`]).
fn kernel(
    op: &Op,
    operands: &[Operand],
    out_shape: &[usize],
    dtype: DType,
    device: Device,
) -> Result<Tensor, CudaError> {
    let _launch = profiler::launch(op.name(), EventKind::Eager, device, || operand_shapes(operands));
    let storage = match device {
        Device::Cpu => {
            let inputs: Vec<cpu::Input> = operands
                .iter()
                .map(|o| match o {
                    Operand::Scalar(v) => cpu::Input::Scalar(*v),
                    Operand::Tensor(t) => match parts(t) {
                        (Storage::Cpu(buffer), layout) => cpu::Input::Tensor { buffer, layout },
                        (Storage::Cuda(_), _) => unreachable!("common_device checked every operand is on the CPU"),
                    },
                })
                .collect();
            Storage::Cpu(cpu::execute(op, &inputs, out_shape, dtype))
        }
        Device::Cuda(_) => {
            let mut gpu = None;
            let inputs: Vec<cuda::Input> = operands
                .iter()
                .map(|o| match o {
                    Operand::Scalar(v) => cuda::Input::Scalar(*v),
                    Operand::Tensor(t) => match parts(t) {
                        (Storage::Cuda(buffer), layout) => {
                            gpu.get_or_insert_with(|| buffer.device().clone());
                            cuda::Input::Tensor { buffer, layout }
                        }
                        (Storage::Cpu(_), _) => unreachable!("common_device checked every operand is on one GPU"),
                    },
                })
                .collect();
            let gpu = gpu.expect("shape inference requires a tensor operand");
            Storage::Cuda(cuda::execute(&gpu, op, &inputs, out_shape, dtype)?)
        }
    };
    Ok(Tensor::from_concrete(Arc::new(storage), Layout::contiguous(out_shape)))
}

/// Refuses a CPU kernel whose output, or the dense copy of an input it may make, could never fit
/// in memory (a broadcast view can be far larger than its buffer): the allocation would abort the
/// process instead of failing.
fn fits_in_memory(op: &Op, operands: &[Operand], out_shape: &[usize], location: SourceLocation) -> Result<()> {
    let largest = operands.iter().filter_map(|o| o.shape()).map(numel).chain([numel(out_shape)]).max().unwrap_or(0);
    match cpu::too_large(largest) {
        None => Ok(()),
        Some(why) => {
            Err(Error::InvalidArgument { op: op.name(), message: format!("cannot run on the CPU: {why}"), location })
        }
    }
}

/// The shapes of the tensor operands, in order.
fn operand_shapes(operands: &[Operand]) -> Vec<Vec<usize>> {
    operands.iter().filter_map(|o| o.shape().map(<[usize]>::to_vec)).collect()
}

/// A concrete operand's storage and layout.
fn parts(t: &Tensor) -> (&Storage, &Layout) {
    let Concrete { storage, layout, .. } = t.concrete().expect("eager operands are concrete");
    (storage, layout)
}

/// The one device every tensor operand is on.
fn common_device(op: &'static str, operands: &[Operand], location: SourceLocation) -> Result<Device> {
    let mut devices: Vec<Device> = Vec::new();
    for operand in operands {
        if let Operand::Tensor(t) = operand
            && !devices.contains(&t.device())
        {
            devices.push(t.device());
        }
    }
    match devices.as_slice() {
        [] => Err(Error::InvalidArgument { op, message: "needs at least one tensor operand".into(), location }),
        [device] => Ok(*device),
        _ => Err(Error::DeviceMismatch {
            op,
            devices: devices.iter().map(ToString::to_string).collect::<Vec<_>>().join(" and "),
            location,
        }),
    }
}
