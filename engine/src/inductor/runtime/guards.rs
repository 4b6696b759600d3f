//! Guarded launches ([`crate::inductor::Config::guard_buffers`]): each argument of a generated
//! kernel is copied into a buffer [`GUARD`] elements longer at each end, whose ends hold
//! [`poison`] of that argument; the kernel runs on the copies, the ends are checked after the run, and the copies
//! of the plan's own buffers are copied back. A write outside a buffer changes a guard and is an
//! error that names the kernel, the argument and how far out it wrote; a read outside gets a
//! NaN, which spreads to the outputs. What AddressSanitizer's redzones do for C, and CUDA's
//! `compute-sanitizer --tool memcheck` for kernels, on the workbook's scale: the tool a kernel
//! printer is checked with.

use crate::error::Error;

/// Elements of guard before and after each argument: past an off-by-one, and past a vector of
/// 16 floats (an AVX-512 register) overrunning the end.
pub(crate) const GUARD: usize = 64;

/// What the guards of argument `arg` hold: a quiet NaN whose payload names the argument and no
/// arithmetic produces, compared bit for bit. Each argument has its own, since arithmetic on a NaN
/// keeps its payload: a kernel that reads one past the end of an input and writes the result one
/// past the end of its output writes the input's poison, not the output's.
pub(crate) fn poison(arg: usize) -> f32 {
    f32::from_bits(0x7fc0_de00 | (arg as u32 & 0xff))
}

/// `data` between two guards of argument `arg`: `GUARD` poison elements, `data`, `GUARD` more.
pub(crate) fn guarded(data: &[f32], arg: usize) -> Vec<f32> {
    let mut buffer = Vec::with_capacity(data.len() + 2 * GUARD);
    buffer.extend(std::iter::repeat_n(poison(arg), GUARD));
    buffer.extend_from_slice(data);
    buffer.extend(std::iter::repeat_n(poison(arg), GUARD));
    buffer
}

/// Fails unless both guards of argument `arg` of kernel `kernel` (whose guarded copy held `len`
/// elements between them) still hold its [`poison`]: `before` and `after` are the guards as read
/// back.
pub(crate) fn check(kernel: &str, arg: usize, len: usize, before: &[f32], after: &[f32]) -> Result<(), Error> {
    let poisoned = |v: &f32| v.to_bits() == poison(arg).to_bits();
    let first_after = after.iter().position(|v| !poisoned(v));
    let last_after = after.iter().rposition(|v| !poisoned(v));
    let last_before = before.iter().rposition(|v| !poisoned(v));
    let place = match (first_after, last_after, last_before) {
        (Some(first), Some(last), _) => format!(
            "past its end: argument {arg} has {len} elements, and the kernel wrote element{} {}{} (value {})",
            if first == last { "" } else { "s" },
            len + first,
            if first == last { String::new() } else { format!(" to {}", len + last) },
            after[first]
        ),
        (_, _, Some(last)) => format!(
            "before its start: {} element{} before element 0 of argument {arg} (value {})",
            GUARD - last,
            if GUARD - last == 1 { "" } else { "s" },
            before[last]
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

    #[test]
    fn writes_past_either_end_are_named() {
        let clean = guarded(&[1.0, 2.0, 3.0], 1);
        assert!(check("k", 1, 3, &clean[..GUARD], &clean[GUARD + 3..]).is_ok());
        let mut one_past = clean.clone();
        // Another argument's poison, as a NaN read past an input's end and written here carries.
        one_past[GUARD + 3] = poison(0);
        let message = check("k", 1, 3, &one_past[..GUARD], &one_past[GUARD + 3..]).unwrap_err().to_string();
        assert!(message.contains("past its end") && message.contains("element 3 ") && message.contains("argument 1"));
        let mut before = clean;
        before[GUARD - 2] = 0.0;
        let message = check("k", 1, 3, &before[..GUARD], &before[GUARD + 3..]).unwrap_err().to_string();
        assert!(message.contains("2 elements before element 0"), "{message}");
    }
}
