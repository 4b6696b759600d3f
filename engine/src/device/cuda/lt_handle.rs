//! The process's cuBLASLt handle for one device and the workspace its GEMMs use (see
//! [`super::cublaslt`]).

use std::sync::Arc;

use cudarc::cublaslt::result::{self as lt, CublasError};
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, CudaStream};

use super::error::CudaError;

/// The process's cuBLASLt handle for one device and its workspace (32 MiB on Hopper, as NVIDIA
/// recommends; 4 MiB before).
pub(crate) struct LtHandle {
    /// The handle.
    pub handle: sys::cublasLtHandle_t,
    /// The workspace every call may use.
    pub workspace: CudaSlice<u8>,
}

// SAFETY: a cuBLASLt handle may be used from several threads (cuBLASLt's documentation); the
// workspace is only ever used on the device's one stream, in order.
unsafe impl Send for LtHandle {}
unsafe impl Sync for LtHandle {}

impl LtHandle {
    /// A handle, and a workspace allocated on `stream` (sized for Hopper when `hopper`), or why
    /// cuBLASLt cannot run here.
    pub(crate) fn new(stream: &Arc<CudaStream>, hopper: bool) -> Result<LtHandle, CudaError> {
        // SAFETY: only tries to open the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::new(
                "cuBLASLt not found (libcublasLt.so.13): it ships with cuBLAS (Debian/Ubuntu: libcublas-13-0)",
            ));
        }
        stream.context().bind_to_thread()?;
        let handle = lt::create_handle()?;
        let bytes = if hopper { 32 << 20 } else { 4 << 20 };
        let workspace = stream.alloc_zeros::<u8>(bytes)?;
        Ok(LtHandle { handle, workspace })
    }
}

impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `new` and is destroyed once.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

impl From<CublasError> for CudaError {
    fn from(e: CublasError) -> Self {
        CudaError::new(format!("cuBLASLt: {:?}", e.0))
    }
}
