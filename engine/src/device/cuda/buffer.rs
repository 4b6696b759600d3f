//! Tensor memory on a GPU, the CUDA half of [`crate::tensor::Storage`]: a stream-ordered device
//! allocation of `f32`s (or one the device's pool kept from a freed buffer), filled from and read
//! back to the host.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};

use super::context::CudaDevice;
use super::error::CudaError;

/// A device buffer of `f32` elements.
pub(crate) struct CudaBuffer {
    /// Handed to the device's pool on drop instead of being freed.
    slice: ManuallyDrop<CudaSlice<f32>>,
    len: usize,
    device: Arc<CudaDevice>,
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        // SAFETY: the slice is not touched again; the pool keeps it or drops it (freeing it in
        // stream order).
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        self.device.pool().give(slice);
    }
}

impl CudaBuffer {
    /// An uninitialised buffer of `len` elements: a freed one of the same length from the pool, or
    /// a new stream-ordered allocation, which costs no synchronisation. Freeing (on drop) is
    /// ordered after every queued use.
    pub fn alloc(device: &Arc<CudaDevice>, len: usize) -> Result<CudaBuffer, CudaError> {
        // CUDA refuses zero-byte allocations; an empty tensor still gets a valid address.
        let elements = len.max(1);
        let slice = match device.pool().take(elements) {
            Some(slice) => slice,
            // SAFETY: every kernel writes its whole output before anything reads it.
            None => match unsafe { device.stream().alloc::<f32>(elements) } {
                Ok(slice) => slice,
                Err(_) => {
                    device.pool().release();
                    // SAFETY: as above.
                    unsafe { device.stream().alloc::<f32>(elements) }?
                }
            },
        };
        Ok(CudaBuffer { slice: ManuallyDrop::new(slice), len, device: device.clone() })
    }

    /// A buffer holding a copy of `data`.
    pub fn from_host(device: &Arc<CudaDevice>, data: &[f32]) -> Result<CudaBuffer, CudaError> {
        let mut buffer = CudaBuffer::alloc(device, data.len())?;
        if !data.is_empty() {
            device.stream().memcpy_htod(data, &mut *buffer.slice)?;
        }
        Ok(buffer)
    }

    /// Sets every element to 0.0 (queued on the stream).
    pub fn fill_zeros(&mut self) -> Result<(), CudaError> {
        self.device.stream().memset_zeros(&mut *self.slice)?;
        Ok(())
    }

    /// Queues a device-to-device copy of `src` (of the same length) into this buffer.
    pub fn copy_from(&mut self, src: &CudaBuffer) -> Result<(), CudaError> {
        self.device.stream().memcpy_dtod(&*src.slice, &mut *self.slice)?;
        Ok(())
    }

    /// Queues a copy of `len` elements of `src` from `src_start` over elements `start..` of this
    /// buffer, through a shared handle (device memory is not Rust memory: the copy is ordered on
    /// the stream with every kernel reading the buffer). How a parameter is updated in place.
    pub fn write_from(&self, start: usize, src: &CudaBuffer, src_start: usize, len: usize) -> Result<(), CudaError> {
        if len == 0 {
            return Ok(());
        }
        assert!(start + len <= self.len && src_start + len <= src.len, "copy within both buffers");
        let bytes = len * std::mem::size_of::<f32>();
        // SAFETY: both ranges lie inside live allocations of this device (checked above), and the
        // copy is queued on the stream every kernel of the device uses, after what reads them.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                self.ptr_at(start),
                src.ptr_at(src_start),
                bytes,
                self.device.stream().cu_stream(),
            )
        }?;
        Ok(())
    }

    /// Elements `start..start + len`, copied to the host once every queued operation is done.
    pub fn read(&self, start: usize, len: usize) -> Result<Vec<f32>, CudaError> {
        let mut host = vec![0.0; len];
        if len > 0 {
            self.device.stream().memcpy_dtoh(&self.slice.slice(start..start + len), &mut host)?;
        }
        self.device.synchronize()?;
        Ok(host)
    }

    /// The device address of element 0, for kernel arguments.
    pub fn ptr(&self) -> u64 {
        // Event tracking is off (one stream), so the guard records nothing.
        let (ptr, _guard) = self.slice.device_ptr(self.device.stream());
        ptr
    }

    /// The device address of element `index`.
    pub fn ptr_at(&self, index: usize) -> u64 {
        self.ptr() + (index * std::mem::size_of::<f32>()) as u64
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The device holding the buffer.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }
}
