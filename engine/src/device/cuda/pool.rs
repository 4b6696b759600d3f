//! Freed GPU buffers kept for reuse, the analogue of PyTorch's CUDA caching allocator.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::CudaSlice;

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

/// The buffers a pool keeps, by length in bytes, and their bytes in all.
#[derive(Default)]
struct Kept {
    by_length: HashMap<usize, Vec<CudaSlice<u8>>>,
    bytes: usize,
}

/// Buffers kept per length, and bytes kept in all; past these, freed buffers go back to the driver.
const POOLED_PER_LENGTH: usize = 8;
const POOLED_BYTES: usize = 1 << 30;

impl BufferPool {
    /// A kept buffer of exactly `len` bytes, if there is one (never while recording).
    pub(crate) fn take(&self, len: usize) -> Option<CudaSlice<u8>> {
        if self.recording.load(Ordering::Relaxed) {
            return None;
        }
        let mut kept = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let slice = kept.by_length.get_mut(&len)?.pop()?;
        kept.bytes -= len;
        Some(slice)
    }

    /// Keeps a freed buffer, or drops it (freeing it in stream order) past the limits or while
    /// recording.
    pub(crate) fn give(&self, slice: CudaSlice<u8>) {
        if self.recording.load(Ordering::Relaxed) {
            return;
        }
        let mut kept = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = slice.len();
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
    pub(crate) fn release(&self) {
        *self.free.lock().unwrap_or_else(|p| p.into_inner()) = Kept::default();
    }

    /// Whether a CUDA graph is being recorded on the device now.
    pub(crate) fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    /// Marks the start (`true`) or end of a CUDA graph recording.
    pub(crate) fn set_recording(&self, recording: bool) {
        self.recording.store(recording, Ordering::Relaxed);
    }
}
