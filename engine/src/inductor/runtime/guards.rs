//! Guarded launches ([`crate::inductor::Config::guard_buffers`]): each argument of a generated
//! kernel is copied into a buffer [`GUARD`] elements longer at each end, whose ends hold
//! [`poison`] of that argument; the kernel runs on the copies, the ends are checked after the
//! run, and the copies of the plan's own buffers are copied back. A write outside a buffer changes
//! a guard and is an error that names the kernel, the argument and how far out it wrote; a read
//! outside gets a NaN, which spreads to the outputs. What AddressSanitizer's redzones do for C,
//! and CUDA's `compute-sanitizer --tool memcheck` for kernels, on the workbook's scale: the tool a
//! kernel printer is checked with. Buffers are handled as bytes, so every dtype is guarded.

use crate::device::cpu::widen_bytes;
use crate::dtype::DType;
use crate::error::Error;

/// Elements of guard before and after each argument: past an off-by-one, and past a vector of
/// 16 floats (an AVX-512 register) overrunning the end. A multiple of 64 bytes in every dtype, so
/// a copy's data keeps the alignment of the buffer that holds it.
pub(crate) const GUARD: usize = 64;

/// The bytes of one element of the guards of argument `arg` of `dtype`: a quiet NaN whose payload
/// names the argument (FP8 has a single NaN) and that no arithmetic produces, compared bit for
/// bit. Each argument has its own, since arithmetic on a NaN keeps its payload: a kernel that
/// reads one past the end of an input and writes the result one past the end of its output writes
/// the input's poison, not the output's.
pub(crate) fn poison(dtype: DType, arg: usize) -> Vec<u8> {
    let payload = arg as u32 & 0x3f;
    match dtype {
        DType::F32 => (0x7fc0_de00 | payload).to_le_bytes().to_vec(),
        DType::F16 => (0x7e00 | payload as u16).to_le_bytes().to_vec(),
        DType::BF16 => (0x7fc0 | payload as u16).to_le_bytes().to_vec(),
        DType::F8E4M3 | DType::F8E5M2 => vec![0x7f],
    }
}

/// `data` (elements of `dtype`, as bytes) between two guards of argument `arg`: `GUARD` poison
/// elements, `data`, `GUARD` more.
pub(crate) fn guarded(data: &[u8], dtype: DType, arg: usize) -> Vec<u8> {
    let poison = poison(dtype, arg).repeat(GUARD);
    [&poison[..], data, &poison[..]].concat()
}

/// Fails unless both guards of argument `arg` of kernel `kernel` (whose guarded copy held `len`
/// elements of `dtype` between them) still hold its [`poison`]: `before` and `after` are the
/// guards' bytes as read back.
pub(crate) fn check(
    kernel: &str,
    arg: usize,
    dtype: DType,
    len: usize,
    before: &[u8],
    after: &[u8],
) -> Result<(), Error> {
    let poison = poison(dtype, arg);
    let size = poison.len();
    let changed = |guard: &[u8]| -> Vec<usize> {
        guard.chunks(size).enumerate().filter(|(_, e)| *e != &poison[..]).map(|(i, _)| i).collect()
    };
    let value = |guard: &[u8], i: usize| widen_bytes(&guard[i * size..(i + 1) * size], dtype)[0];
    let (after_changed, before_changed) = (changed(after), changed(before));
    let place = match (after_changed.first(), after_changed.last(), before_changed.last()) {
        (Some(&first), Some(&last), _) => format!(
            "past its end: argument {arg} has {len} elements, and the kernel wrote element{} {}{} (value {})",
            if first == last { "" } else { "s" },
            len + first,
            if first == last { String::new() } else { format!(" to {}", len + last) },
            value(after, first)
        ),
        (_, _, Some(&last)) => format!(
            "before its start: {} element{} before element 0 of argument {arg} (value {})",
            GUARD - last,
            if GUARD - last == 1 { "" } else { "s" },
            value(before, last)
        ),
        _ => return Ok(()),
    };
    Err(Error::Backend {
        backend: "inductor".into(),
        message: format!(
            "kernel `{kernel}` wrote outside a buffer, {place}. Arguments are numbered in `Kernel::args` order; \
             each buffer lay between guard regions ({GUARD} elements each side) that the run must leave untouched"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guards of a 3-element argument 1 of `dtype`, split as `check` takes them.
    fn split(copy: &[u8], dtype: DType) -> (&[u8], &[u8]) {
        let size = dtype.size_in_bytes();
        (&copy[..GUARD * size], &copy[(GUARD + 3) * size..])
    }

    #[test]
    fn writes_past_either_end_are_named_in_every_dtype() {
        for dtype in DType::ALL {
            let size = dtype.size_in_bytes();
            let data = vec![0u8; 3 * size];
            let clean = guarded(&data, dtype, 1);
            assert_eq!(clean.len(), (2 * GUARD + 3) * size);
            let (before, after) = split(&clean, dtype);
            assert!(check("k", 1, dtype, 3, before, after).is_ok(), "{dtype}");
            let mut one_past = clean.clone();
            // Another argument's poison, as a NaN read past an input's end and written here
            // carries (FP8's single NaN aside: a zero).
            let other = if size == 1 { vec![0] } else { poison(dtype, 0) };
            one_past[(GUARD + 3) * size..(GUARD + 4) * size].copy_from_slice(&other);
            let (before, after) = split(&one_past, dtype);
            let message = check("k", 1, dtype, 3, before, after).unwrap_err().to_string();
            assert!(
                message.contains("past its end") && message.contains("element 3 ") && message.contains("argument 1"),
                "{dtype}: {message}"
            );
            let mut early = clean;
            early[(GUARD - 2) * size] ^= 0x01;
            let (before, after) = split(&early, dtype);
            let message = check("k", 1, dtype, 3, before, after).unwrap_err().to_string();
            assert!(message.contains("2 elements before element 0"), "{dtype}: {message}");
        }
    }
}
