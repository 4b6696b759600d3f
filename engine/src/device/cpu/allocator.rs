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

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, OnceLock};

/// Buffers smaller than this (in elements: 256 KiB) are not cached.
const MIN_CACHED: usize = 1 << 16;

/// Freed buffers, the most recently freed last, and their total size in bytes.
struct Cache {
    free: VecDeque<Vec<f32>>,
    bytes: usize,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache { free: VecDeque::new(), bytes: 0 });

/// Most bytes the cache keeps: an eighth of the machine's memory, between 256 MiB and 4 GiB. A
/// model whose buffers do not all fit (eager attention's `[8, 12, 1024, 1024]` scores are 400 MB
/// each) evicts the buffers freed longest ago.
fn capacity() -> usize {
    static CAPACITY: OnceLock<usize> = OnceLock::new();
    *CAPACITY.get_or_init(|| {
        // SAFETY: sysconf only reads system configuration.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        let memory = usize::try_from(pages).unwrap_or(0).saturating_mul(usize::try_from(page).unwrap_or(0));
        (memory / 8).clamp(256 << 20, 4 << 30)
    })
}

/// A buffer of `len` elements whose contents are unspecified (zeros, or what an earlier tensor
/// left): the caller writes every element before reading any.
pub(crate) fn uninit(len: usize) -> Vec<f32> {
    if len >= MIN_CACHED {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = cache.free.iter().rposition(|b| b.len() == len)
            && let Some(buffer) = cache.free.remove(at)
        {
            cache.bytes -= len * size_of::<f32>();
            return buffer;
        }
    }
    vec![0.0; len]
}

/// Keeps `buffer` for the next [`uninit`] of its length, evicting the buffers freed longest ago
/// when the cache is full.
fn recycle(buffer: Vec<f32>) {
    let (len, bytes) = (buffer.len(), buffer.capacity() * size_of::<f32>());
    if len < MIN_CACHED || buffer.capacity() != len || bytes > capacity() {
        return;
    }
    let mut evicted = Vec::new();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    while cache.bytes + bytes > capacity() {
        let Some(old) = cache.free.pop_front() else { break };
        cache.bytes -= old.len() * size_of::<f32>();
        evicted.push(old);
    }
    cache.bytes += bytes;
    cache.free.push_back(buffer);
    // The evicted buffers are returned to the system after the lock is released.
    drop(cache);
    drop(evicted);
}

/// The memory of a CPU tensor: a plain vector that goes back to the allocator's cache when the
/// last tensor using it is dropped.
pub(crate) struct HostBuffer(Vec<f32>);

impl HostBuffer {
    /// The plain vector, which no longer goes back to the cache (it becomes a tensor's storage,
    /// whose own `HostBuffer` returns it).
    pub(crate) fn into_vec(mut self) -> Vec<f32> {
        std::mem::take(&mut self.0)
    }
}

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
