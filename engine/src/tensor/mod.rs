//! The `Tensor` type, the analogue of `torch.Tensor`: either concrete (a buffer on a device plus a
//! layout) or symbolic (a value inside a graph being traced, like a Dynamo `FakeTensor` with a
//! proxy attached).
//!
//! Tensors are immutable and cheap to clone (an `Arc`). Every op is a method on `Tensor` (defined
//! in the private `methods` module) that returns a new tensor; views share the buffer.

pub mod autocast;
pub mod autograd;
mod constructors;
mod dims;
pub(crate) mod dispatch;
pub(crate) mod inplace;
mod meta;
mod methods;
mod random;
mod storage;
mod transfer;

use std::fmt;
use std::sync::Arc;

pub(crate) use dims::Dims;
pub use meta::TensorMeta;
pub use methods::AttnMask;
pub(crate) use storage::{Storage, Writing, write_epoch, wrote};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::layout::Layout;
use autograd::AutogradMeta;

/// An N-dimensional array of `f32`, `f16` or `bf16` (or, as matrix-product inputs, 8-bit floats)
/// on a device, or a symbolic stand-in for one during tracing.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) repr: Arc<Repr>,
    /// Autograd's record of this handle: a leaf that requires grad, or the node of the tape that
    /// computed it (see [`crate::tensor::autograd`]); `None` for a tensor outside autograd.
    pub(crate) autograd: Option<Arc<AutogradMeta>>,
}

/// The two kinds of tensor.
pub(crate) enum Repr {
    Concrete(Concrete),
    Symbolic(Symbolic),
}

/// A tensor with data: a shared buffer and the layout of this view onto it.
pub(crate) struct Concrete {
    pub storage: Arc<Storage>,
    pub layout: Layout,
    /// A name given with [`Tensor::with_name`], used for the placeholder when a trace lifts it.
    pub name: Option<Arc<str>>,
}

/// A tensor that exists only inside a trace: it knows its metadata and which traced value it is.
pub(crate) struct Symbolic {
    pub trace: u64,
    pub value: u64,
    pub shape: Dims,
    pub dtype: DType,
    pub device: Device,
}

/// An operand of an op: a tensor or a scalar constant (`x.mul(2.0)`).
#[derive(Clone, Copy)]
pub enum Operand<'a> {
    /// A tensor operand.
    Tensor(&'a Tensor),
    /// A scalar broadcast against the tensor operands and baked into graphs as a constant.
    Scalar(f32),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}

impl From<f32> for Operand<'_> {
    fn from(v: f32) -> Self {
        Operand::Scalar(v)
    }
}

impl<'a> Operand<'a> {
    /// The operand's shape, or `None` for a scalar.
    pub fn shape(&self) -> Option<&'a [usize]> {
        self.tensor().map(Tensor::shape)
    }

    /// The tensor, or `None` for a scalar.
    pub fn tensor(&self) -> Option<&'a Tensor> {
        match *self {
            Operand::Tensor(t) => Some(t),
            Operand::Scalar(_) => None,
        }
    }
}

impl Tensor {
    pub(crate) fn from_concrete(storage: Arc<Storage>, layout: Layout) -> Tensor {
        Tensor { repr: Arc::new(Repr::Concrete(Concrete { storage, layout, name: None })), autograd: None }
    }

    pub(crate) fn from_symbolic(symbolic: Symbolic) -> Tensor {
        Tensor { repr: Arc::new(Repr::Symbolic(symbolic)), autograd: None }
    }

    /// The concrete parts, or `None` for a symbolic tensor.
    pub(crate) fn concrete(&self) -> Option<&Concrete> {
        match &*self.repr {
            Repr::Concrete(c) => Some(c),
            Repr::Symbolic(_) => None,
        }
    }

    /// Whether both are concrete views of the same memory from the same first element.
    pub(crate) fn shares_memory(&self, other: &Tensor) -> bool {
        match (self.concrete(), other.concrete()) {
            (Some(a), Some(b)) => Arc::ptr_eq(&a.storage, &b.storage) && a.layout.offset() == b.layout.offset(),
            _ => false,
        }
    }

    pub(crate) fn symbolic(&self) -> Option<&Symbolic> {
        match &*self.repr {
            Repr::Symbolic(s) => Some(s),
            Repr::Concrete(_) => None,
        }
    }

    /// Sizes of each dimension.
    pub fn shape(&self) -> &[usize] {
        match &*self.repr {
            Repr::Concrete(c) => c.layout.shape(),
            Repr::Symbolic(s) => &s.shape,
        }
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match &*self.repr {
            Repr::Concrete(c) => c.storage.dtype(),
            Repr::Symbolic(s) => s.dtype,
        }
    }

    /// The device holding the data.
    pub fn device(&self) -> Device {
        match &*self.repr {
            Repr::Concrete(c) => c.storage.device(),
            Repr::Symbolic(s) => s.device,
        }
    }

    /// Shape, dtype and device together.
    pub fn meta(&self) -> TensorMeta {
        TensorMeta { shape: self.shape().to_vec(), dtype: self.dtype(), device: self.device() }
    }

    /// Strides in elements of a concrete tensor, or `None` inside a trace (traced values have no
    /// memory yet).
    pub fn strides(&self) -> Option<&[usize]> {
        self.concrete().map(|c| c.layout.strides())
    }

    /// True for a tensor standing in for a value during tracing (inside a compiled function).
    pub fn is_symbolic(&self) -> bool {
        self.symbolic().is_some()
    }

    /// The name given with [`Tensor::with_name`], if any.
    pub fn name(&self) -> Option<&str> {
        self.concrete().and_then(|c| c.name.as_deref())
    }

    /// The same tensor (sharing its data) carrying a name, which graphs use for the placeholder
    /// when a compiled function captures it: give a model's parameters names such as
    /// `fc1.weight` and they read that way in every graph.
    pub fn with_name(&self, name: &str) -> Tensor {
        match &*self.repr {
            Repr::Concrete(c) => Tensor {
                repr: Arc::new(Repr::Concrete(Concrete {
                    storage: c.storage.clone(),
                    layout: c.layout.clone(),
                    name: Some(name.into()),
                })),
                autograd: self.autograd.clone(),
            },
            Repr::Symbolic(_) => self.clone(),
        }
    }

    /// This tensor with exactly row-major strides: itself, or a view of the same memory when only
    /// the strides of size-1 dims differ (they address nothing), else a dense copy. Compiled code
    /// checks its inputs' strides exactly; AOT hands it values from elsewhere this way.
    pub(crate) fn with_dense_strides(&self) -> Result<Tensor> {
        let Some(c) = self.concrete() else { return Ok(self.clone()) };
        let dense = crate::layout::contiguous_strides(self.shape());
        if c.layout.strides() == dense.as_slice() {
            return Ok(self.clone());
        }
        if c.layout.is_contiguous() {
            let layout = Layout::new(self.shape().to_vec(), dense, c.layout.offset());
            return Ok(Tensor {
                repr: Arc::new(Repr::Concrete(Concrete { storage: c.storage.clone(), layout, name: None })),
                autograd: None,
            });
        }
        self.contiguous()
    }

    /// All elements in row-major order, as `f32` whatever the tensor's dtype (every dtype here
    /// widens to `f32` exactly). Inside a compiled function this needs a concrete value: a graph
    /// break.
    #[track_caller]
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        let location = SourceLocation::caller();
        let tensor = self.concretize("Tensor::to_vec() needs the tensor's values", location)?;
        tensor.values("to_vec", location)
    }

    /// The value of a one-element tensor. Inside a compiled function this needs a concrete value:
    /// a graph break.
    #[track_caller]
    pub fn item(&self) -> Result<f32> {
        let location = SourceLocation::caller();
        if self.numel() != 1 {
            return Err(Error::InvalidArgument {
                op: "item",
                message: format!("needs a tensor with exactly one element, got shape {:?}", self.shape()),
                location,
            });
        }
        let tensor = self.concretize("Tensor::item() needs the tensor's value", location)?;
        Ok(tensor.values("item", location)?[0])
    }

    /// This tensor with values: itself when concrete; for a symbolic one, what the tracer's mode
    /// gives (a graph break) or its error. `reason` says what needs the values.
    pub(crate) fn concretize(&self, reason: &str, location: SourceLocation) -> Result<Tensor> {
        match dispatch::mode() {
            Some(mode) => mode.concretize(self, reason, location),
            // No trace has ever started, so no symbolic tensor exists.
            None => Ok(self.clone()),
        }
    }

    /// A concrete tensor's elements on the host; CUDA failures name `op` and `location`.
    fn values(&self, op: &'static str, location: SourceLocation) -> Result<Vec<f32>> {
        let c = self.concrete().expect("callers concretize first");
        if let Some(why) = crate::device::cpu::too_large(self.numel()) {
            let message = format!("the values of a tensor of shape {:?} cannot be copied out: {why}", self.shape());
            return Err(Error::InvalidArgument { op, message, location });
        }
        c.storage.gather(&c.layout).map_err(|e| e.at(op, self.device(), vec![self.shape().to_vec()], location))
    }
}

impl fmt::Debug for Tensor {
    /// Metadata only, never values: `Tensor(f32[2, 3], cpu)`. Safe to print inside a trace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_symbolic() { "symbolic " } else { "" };
        write!(f, "Tensor({kind}{})", self.meta())
    }
}

impl fmt::Display for Tensor {
    /// The values, nested by dimension, like `print(tensor)` in PyTorch. Inside a compiled
    /// function a tensor's values may not exist yet: formatting it is then a graph break (the
    /// graph so far runs to compute them). Where a break is not allowed, it prints its metadata
    /// and the compiled call fails with the break's reason.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known;
        let c = match self.concrete() {
            Some(c) => c,
            None => match dispatch::mode().and_then(|mode| mode.values_for_display(self)) {
                Some(value) => {
                    known = value;
                    known.concrete().expect("values_for_display returns a concrete tensor")
                }
                None => return fmt::Debug::fmt(self, f),
            },
        };
        let values = match c.storage.gather(&c.layout) {
            Ok(values) => values,
            Err(e) => return write!(f, "tensor(<values unavailable: {e}>)"),
        };
        write!(f, "tensor(")?;
        write_nested(f, self.shape(), &values)?;
        // As PyTorch prints them: the dtype only when it is not the default one.
        if self.dtype() != DType::F32 {
            write!(f, ", dtype={}", self.dtype())?;
        }
        write!(f, ")")
    }
}

fn write_nested(f: &mut fmt::Formatter<'_>, shape: &[usize], values: &[f32]) -> fmt::Result {
    match shape.split_first() {
        None => write!(f, "{:.4}", values[0]),
        Some((&n, rest)) => {
            let step: usize = rest.iter().product();
            write!(f, "[")?;
            for i in 0..n {
                if i > 0 {
                    write!(f, ", ")?;
                }
                write_nested(f, rest, &values[i * step..(i + 1) * step])?;
            }
            write!(f, "]")
        }
    }
}
