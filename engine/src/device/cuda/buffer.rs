//! Tensor memory on a GPU, the CUDA half of [`crate::tensor::Storage`]: a stream-ordered device
//! allocation of `f32`s, filled from and read back to the host, and the pool that keeps freed
//! buffers for reuse, as PyTorch's caching allocator does.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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

/// Freed buffers kept for the next allocation of the same length, the analogue of PyTorch's
/// CUDA caching allocator: a compiled call allocates and frees the same buffers every time, and
/// the driver's allocate and free cost more host time than a lookup here. Reuse is safe because
/// every operation goes to the device's one stream: work queued after the free runs after every
/// earlier use of the buffer.
#[derive(Default)]
pub(crate) struct BufferPool {
    free: Mutex<Kept>,
    /// While a CUDA graph is being recorded, buffers bypass the pool: a buffer allocated and freed
    /// inside the recording belongs to the graph, which writes it again on every replay.
    recording: AtomicBool,
}

/// The buffers a pool keeps, by length, and their bytes in all.
#[derive(Default)]
struct Kept {
    by_length: HashMap<usize, Vec<CudaSlice<f32>>>,
    bytes: usize,
}

/// Buffers kept per length, and bytes kept in all; past these, freed buffers go back to the driver.
const POOLED_PER_LENGTH: usize = 8;
const POOLED_BYTES: usize = 1 << 30;

impl BufferPool {
    fn take(&self, len: usize) -> Option<CudaSlice<f32>> {
        if self.recording.load(Ordering::Relaxed) {
            return None;
        }
        let mut kept = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let slice = kept.by_length.get_mut(&len)?.pop()?;
        kept.bytes -= len * 4;
        Some(slice)
    }

    fn give(&self, slice: CudaSlice<f32>) {
        if self.recording.load(Ordering::Relaxed) {
            return;
        }
        let mut kept = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = slice.len() * 4;
        if kept.bytes + bytes > POOLED_BYTES {
            return;
        }
        let same = kept.by_length.entry(slice.len()).or_default();
        if same.len() < POOLED_PER_LENGTH {
            same.push(slice);
            kept.bytes += bytes;
        }
    }

    /// Gives every kept buffer back to the driver (before retrying an allocation that failed).
    fn release(&self) {
        *self.free.lock().unwrap_or_else(|p| p.into_inner()) = Kept::default();
    }

    /// Marks the start (`true`) or end of a CUDA graph recording.
    pub(crate) fn set_recording(&self, recording: bool) {
        self.recording.store(recording, Ordering::Relaxed);
    }
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
