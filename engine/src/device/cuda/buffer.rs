//! Tensor memory on a GPU, the CUDA half of [`crate::tensor::Storage`]: a stream-ordered device
//! allocation of elements of one dtype (or one the device's pool kept from a freed buffer), filled
//! from and read back to the host.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};

use super::context::CudaDevice;
use super::error::CudaError;
use crate::dtype::DType;

/// A device buffer of `len` elements of `dtype`.
pub(crate) struct CudaBuffer {
    /// The bytes; handed to the device's pool on drop instead of being freed.
    slice: ManuallyDrop<CudaSlice<u8>>,
    len: usize,
    dtype: DType,
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
    /// An uninitialised buffer of `len` `f32`s (see [`CudaBuffer::alloc_of`]).
    pub fn alloc(device: &Arc<CudaDevice>, len: usize) -> Result<CudaBuffer, CudaError> {
        CudaBuffer::alloc_of(device, DType::F32, len)
    }

    /// An uninitialised buffer of `len` elements of `dtype`: a freed one of the same size from
    /// the pool, or a new stream-ordered allocation, which costs no synchronisation. Freeing (on
    /// drop) is ordered after every queued use.
    pub fn alloc_of(device: &Arc<CudaDevice>, dtype: DType, len: usize) -> Result<CudaBuffer, CudaError> {
        // CUDA refuses zero-byte allocations; an empty tensor still gets a valid address. Sizes
        // round up to 16 bytes, so that every buffer can be read a 16-byte vector at a time.
        let bytes = (len * dtype.size_in_bytes()).max(1).next_multiple_of(16);
        let slice = match device.pool().take(bytes) {
            Some(slice) => slice,
            // SAFETY: every kernel writes its whole output before anything reads it.
            None => match unsafe { device.stream().alloc::<u8>(bytes) } {
                Ok(slice) => slice,
                Err(_) => {
                    device.pool().release();
                    // SAFETY: as above.
                    unsafe { device.stream().alloc::<u8>(bytes) }?
                }
            },
        };
        Ok(CudaBuffer { slice: ManuallyDrop::new(slice), len, dtype, device: device.clone() })
    }

    /// An `f32` buffer holding a copy of `data`.
    pub fn from_host(device: &Arc<CudaDevice>, data: &[f32]) -> Result<CudaBuffer, CudaError> {
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
        CudaBuffer::from_bytes(device, DType::F32, &bytes)
    }

    /// A buffer of `dtype` holding a copy of `bytes` (its elements in their own representation).
    pub fn from_bytes(device: &Arc<CudaDevice>, dtype: DType, bytes: &[u8]) -> Result<CudaBuffer, CudaError> {
        let mut buffer = CudaBuffer::alloc_of(device, dtype, bytes.len() / dtype.size_in_bytes())?;
        if !bytes.is_empty() {
            let mut target = buffer.slice.slice_mut(0..bytes.len());
            device.stream().memcpy_htod(bytes, &mut target)?;
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

    /// Queues a copy of every element of `src` (of this buffer's dtype, and no longer) into the
    /// start of this buffer: how a value computed elsewhere lands in a planned buffer that
    /// kernels already hold the address of.
    pub fn write_prefix(&self, src: &CudaBuffer) -> Result<(), CudaError> {
        debug_assert!(src.dtype == self.dtype && src.len <= self.len, "the source fits the buffer");
        self.write_from(0, src, 0, src.len)
    }

    /// Queues a copy of `len` elements of `src` (of this buffer's dtype) from `src_start` over
    /// elements `start..` of this buffer, through a shared handle (device memory is not Rust
    /// memory: the copy is ordered on the stream with every kernel reading the buffer). How a
    /// parameter is updated in place.
    pub fn write_from(&self, start: usize, src: &CudaBuffer, src_start: usize, len: usize) -> Result<(), CudaError> {
        if len == 0 {
            return Ok(());
        }
        assert!(start + len <= self.len && src_start + len <= src.len, "copy within both buffers");
        assert_eq!(src.dtype, self.dtype, "a copy between buffers of one dtype");
        let bytes = len * self.dtype.size_in_bytes();
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

    /// The bytes of elements `start..start + len`, copied to the host once every queued
    /// operation is done.
    pub fn read_bytes(&self, start: usize, len: usize) -> Result<Vec<u8>, CudaError> {
        let size = self.dtype.size_in_bytes();
        let mut host = vec![0u8; len * size];
        if len > 0 {
            self.device.stream().memcpy_dtoh(&self.slice.slice(start * size..(start + len) * size), &mut host)?;
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
        self.ptr() + (index * self.dtype.size_in_bytes()) as u64
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
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
