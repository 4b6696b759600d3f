//! Precision settings: `torch.set_float32_matmul_precision` and the state of `torch.autocast`.
//!
//! - The float32 matrix-product precision is process-wide, as in PyTorch: `"highest"` (the
//!   default) multiplies in float32; `"high"` lets a GPU use TF32 tensor cores (10-bit mantissa
//!   inputs, float32 accumulation), about 8x the float32 throughput on an H100 for a relative
//!   error near 1e-3; `"medium"` lets it use bf16. The CPU computes in float32 whatever the
//!   setting.
//! - Autocast is per thread and per device type, as in PyTorch: while it is on for a device
//!   type, ops on tensors of that type run in the precision its op lists say (matrix products
//!   and attention in the autocast dtype, softmax, norms and reductions in float32; see
//!   [`crate::tensor::autocast`]). The state is part of what a compiled function guards on.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::device::Device;
use crate::dtype::DType;

/// How float32 matrix products may compute, `torch.set_float32_matmul_precision`'s three levels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum MatmulPrecision {
    /// Float32 multiplies (the default).
    #[default]
    Highest,
    /// TF32 tensor cores on GPUs that have them (compute capability 8.0 on).
    High,
    /// bf16 tensor cores on GPUs that have them.
    Medium,
}

impl MatmulPrecision {
    /// PyTorch's name for it.
    pub fn name(self) -> &'static str {
        match self {
            MatmulPrecision::Highest => "highest",
            MatmulPrecision::High => "high",
            MatmulPrecision::Medium => "medium",
        }
    }
}

impl fmt::Display for MatmulPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for MatmulPrecision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "highest" => Ok(MatmulPrecision::Highest),
            "high" => Ok(MatmulPrecision::High),
            "medium" => Ok(MatmulPrecision::Medium),
            _ => Err(format!("unknown matmul precision `{s}`; expected highest, high or medium")),
        }
    }
}

static MATMUL_PRECISION: AtomicU8 = AtomicU8::new(0);

/// Sets how float32 matrix products compute from now on, in every thread:
/// `torch.set_float32_matmul_precision("high")` is `set_float32_matmul_precision(MatmulPrecision::High)`.
pub fn set_float32_matmul_precision(precision: MatmulPrecision) {
    MATMUL_PRECISION.store(precision as u8, Ordering::Relaxed);
}

/// The float32 matrix-product precision in force (`torch.get_float32_matmul_precision()`).
pub fn float32_matmul_precision() -> MatmulPrecision {
    match MATMUL_PRECISION.load(Ordering::Relaxed) {
        1 => MatmulPrecision::High,
        2 => MatmulPrecision::Medium,
        _ => MatmulPrecision::Highest,
    }
}

/// Autocast as it stands on this thread: the lower-precision dtype for CPU ops and for GPU ops,
/// each `None` when autocast is off for that device type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AutocastState {
    /// The dtype matrix products of CPU tensors run in, when on.
    pub cpu: Option<DType>,
    /// The dtype matrix products of GPU tensors run in, when on.
    pub cuda: Option<DType>,
}

impl AutocastState {
    /// The autocast dtype for ops on `device`, if autocast is on for its type.
    pub fn for_device(self, device: Device) -> Option<DType> {
        match device {
            Device::Cpu => self.cpu,
            Device::Cuda(_) => self.cuda,
        }
    }

    /// Whether autocast is off for every device type.
    pub fn is_off(self) -> bool {
        self.cpu.is_none() && self.cuda.is_none()
    }
}

impl fmt::Display for AutocastState {
    /// `off`, or the device types it is on for: `cuda:bf16`, `cpu:bf16, cuda:f16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<String> = [("cpu", self.cpu), ("cuda", self.cuda)]
            .into_iter()
            .filter_map(|(device, dtype)| dtype.map(|d| format!("{device}:{d}")))
            .collect();
        if on.is_empty() { f.write_str("off") } else { f.write_str(&on.join(", ")) }
    }
}

thread_local! {
    static AUTOCAST: Cell<AutocastState> = const { Cell::new(AutocastState { cpu: None, cuda: None }) };
}

/// Autocast on this thread now (`torch.is_autocast_enabled()` and `torch.get_autocast_dtype()`
/// for each device type).
pub fn autocast_state() -> AutocastState {
    AUTOCAST.get()
}

/// Runs `f` with autocast to `dtype` on for ops on `device`'s type (any GPU for a
/// `Device::Cuda`), then restores the state before (also when `f` panics): `with
/// torch.autocast(device_type, dtype):`. `None` turns autocast off for that type inside `f`
/// (`torch.autocast(..., enabled=False)`). Autocast to an 8-bit float is not a thing: only
/// `bf16` and `f16` make sense, and `f32` means off.
///
/// ```
/// use engine::{DType, Device, Tensor, precision::autocast};
/// let x = Tensor::randn(&[4, 8], 0);
/// let w = Tensor::randn(&[8, 8], 1);
/// let y = autocast(Device::Cpu, Some(DType::BF16), || x.matmul(&w))?;
/// assert_eq!(y.dtype(), DType::BF16);
/// let p = autocast(Device::Cpu, Some(DType::BF16), || y.softmax(-1))?;
/// assert_eq!(p.dtype(), DType::F32, "softmax runs in float32 under autocast");
/// # Ok::<(), engine::Error>(())
/// ```
pub fn autocast<R>(device: Device, dtype: Option<DType>, f: impl FnOnce() -> R) -> R {
    let _guard = AutocastGuard::enter(device, dtype);
    f()
}

/// Autocast on while the guard lives, the state before restored when it drops: what
/// [`autocast`] does around a closure, for code that cannot be one.
pub struct AutocastGuard {
    before: AutocastState,
}

impl AutocastGuard {
    /// Turns autocast to `dtype` on (or off, for `None` or `f32`) for ops on `device`'s type.
    pub fn enter(device: Device, dtype: Option<DType>) -> AutocastGuard {
        let dtype = dtype.filter(|d| d.is_half());
        let before = AUTOCAST.get();
        let mut state = before;
        match device {
            Device::Cpu => state.cpu = dtype,
            Device::Cuda(_) => state.cuda = dtype,
        }
        AUTOCAST.set(state);
        AutocastGuard { before }
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        AUTOCAST.set(self.before);
    }
}
