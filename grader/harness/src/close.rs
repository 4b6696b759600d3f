//! Comparing float tensors with a tolerance, and explaining a mismatch so that a learner can act
//! on it: how many values differ, the largest difference and where, and the first few
//! mismatches with their multi-dimensional index, actual next to expected.

use std::fmt::Write;

use engine::Tensor;

use crate::check::Failure;
use crate::tolerance::Tolerance;

/// The largest `|a - b|` over two equally long slices; NaN if either side has a NaN where the
/// other does not.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0.0f32, |acc, (&x, &y)| {
        let d = if x.is_nan() && y.is_nan() { 0.0 } else { (x - y).abs() };
        if d.is_nan() || acc.is_nan() { f32::NAN } else { acc.max(d) }
    })
}

/// Fails unless `actual` has `expected`'s shape and every value is within `tolerance`. `what`
/// names the value in the message (`the interpreter's output 0`). `actual` is recorded in the
/// check's [transcript](crate::transcript) for the judge.
pub fn assert_close(what: &str, actual: &Tensor, expected: &Tensor, tolerance: Tolerance) -> Result<(), Failure> {
    crate::transcript::record_tensor(what, actual, tolerance);
    check_close(what, actual, expected, tolerance)
}

/// [`assert_close`] without recording `actual`: for a value that only this process can compute,
/// such as the output on inputs a judge drew itself at random, which the other run of the check
/// cannot reproduce to compare.
pub fn check_close(what: &str, actual: &Tensor, expected: &Tensor, tolerance: Tolerance) -> Result<(), Failure> {
    if actual.shape() != expected.shape() {
        return Err(Failure::fail(format!("{what} has shape {:?}, expected {:?}", actual.shape(), expected.shape())));
    }
    let (a, e) = (actual.to_vec()?, expected.to_vec()?);
    let bad: Vec<usize> = (0..a.len()).filter(|&i| !tolerance.accepts(a[i], e[i])).collect();
    if bad.is_empty() {
        return Ok(());
    }
    let worst = *bad.iter().max_by(|&&i, &&j| (a[i] - e[i]).abs().total_cmp(&(a[j] - e[j]).abs())).expect("non-empty");
    let shape = expected.shape();
    let mut message = format!(
        "{what} differs from the expected values in {} of {} elements (allowed |diff| <= {:e} + {:e}·|expected|); \
         the largest |diff| is {:e} at {:?}\n\n",
        bad.len(),
        a.len(),
        tolerance.abs,
        tolerance.rel,
        (a[worst] - e[worst]).abs(),
        unravel(worst, shape),
    );
    let _ = writeln!(message, "  {:<16} {:>14} {:>14} {:>12}", "index", "actual", "expected", "|diff|");
    for &i in bad.iter().take(8) {
        let index = format!("{:?}", unravel(i, shape));
        let _ = writeln!(message, "  {index:<16} {:>14.7} {:>14.7} {:>12.3e}", a[i], e[i], (a[i] - e[i]).abs());
    }
    if bad.len() > 8 {
        let _ = writeln!(message, "  ... and {} more", bad.len() - 8);
    }
    Err(Failure::Fail(message))
}

/// The multi-dimensional index of row-major position `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &size) in index.iter_mut().zip(shape).rev() {
        *slot = flat % size.max(1);
        flat /= size.max(1);
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mismatch_names_the_index_and_both_values() {
        let expected = Tensor::from_vec(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3]).unwrap();
        let actual = Tensor::from_vec(vec![0.0, 1.0, 2.0, 3.0, 4.5, 5.0], &[2, 3]).unwrap();
        let Err(Failure::Fail(message)) = assert_close("output", &actual, &expected, Tolerance::F32) else {
            panic!("expected a failure")
        };
        assert!(message.contains("1 of 6 elements"), "{message}");
        assert!(message.contains("[1, 1]"), "{message}");
        assert!(message.contains("4.5000000") && message.contains("4.0000000"), "{message}");
    }

    #[test]
    fn close_values_and_matching_nans_pass() {
        let expected = Tensor::from_vec(vec![1.0, f32::NAN], &[2]).unwrap();
        let actual = Tensor::from_vec(vec![1.000001, f32::NAN], &[2]).unwrap();
        assert_close("output", &actual, &expected, Tolerance::F32).unwrap();
        assert!(assert_close("output", &actual, &expected, Tolerance::EXACT).is_err());
    }

    #[test]
    fn a_shape_mismatch_is_reported_first() {
        let err = assert_close("y", &Tensor::zeros(&[2]), &Tensor::zeros(&[3]), Tolerance::F32).unwrap_err();
        assert_eq!(err, Failure::fail("y has shape [2], expected [3]"));
    }

    #[test]
    fn max_abs_diff_sees_nan_mismatches() {
        assert_eq!(max_abs_diff(&[1.0, 2.0], &[1.5, 2.0]), 0.5);
        assert!(max_abs_diff(&[f32::NAN], &[0.0]).is_nan());
        assert_eq!(max_abs_diff(&[f32::NAN], &[f32::NAN]), 0.0);
    }
}
