//! What can go wrong on the GPU, as one error type that the eager dispatcher turns into
//! [`crate::Error::Cuda`] naming the op, its shapes and the caller's line.

use std::fmt;

use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;

use crate::device::Device;
use crate::error::{Error, SourceLocation};

/// A failed CUDA driver call, kernel launch, cuBLAS call or kernel build, with CUDA's own words.
#[derive(Clone, Debug)]
pub struct CudaError {
    /// What failed and what CUDA said.
    pub message: String,
}

impl CudaError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> CudaError {
        CudaError { message: message.into() }
    }

    /// The engine error for op `op` on `device` with operands of `shapes`, called at `location`.
    pub fn at(self, op: &'static str, device: Device, shapes: Vec<Vec<usize>>, location: SourceLocation) -> Error {
        Error::Cuda { op, device, message: self.message, shapes, location }
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CudaError {}

impl From<DriverError> for CudaError {
    fn from(e: DriverError) -> Self {
        let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
        let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        CudaError::new(format!("{name}: {text}"))
    }
}

impl From<CublasError> for CudaError {
    fn from(e: CublasError) -> Self {
        CudaError::new(format!("cuBLAS: {:?}", e.0))
    }
}

impl From<Error> for CudaError {
    fn from(e: Error) -> Self {
        CudaError::new(e.to_string())
    }
}
