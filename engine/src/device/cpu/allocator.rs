//! The CPU allocator: c10's `CPUAllocator`, with a cache of freed buffers in front of it, the way
//! PyTorch's CUDA caching allocator keeps freed blocks for the next request of that size.
//!
//! A fresh buffer of many megabytes costs more than the kernel that fills it: the operating
//! system hands out large allocations as untouched pages, and the first write to each 4 KiB page
//! traps into the kernel (on a virtual machine, about a microsecond a page: 64 MB of output is
//! 16 K faults, several milliseconds, against about one for a fused kernel to write it). A model
//! asks for the same sizes on every call, so a buffer freed by one call is handed to the next
//! request of the same size, pages already mapped. Small buffers go straight to the system
//! allocator, which already reuses them cheaply.
//!
//! A cached buffer holds whatever its last user wrote: every kernel that takes one writes each
//! element of it before anything reads it.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// Buffers smaller than this (in elements: 256 KiB) are not cached.
const MIN_CACHED: usize = 1 << 16;
/// Most bytes the cache keeps; a buffer freed past this is returned to the system.
const MAX_CACHED_BYTES: usize = 1 << 30;

/// Freed buffers by length, and their total size.
struct Cache {
    free: HashMap<usize, Vec<Vec<f32>>>,
    bytes: usize,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// A buffer of `len` elements whose contents are unspecified (zeros, or what an earlier tensor
/// left): the caller writes every element before reading any.
pub(crate) fn uninit(len: usize) -> Vec<f32> {
    if len >= MIN_CACHED {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cache) = cache.as_mut()
            && let Some(buffer) = cache.free.get_mut(&len).and_then(Vec::pop)
        {
            cache.bytes -= len * size_of::<f32>();
            return buffer;
        }
    }
    vec![0.0; len]
}

/// Keeps `buffer` for the next [`uninit`] of its length, while the cache has room.
fn recycle(buffer: Vec<f32>) {
    let (len, bytes) = (buffer.len(), buffer.capacity() * size_of::<f32>());
    if len < MIN_CACHED || buffer.capacity() != len {
        return;
    }
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(|| Cache { free: HashMap::new(), bytes: 0 });
    if cache.bytes + bytes <= MAX_CACHED_BYTES {
        cache.bytes += bytes;
        cache.free.entry(len).or_default().push(buffer);
    }
}

/// The memory of a CPU tensor: a plain vector that goes back to the allocator's cache when the
/// last tensor using it is dropped.
pub(crate) struct HostBuffer(Vec<f32>);

impl From<Vec<f32>> for HostBuffer {
    fn from(data: Vec<f32>) -> HostBuffer {
        HostBuffer(data)
    }
}

impl Deref for HostBuffer {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.0
    }
}

impl DerefMut for HostBuffer {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        recycle(std::mem::take(&mut self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_buffer_is_handed_to_the_next_request_of_its_size() {
        // A length no other test uses, so that the cache's other users cannot take it between.
        let len = MIN_CACHED + 12_345;
        let mut first = HostBuffer::from(uninit(len));
        first[7] = 42.0;
        let address = first.as_ptr();
        drop(first);
        let second = uninit(len);
        assert_eq!((second.as_ptr(), second[7]), (address, 42.0), "the same memory, contents as left");
        let small = HostBuffer::from(vec![1.0; 16]);
        drop(small);
        assert_eq!(uninit(16), vec![0.0; 16], "small buffers come fresh from the system");
    }
}
