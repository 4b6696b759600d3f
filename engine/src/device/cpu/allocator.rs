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
//!
//! Every buffer starts on a 64-byte boundary, as c10's `alloc_cpu` aligns them: a 512-bit vector
//! load from an address that is not a multiple of 64 touches two cache lines, and a matrix
//! product whose rows all start 16 bytes past a line (where the system allocator puts large
//! blocks) runs markedly slower than the same product on aligned rows (bench/NOTES-cpu.md).

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, OnceLock};

/// Buffers smaller than this (in elements: 256 KiB) are not cached.
const MIN_CACHED: usize = 1 << 16;
/// The alignment of every buffer, in bytes: one cache line, and one 512-bit vector.
const ALIGN_BYTES: usize = 64;
/// Elements allocated past a buffer's length, so that an aligned start lies inside the memory
/// whatever address the system allocator returns (it aligns to at least one element).
const SLACK: usize = ALIGN_BYTES / size_of::<f32>() - 1;

/// Freed buffers, the most recently freed last, and their total size in bytes.
struct Cache {
    free: VecDeque<HostBuffer>,
    bytes: usize,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache { free: VecDeque::new(), bytes: 0 });

/// Most bytes the cache keeps: an eighth of the machine's memory, between 256 MiB and 4 GiB. A
/// model whose buffers do not all fit (eager attention's `[8, 12, 1024, 1024]` scores are 400 MB
/// each) evicts the buffers freed longest ago.
fn capacity() -> usize {
    (machine_memory() / 8).clamp(256 << 20, 4 << 30)
}

/// The machine's physical memory in bytes (0 when the system does not say).
fn machine_memory() -> usize {
    static MEMORY: OnceLock<usize> = OnceLock::new();
    *MEMORY.get_or_init(|| {
        // SAFETY: sysconf only reads system configuration.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        usize::try_from(pages).unwrap_or(0).saturating_mul(usize::try_from(page).unwrap_or(0))
    })
}

/// Why a buffer of `len` elements cannot be allocated, if it is larger than the machine's memory:
/// Rust aborts the whole process when an allocation fails, so a kernel's output (or a dense copy
/// of an input) that could never fit is refused before it is asked for, as PyTorch's
/// `DefaultCPUAllocator` refuses it with an error.
pub(crate) fn too_large(len: usize) -> Option<String> {
    let (bytes, memory) = (len.saturating_mul(size_of::<f32>()), machine_memory());
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    (memory > 0 && bytes > memory).then(|| {
        format!(
            "it needs a buffer of {len} elements ({:.1} GiB), more than this machine's {:.1} GiB",
            gib(bytes),
            gib(memory)
        )
    })
}

/// A buffer of `len` elements whose contents are unspecified (zeros, or what an earlier tensor
/// left): the caller writes every element before reading any.
pub(crate) fn uninit(len: usize) -> HostBuffer {
    if len >= MIN_CACHED {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = cache.free.iter().rposition(|b| b.len == len)
            && let Some(buffer) = cache.free.remove(at)
        {
            cache.bytes -= buffer.bytes();
            return buffer;
        }
    }
    let memory = vec![0.0; len + SLACK];
    // Counted in elements; below `SLACK + 1`, since the vector's start is a multiple of 4 bytes.
    let start = memory.as_ptr().align_offset(ALIGN_BYTES);
    HostBuffer { memory: UnsafeCell::new(memory), start, len }
}

/// Keeps `buffer` for the next [`uninit`] of its length, evicting the buffers freed longest ago
/// when the cache is full.
fn recycle(buffer: HostBuffer) {
    let bytes = buffer.bytes();
    if buffer.len < MIN_CACHED || bytes > capacity() {
        return buffer.release();
    }
    let mut evicted = Vec::new();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    while cache.bytes + bytes > capacity() {
        let Some(old) = cache.free.pop_front() else { break };
        cache.bytes -= old.bytes();
        evicted.push(old);
    }
    cache.bytes += bytes;
    cache.free.push_back(buffer);
    // The evicted buffers are returned to the system after the lock is released.
    drop(cache);
    evicted.into_iter().for_each(HostBuffer::release);
}

/// The memory of a CPU tensor: `len` elements from a 64-byte boundary, inside a vector that goes
/// back to the allocator's cache when the last tensor using it is dropped.
pub(crate) struct HostBuffer {
    /// In a cell: a tensor's elements are read through shared handles, and written through one
    /// only by [`HostBuffer::write_shared`] (an optimizer updating a parameter in place).
    memory: UnsafeCell<Vec<f32>>,
    /// Where the elements start in `memory`, in elements.
    start: usize,
    len: usize,
}

// SAFETY: shared handles only read the elements, except `write_shared`, whose callers ensure that
// nothing reads or writes those elements meanwhile; everything else needs `&mut`.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    fn vector(&self) -> &Vec<f32> {
        // SAFETY: only `write_shared` writes through a shared handle, and its callers ensure no
        // reference from here is alive meanwhile.
        unsafe { &*self.memory.get() }
    }

    /// Copies `values` over elements `offset..offset + values.len()` through a shared handle, so
    /// that every tensor reading this buffer sees them: how an optimizer updates a parameter in
    /// place (`param.copy_(new)` in PyTorch).
    ///
    /// # Safety
    ///
    /// Nothing may read or write this buffer while the copy runs (no slice of it alive on this
    /// thread, no kernel reading it on another).
    pub(crate) unsafe fn write_shared(&self, offset: usize, values: &[f32]) {
        assert!(offset + values.len() <= self.len, "the write stays inside the buffer");
        // SAFETY: the caller guarantees that no reference into the vector is alive; the range is
        // inside the buffer's elements (checked above).
        unsafe {
            let vector = &mut *self.memory.get();
            vector[self.start + offset..self.start + offset + values.len()].copy_from_slice(values);
        }
    }

    /// A pointer to the first element through which kernels may write the buffer while shared
    /// handles exist: how a compiled graph updates a graph input in place (a `copy_` into it).
    /// Writing through it carries [`HostBuffer::write_shared`]'s contract: nothing else reads or
    /// writes those elements meanwhile.
    pub(crate) fn shared_ptr(&self) -> *mut f32 {
        // SAFETY: `start` is inside the vector; the pointer comes from the cell, so writes through
        // it do not go through a shared reference.
        unsafe { (*self.memory.get()).as_mut_ptr().add(self.start) }
    }

    /// A new buffer holding a copy of `values`.
    pub(crate) fn copy_of(values: &[f32]) -> HostBuffer {
        let mut buffer = uninit(values.len());
        buffer.copy_from_slice(values);
        buffer
    }

    /// The elements as a plain vector, which no longer goes back to the cache (it becomes a
    /// caller's own, or another buffer's storage).
    pub(crate) fn into_vec(mut self) -> Vec<f32> {
        let mut memory = std::mem::take(self.memory.get_mut());
        if self.start == 0 {
            memory.truncate(self.len);
            memory
        } else {
            memory[self.start..self.start + self.len].to_vec()
        }
    }

    /// Hands the memory back to the system, not to the cache.
    fn release(mut self) {
        drop(std::mem::take(self.memory.get_mut()));
    }

    /// The bytes it holds, slack included.
    fn bytes(&self) -> usize {
        self.vector().capacity() * size_of::<f32>()
    }
}

impl From<Vec<f32>> for HostBuffer {
    /// Takes the vector as it is when it starts on a 64-byte boundary (or holds less than one
    /// vector of elements), else copies it into a buffer that does.
    fn from(values: Vec<f32>) -> HostBuffer {
        let len = values.len();
        if len <= SLACK || values.as_ptr().align_offset(ALIGN_BYTES) == 0 {
            return HostBuffer { memory: UnsafeCell::new(values), start: 0, len };
        }
        HostBuffer::copy_of(&values)
    }
}

impl Deref for HostBuffer {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.vector()[self.start..self.start + self.len]
    }
}

impl DerefMut for HostBuffer {
    fn deref_mut(&mut self) -> &mut [f32] {
        let (start, len) = (self.start, self.len);
        &mut self.memory.get_mut()[start..start + len]
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if self.memory.get_mut().capacity() == 0 {
            return; // emptied by `into_vec` or `release`
        }
        let memory = std::mem::take(self.memory.get_mut());
        recycle(HostBuffer { memory: UnsafeCell::new(memory), start: self.start, len: self.len });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_buffer_is_handed_to_the_next_request_of_its_size() {
        // A length no other test uses, so that the cache's other users cannot take it between.
        let len = MIN_CACHED + 12_345;
        let mut first = uninit(len);
        first[7] = 42.0;
        let address = first.as_ptr();
        drop(first);
        let second = uninit(len);
        assert_eq!((second.as_ptr(), second[7]), (address, 42.0), "the same memory, contents as left");
        let small = HostBuffer::from(vec![1.0; 16]);
        drop(small);
        assert_eq!(*uninit(16), [0.0; 16], "small buffers come fresh from the system");
    }

    #[test]
    fn every_buffer_starts_on_a_cache_line() {
        for len in [1, 15, 16, 17, 1000, MIN_CACHED, MIN_CACHED + 3] {
            let fresh = uninit(len);
            assert_eq!((fresh.as_ptr() as usize % ALIGN_BYTES, fresh.len()), (0, len), "uninit({len})");
        }
        // The system allocator aligns vectors to 16 bytes: of eight, some start off a line, and
        // are copied to a buffer that starts on one.
        let vectors: Vec<Vec<f32>> = (0..8).map(|n| (0..100 + n).map(|x| x as f32).collect()).collect();
        assert!(vectors.iter().any(|v| v.as_ptr().align_offset(ALIGN_BYTES) != 0));
        for values in vectors {
            let buffer = HostBuffer::from(values.clone());
            assert_eq!(buffer.as_ptr() as usize % ALIGN_BYTES, 0);
            assert_eq!(*buffer, *values);
            assert_eq!(buffer.into_vec(), values);
        }
    }
}
