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

use crate::dtype::{DType, Element, F8E4M3, F8E5M2, bf16, f16};

/// Buffers smaller than this (256 KiB) are not cached.
const MIN_CACHED_BYTES: usize = 1 << 18;
/// The alignment of every buffer, in bytes: one cache line, and one 512-bit vector.
const ALIGN_BYTES: usize = 64;

/// One cache line of memory: buffers are vectors of lines, so every buffer starts on a 64-byte
/// boundary whatever its element type.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; ALIGN_BYTES]);

/// Freed buffers, the most recently freed last, and their total size in bytes.
struct Cache {
    free: VecDeque<Vec<Line>>,
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

/// Why a buffer of `len` elements cannot be allocated, if it is larger than the machine's memory
/// (counted as `f32`s, the widest dtype a kernel computes in): Rust aborts the whole process when
/// an allocation fails, so a kernel's output (or a dense copy of an input) that could never fit
/// is refused before it is asked for, as PyTorch's `DefaultCPUAllocator` refuses it with an
/// error.
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

/// A buffer of `len` `f32`s whose contents are unspecified (zeros, or what an earlier tensor
/// left): the caller writes every element before reading any.
pub(crate) fn uninit(len: usize) -> HostBuffer {
    uninit_of(DType::F32, len)
}

/// A buffer of `len` elements of `dtype`, contents unspecified as for [`uninit`]. A freed buffer
/// of the same number of bytes serves any dtype.
pub(crate) fn uninit_of(dtype: DType, len: usize) -> HostBuffer {
    let lines = (len * dtype.size_in_bytes()).div_ceil(ALIGN_BYTES);
    if lines * ALIGN_BYTES >= MIN_CACHED_BYTES {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = cache.free.iter().rposition(|b| b.len() == lines)
            && let Some(memory) = cache.free.remove(at)
        {
            cache.bytes -= lines * ALIGN_BYTES;
            return HostBuffer { memory: UnsafeCell::new(memory), len, dtype };
        }
    }
    HostBuffer { memory: UnsafeCell::new(zeroed_lines(lines)), len, dtype }
}

/// `lines` zeroed lines from the system allocator, which hands large requests out as untouched
/// zero pages (as `vec![0.0f32; n]` would): the pages are mapped when a kernel first writes them,
/// not written twice.
fn zeroed_lines(lines: usize) -> Vec<Line> {
    if lines == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<Line>(lines).expect("a buffer's size fits in memory");
    // SAFETY: the layout has a non-zero size; a null result is handled; all-zero bytes are a valid
    // `Line`, and the vector takes ownership of exactly the block allocated with Line's layout.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<Line>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(ptr, lines, lines)
    }
}

/// Keeps `memory` for the next [`uninit_of`] of its size, evicting the buffers freed longest ago
/// when the cache is full.
fn recycle(memory: Vec<Line>) {
    let bytes = memory.len() * ALIGN_BYTES;
    if bytes < MIN_CACHED_BYTES || bytes > capacity() {
        return;
    }
    let mut evicted = Vec::new();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    while cache.bytes + bytes > capacity() {
        let Some(old) = cache.free.pop_front() else { break };
        cache.bytes -= old.len() * ALIGN_BYTES;
        evicted.push(old);
    }
    cache.bytes += bytes;
    cache.free.push_back(memory);
    // The evicted buffers are returned to the system after the lock is released.
    drop(cache);
    drop(evicted);
}

/// The memory of a CPU tensor: `len` elements of one dtype from a 64-byte boundary, in memory
/// that goes back to the allocator's cache when the last tensor using it is dropped.
///
/// An `f32` buffer dereferences to `[f32]`, which is how the `f32` kernels read and write it;
/// [`HostBuffer::elements`] gives any buffer's elements in their own type.
pub(crate) struct HostBuffer {
    /// In a cell: a tensor's elements are read through shared handles, and written through one
    /// only by [`HostBuffer::write_shared`] (an optimizer updating a parameter in place).
    memory: UnsafeCell<Vec<Line>>,
    len: usize,
    dtype: DType,
}

/// A buffer's elements in their storage type.
#[derive(Clone, Copy)]
pub(crate) enum Elements<'a> {
    /// `f32` elements.
    F32(&'a [f32]),
    /// `f16` elements.
    F16(&'a [f16]),
    /// `bf16` elements.
    BF16(&'a [bf16]),
    /// `f8e4m3` elements.
    F8E4M3(&'a [F8E4M3]),
    /// `f8e5m2` elements.
    F8E5M2(&'a [F8E5M2]),
}

/// A buffer's elements in their storage type, writable.
pub(crate) enum ElementsMut<'a> {
    /// `f32` elements.
    F32(&'a mut [f32]),
    /// `f16` elements.
    F16(&'a mut [f16]),
    /// `bf16` elements.
    BF16(&'a mut [bf16]),
    /// `f8e4m3` elements.
    F8E4M3(&'a mut [F8E4M3]),
    /// `f8e5m2` elements.
    F8E5M2(&'a mut [F8E5M2]),
}

/// `$body` with the type `$t` standing for the element type of `$dtype`: one generic body,
/// monomorphised once per dtype (`for_dtype!(dtype, T => cat::<T>(inputs))`).
macro_rules! for_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::dtype::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::dtype::DType::F16 => {
                type $t = $crate::dtype::f16;
                $body
            }
            $crate::dtype::DType::BF16 => {
                type $t = $crate::dtype::bf16;
                $body
            }
            $crate::dtype::DType::F8E4M3 => {
                type $t = $crate::dtype::F8E4M3;
                $body
            }
            $crate::dtype::DType::F8E5M2 => {
                type $t = $crate::dtype::F8E5M2;
                $body
            }
        }
    };
}
pub(crate) use for_dtype;

/// `$body` with `$slice` bound to the slice of an [`Elements`] (or [`ElementsMut`]) value, whatever
/// its element type: one generic body, monomorphised once per dtype.
macro_rules! with_elements {
    ($elements:expr, $slice:ident => $body:expr) => {
        match $elements {
            $crate::device::cpu::Elements::F32($slice) => $body,
            $crate::device::cpu::Elements::F16($slice) => $body,
            $crate::device::cpu::Elements::BF16($slice) => $body,
            $crate::device::cpu::Elements::F8E4M3($slice) => $body,
            $crate::device::cpu::Elements::F8E5M2($slice) => $body,
        }
    };
}
pub(crate) use with_elements;

/// [`with_elements`] for [`ElementsMut`].
macro_rules! with_elements_mut {
    ($elements:expr, $slice:ident => $body:expr) => {
        match $elements {
            $crate::device::cpu::ElementsMut::F32($slice) => $body,
            $crate::device::cpu::ElementsMut::F16($slice) => $body,
            $crate::device::cpu::ElementsMut::BF16($slice) => $body,
            $crate::device::cpu::ElementsMut::F8E4M3($slice) => $body,
            $crate::device::cpu::ElementsMut::F8E5M2($slice) => $body,
        }
    };
}

/// Wrapping a typed slice back into [`ElementsMut`], for code generic over the element type.
pub(crate) trait Stored: Element {
    /// `slice` as [`ElementsMut`].
    fn wrap_mut(slice: &mut [Self]) -> ElementsMut<'_>;
}

macro_rules! stored {
    ($($t:ty => $variant:ident),*) => {$(
        impl Stored for $t {
            fn wrap_mut(slice: &mut [Self]) -> ElementsMut<'_> {
                ElementsMut::$variant(slice)
            }
        }
    )*};
}
stored!(f32 => F32, f16 => F16, bf16 => BF16, F8E4M3 => F8E4M3, F8E5M2 => F8E5M2);

impl<'a> Elements<'a> {
    /// The `len` elements of `dtype` from `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` elements of `dtype`, aligned for it, valid and unwritten for `'a`.
    pub(crate) unsafe fn from_raw(ptr: *const u8, len: usize, dtype: DType) -> Elements<'a> {
        // SAFETY: forwarded to the caller; every bit pattern is a valid element.
        unsafe {
            match dtype {
                DType::F32 => Elements::F32(std::slice::from_raw_parts(ptr.cast(), len)),
                DType::F16 => Elements::F16(std::slice::from_raw_parts(ptr.cast(), len)),
                DType::BF16 => Elements::BF16(std::slice::from_raw_parts(ptr.cast(), len)),
                DType::F8E4M3 => Elements::F8E4M3(std::slice::from_raw_parts(ptr.cast(), len)),
                DType::F8E5M2 => Elements::F8E5M2(std::slice::from_raw_parts(ptr.cast(), len)),
            }
        }
    }

    /// Element `i` as an `f32`.
    pub(crate) fn get(&self, i: usize) -> f32 {
        with_elements!(self, s => s[i].to_f32())
    }

    /// The element type.
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Elements::F32(_) => DType::F32,
            Elements::F16(_) => DType::F16,
            Elements::BF16(_) => DType::BF16,
            Elements::F8E4M3(_) => DType::F8E4M3,
            Elements::F8E5M2(_) => DType::F8E5M2,
        }
    }
}

impl<'a> ElementsMut<'a> {
    /// The `len` elements of `dtype` from `ptr`, writable.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` elements of `dtype`, aligned for it, valid for `'a` and accessed
    /// through nothing else meanwhile.
    pub(crate) unsafe fn from_raw(ptr: *mut u8, len: usize, dtype: DType) -> ElementsMut<'a> {
        // SAFETY: forwarded to the caller; every bit pattern is a valid element.
        unsafe {
            match dtype {
                DType::F32 => ElementsMut::F32(std::slice::from_raw_parts_mut(ptr.cast(), len)),
                DType::F16 => ElementsMut::F16(std::slice::from_raw_parts_mut(ptr.cast(), len)),
                DType::BF16 => ElementsMut::BF16(std::slice::from_raw_parts_mut(ptr.cast(), len)),
                DType::F8E4M3 => ElementsMut::F8E4M3(std::slice::from_raw_parts_mut(ptr.cast(), len)),
                DType::F8E5M2 => ElementsMut::F8E5M2(std::slice::from_raw_parts_mut(ptr.cast(), len)),
            }
        }
    }

    /// Element `i` as an `f32`.
    pub(crate) fn get(&self, i: usize) -> f32 {
        with_elements_mut!(self, s => s[i].to_f32())
    }

    /// Stores `value` as element `i`, rounded to nearest (ties to even).
    pub(crate) fn set(&mut self, i: usize, value: f32) {
        with_elements_mut!(self, s => s[i] = Element::from_f32(value))
    }
}

// SAFETY: shared handles only read the elements, except `write_shared`, whose callers ensure that
// nothing reads or writes those elements meanwhile; everything else needs `&mut`.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// The lines, read through a shared handle.
    fn lines(&self) -> &Vec<Line> {
        // SAFETY: only `write_shared` writes through a shared handle, and its callers ensure no
        // reference from here is alive meanwhile.
        unsafe { &*self.memory.get() }
    }

    /// Copies `values`, rounded to the buffer's dtype, over elements
    /// `offset..offset + values.len()` through a shared handle, so that every tensor reading this
    /// buffer sees them: how an optimizer updates a parameter in place (`param.copy_(new)` in
    /// PyTorch).
    ///
    /// # Safety
    ///
    /// Nothing may read or write this buffer while the copy runs (no slice of it alive on this
    /// thread, no kernel reading it on another).
    pub(crate) unsafe fn write_shared(&self, offset: usize, values: &[f32]) {
        assert!(offset + values.len() <= self.len, "the write stays inside the buffer");
        let (dtype, len) = (self.dtype, self.len);
        // SAFETY: the caller guarantees that no reference into the memory is alive; the lines
        // hold `len` elements of `dtype`, and the range is inside them (checked above).
        let lines = unsafe { &mut *self.memory.get() };
        for_dtype!(dtype, T => {
            // SAFETY: as above; every bit pattern is a valid element.
            let elements = unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast::<T>(), len) };
            for (e, &v) in elements[offset..offset + values.len()].iter_mut().zip(values) {
                *e = T::from_f32(v);
            }
        })
    }

    /// The address of element 0, through which kernels may write the buffer while shared handles
    /// exist: how a compiled graph updates a graph input in place (a `copy_` into it). Writing
    /// through it carries [`HostBuffer::write_shared`]'s contract: nothing else reads or writes
    /// those elements meanwhile.
    pub(crate) fn shared_ptr_bytes(&self) -> *mut u8 {
        // SAFETY: the pointer comes from the cell, so writes through it do not go through a
        // shared reference.
        unsafe { (*self.memory.get()).as_mut_ptr().cast() }
    }

    /// A new buffer holding a copy of `values`.
    pub(crate) fn copy_of(values: &[f32]) -> HostBuffer {
        let mut buffer = uninit(values.len());
        buffer.copy_from_slice(values);
        buffer
    }

    /// A new buffer of `dtype` holding `values` rounded to it.
    pub(crate) fn rounded(values: &[f32], dtype: DType) -> HostBuffer {
        let mut buffer = uninit_of(dtype, values.len());
        with_elements_mut!(buffer.elements_mut(), out => {
            for (o, &v) in out.iter_mut().zip(values) {
                *o = Element::from_f32(v);
            }
        });
        buffer
    }

    /// The element type.
    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }

    /// The elements as a plain vector of `f32`s (widened from a narrower dtype).
    pub(crate) fn into_vec(self) -> Vec<f32> {
        self.to_f32_vec()
    }

    /// Every element widened to `f32`.
    pub(crate) fn to_f32_vec(&self) -> Vec<f32> {
        with_elements!(self.elements(), s => s.iter().map(|v| v.to_f32()).collect())
    }

    /// The elements in their own type.
    pub(crate) fn elements(&self) -> Elements<'_> {
        match self.dtype {
            DType::F32 => Elements::F32(self.typed()),
            DType::F16 => Elements::F16(self.typed()),
            DType::BF16 => Elements::BF16(self.typed()),
            DType::F8E4M3 => Elements::F8E4M3(self.typed()),
            DType::F8E5M2 => Elements::F8E5M2(self.typed()),
        }
    }

    /// The elements in their own type, writable.
    pub(crate) fn elements_mut(&mut self) -> ElementsMut<'_> {
        match self.dtype {
            DType::F32 => ElementsMut::F32(self.typed_mut()),
            DType::F16 => ElementsMut::F16(self.typed_mut()),
            DType::BF16 => ElementsMut::BF16(self.typed_mut()),
            DType::F8E4M3 => ElementsMut::F8E4M3(self.typed_mut()),
            DType::F8E5M2 => ElementsMut::F8E5M2(self.typed_mut()),
        }
    }

    /// The raw bytes of the elements.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the lines hold at least `len * size` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.lines().as_ptr().cast(), self.len * self.dtype.size_in_bytes()) }
    }

    /// The raw bytes, writable.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.len * self.dtype.size_in_bytes();
        // SAFETY: as for `bytes`, with the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.memory.get_mut().as_mut_ptr().cast(), n) }
    }

    /// The address of element 0, for generated kernels.
    pub(crate) fn as_mut_ptr_bytes(&mut self) -> *mut u8 {
        self.memory.get_mut().as_mut_ptr().cast()
    }

    /// The elements as `T`, which must be the buffer's element type.
    pub(crate) fn typed<T: Element>(&self) -> &[T] {
        assert_eq!(T::DTYPE, self.dtype, "a {} buffer read as {}", self.dtype, T::DTYPE);
        // SAFETY: the memory is 64-byte aligned, holds `len` elements of T (every bit pattern is
        // a valid value of each element type), and lives as long as the borrow.
        unsafe { std::slice::from_raw_parts(self.lines().as_ptr().cast(), self.len) }
    }

    /// The elements as `T`, writable; `T` must be the buffer's element type.
    pub(crate) fn typed_mut<T: Element>(&mut self) -> &mut [T] {
        assert_eq!(T::DTYPE, self.dtype, "a {} buffer written as {}", self.dtype, T::DTYPE);
        // SAFETY: as for `typed`, with the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.memory.get_mut().as_mut_ptr().cast(), self.len) }
    }
}

impl From<Vec<f32>> for HostBuffer {
    /// The values copied into an aligned buffer.
    fn from(values: Vec<f32>) -> HostBuffer {
        HostBuffer::copy_of(&values)
    }
}

impl Deref for HostBuffer {
    type Target = [f32];
    /// The elements of an `f32` buffer (the `f32` kernels' view of their buffers).
    fn deref(&self) -> &[f32] {
        self.typed()
    }
}

impl DerefMut for HostBuffer {
    fn deref_mut(&mut self) -> &mut [f32] {
        self.typed_mut()
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        recycle(std::mem::take(self.memory.get_mut()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_buffer_is_handed_to_the_next_request_of_its_size() {
        // A length no other test uses, so that the cache's other users cannot take it between.
        let len = MIN_CACHED_BYTES / 4 + 12_345 * 16;
        let mut first = uninit(len);
        first[7] = 42.0;
        let address = first.as_ptr();
        drop(first);
        let second = uninit(len);
        assert_eq!((second.as_ptr(), second[7]), (address, 42.0), "the same memory, contents as left");
        let small = HostBuffer::from(vec![1.0; 16]);
        drop(small);
        assert_eq!(*uninit(16), [0.0; 16], "small buffers come fresh from the system");
        let first = uninit_of(DType::BF16, 2 * len);
        let address = first.bytes().as_ptr();
        drop(first);
        assert_eq!(uninit(len).bytes().as_ptr(), address, "a buffer of the same bytes serves any dtype");
    }

    #[test]
    fn every_buffer_starts_on_a_cache_line() {
        for len in [1, 15, 16, 17, 1000, MIN_CACHED_BYTES / 4, MIN_CACHED_BYTES / 4 + 3] {
            for dtype in DType::ALL {
                let fresh = uninit_of(dtype, len);
                assert_eq!(fresh.bytes().as_ptr() as usize % ALIGN_BYTES, 0, "uninit({len})");
                assert_eq!(fresh.bytes().len(), len * dtype.size_in_bytes());
            }
        }
        let values: Vec<f32> = (0..103).map(|x| x as f32).collect();
        let buffer = HostBuffer::from(values.clone());
        assert_eq!(*buffer, *values);
        assert_eq!(buffer.into_vec(), values);
        let halves = HostBuffer::rounded(&[1.0, 1.0 + 2f32.powi(-8), 3.0], DType::BF16);
        assert_eq!(halves.to_f32_vec(), [1.0, 1.0, 3.0], "rounded to nearest, ties to even");
    }
}
