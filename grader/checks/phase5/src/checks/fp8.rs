//! Checks of `fp8_scales`. The matrices are drawn from the run's seed, with rows whose magnitudes
//! differ by up to twelve orders (and rows of zeros), so that no scale can be written in advance
//! and one scale for the whole matrix cannot serve every row. The judge measures every error
//! itself, in `f64`, from the 8-bit values the learner's code stored: nothing the learner's code
//! says about its own accuracy is read.

use engine::{DType, Tensor};
use grader_harness::{CheckResult, Context, Failure, Tolerance, ensure, for_all, record_floats};
use proptest::prelude::*;

use crate::subject::fp8::{RowScaled, fp8_linear, quantize_rows};

/// The two 8-bit formats, each judged.
const FORMATS: [DType; 2] = [DType::F8E4M3, DType::F8E5M2];

/// Cases per format and check: each is a small matrix, converted on the CPU.
const CASES: u32 = 24;

/// A matrix `[rows, cols]` as row-major values: each row uniform in `(-1, 1)` times `10^e`, `e`
/// drawn per row from `[-6, 6]`; about one row in eight is zeros.
#[derive(Clone, Debug)]
struct Matrix {
    rows: usize,
    cols: usize,
    values: Vec<f32>,
}

impl Matrix {
    fn tensor(&self) -> Result<Tensor, Failure> {
        Ok(Tensor::from_vec(self.values.clone(), &[self.rows, self.cols])?)
    }

    fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.cols..(i + 1) * self.cols]
    }

    /// The largest magnitude of each row.
    fn largest(&self) -> Vec<f32> {
        (0..self.rows).map(|i| self.row(i).iter().fold(0.0f32, |m, v| m.max(v.abs()))).collect()
    }
}

fn matrix(rows: std::ops::Range<usize>, cols: usize) -> impl Strategy<Value = Matrix> {
    rows.prop_flat_map(move |rows| {
        let row = (-6.0f32..6.0, 0..8u8);
        (prop::collection::vec(row, rows), prop::collection::vec(-1.0f32..1.0, rows * cols)).prop_map(
            move |(magnitudes, mut values)| {
                for (i, (exponent, zero)) in magnitudes.into_iter().enumerate() {
                    let factor = if zero == 0 { 0.0 } else { 10f32.powf(exponent) };
                    values[i * cols..(i + 1) * cols].iter_mut().for_each(|v| *v *= factor);
                }
                Matrix { rows, cols, values }
            },
        )
    })
}

/// Half the spacing of a format's subnormals, the most rounding can move a value near zero.
fn half_subnormal_step(dtype: DType) -> f64 {
    match dtype {
        DType::F8E4M3 => 2f64.powi(-10),
        _ => 2f64.powi(-17),
    }
}

/// The values `data[i] * scales[i]` of a row-scaled matrix, after checking its dtype and shape.
fn dequantized(q: &RowScaled, x: &Matrix, dtype: DType, call: &str) -> Result<Vec<f64>, Failure> {
    ensure(q.data.dtype() == dtype, || format!("{call} stored its data as {}, expected {dtype}", q.data.dtype()))?;
    ensure(q.data.shape() == [x.rows, x.cols], || {
        format!("{call} stored data of shape {:?}, expected {:?}", q.data.shape(), [x.rows, x.cols])
    })?;
    ensure(q.scales.len() == x.rows, || format!("{call} gave {} scales for {} rows", q.scales.len(), x.rows))?;
    let data = q.data.to_vec()?;
    Ok(data.iter().enumerate().map(|(e, &v)| v as f64 * q.scales[e / x.cols] as f64).collect())
}

/// `quantize_rows` stores every row in the format's top binade and within half a step of each
/// value, in both formats, on matrices drawn from the run's seed.
pub fn rows_fill_the_format(ctx: &Context) -> CheckResult {
    for dtype in FORMATS {
        let (max, half_epsilon) = (dtype.max_value() as f64, dtype.epsilon() as f64 / 2.0);
        for_all(ctx, CASES, matrix(2..10, 24), |x| {
            let call = format!("quantize_rows(x of {}x{}, {dtype})", x.rows, x.cols);
            let q = quantize_rows(&x.tensor()?, dtype)?;
            let got = dequantized(&q, &x, dtype, &call)?;
            let largest = x.largest();
            let mut normalized = Vec::with_capacity(got.len());
            for (i, (&scale, &amax)) in q.scales.iter().zip(&largest).enumerate() {
                ensure(scale.is_finite() && scale > 0.0, || {
                    format!("{call}: row {i}'s scale is {scale}; every scale must be positive and finite")
                })?;
                let top = amax as f64 / scale as f64;
                ensure(amax == 0.0 || (top > max / 2.0 && top <= max * (1.0 + 1e-6)), || {
                    format!(
                        "{call}: row {i}'s largest magnitude is {amax:e} and its scale {scale:e}, so the row's largest \
                         stored value is {top:e}: it should lie in ({}, {max}], the top binade of {dtype}, or the row \
                         {}",
                        max / 2.0,
                        if top > max { "overflows" } else { "leaves some of the format's bits unused" }
                    )
                })?;
                let slack = half_subnormal_step(dtype) * scale as f64;
                for (j, &want) in x.row(i).iter().enumerate() {
                    let have = got[i * x.cols + j];
                    let bound = half_epsilon * (want.abs() as f64) * (1.0 + 1e-6) + slack;
                    ensure((have - want as f64).abs() <= bound, || {
                        format!(
                            "{call}: element ({i}, {j}) is {want:e}, stored as {have:e} (data times scale): off by \
                             more than half a step of {dtype} ({bound:e})"
                        )
                    })?;
                    normalized.push(if amax > 0.0 { (have / amax as f64) as f32 } else { 0.0 });
                }
            }
            // Two scales of the same binade store values within one step of each other.
            let tolerance =
                Tolerance { abs: (8.0 * half_subnormal_step(dtype) / max) as f32 + 1e-7, rel: 2.2 * half_epsilon as f32 };
            record_floats(format!("{dtype}: each row stored, over its largest magnitude"), &normalized, tolerance);
            Ok(())
        })?;
    }
    Ok(format!("every row fills the top binade of f8e4m3 and f8e5m2, on {CASES} random matrices each"))
}

/// The judge's own row-scaled matrix: power-of-two scales (so that a product that forgets a
/// scale, or applies it to the wrong side, is off by a factor that shows).
fn judge_quantized(x: &Matrix, dtype: DType) -> Result<RowScaled, Failure> {
    let scales: Vec<f32> = x
        .largest()
        .iter()
        .map(|&a| if a > 0.0 { 2f32.powi((a / dtype.max_value()).log2().ceil() as i32) } else { 1.0 })
        .collect();
    let divided: Vec<f32> = x.values.iter().enumerate().map(|(e, v)| v / scales[e / x.cols]).collect();
    let data = Tensor::from_vec(divided, &[x.rows, x.cols])?.to_dtype(dtype)?;
    Ok(RowScaled { data, scales })
}

/// `a @ b.T` in `f64` from dequantized row-major values, and for each element the sum of its
/// terms' magnitudes.
fn exact_product(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let mut product = vec![0.0; m * n];
    let mut magnitude = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for t in 0..k {
                let term = a[i * k + t] * b[j * k + t];
                product[i * n + j] += term;
                magnitude[i * n + j] += term.abs();
            }
        }
    }
    (product, magnitude)
}

/// `fp8_linear`'s result, after checking its dtype and shape.
fn product_of(a: &RowScaled, b: &RowScaled, (m, n): (usize, usize), call: &str) -> Result<Vec<f32>, Failure> {
    let out = fp8_linear(a, b)?;
    ensure(out.dtype() == DType::F32, || format!("{call} returned {}, expected f32", out.dtype()))?;
    ensure(out.shape() == [m, n], || format!("{call} returned shape {:?}, expected {:?}", out.shape(), [m, n]))?;
    Ok(out.to_vec()?)
}

/// Each element over the sum of its terms' magnitudes (zero where that sum is), the form in which
/// products of rows twelve orders apart are recorded.
fn normalized(values: &[f32], magnitude: &[f64]) -> Vec<f32> {
    values.iter().zip(magnitude).map(|(&v, &s)| if s > 0.0 { (v as f64 / s) as f32 } else { v }).collect()
}

/// Two matrices `[m, k]` and `[n, k]` of the same width.
fn operands() -> impl Strategy<Value = (Matrix, Matrix)> {
    (matrix(2..9, 16), matrix(2..9, 16))
}

/// `fp8_linear` multiplies row-scaled matrices the judge made, in both formats: every element
/// within `1e-5` of the exact product of the dequantized matrices, relative to the sum of its
/// terms' magnitudes.
pub fn product_applies_the_scales(ctx: &Context) -> CheckResult {
    for dtype in FORMATS {
        for_all(ctx, CASES, operands(), |(a, b)| {
            let (m, n, k) = (a.rows, b.rows, a.cols);
            let call = format!("fp8_linear(a of {m}x{k}, b of {n}x{k}, both {dtype})");
            let (qa, qb) = (judge_quantized(&a, dtype)?, judge_quantized(&b, dtype)?);
            let (da, db) = (dequantized(&qa, &a, dtype, "the judge")?, dequantized(&qb, &b, dtype, "the judge")?);
            let (exact, magnitude) = exact_product(&da, &db, (m, n, k));
            let got = product_of(&qa, &qb, (m, n), &call)?;
            for (e, (&have, (&want, &size))) in got.iter().zip(exact.iter().zip(&magnitude)).enumerate() {
                let (i, j) = (e / n, e % n);
                ensure((have as f64 - want).abs() <= 1e-5 * size, || {
                    format!(
                        "{call}: element ({i}, {j}) is {have:e}, the product of the stored matrices gives {want:e} \
                         (a scales {:e}, b scales {:e})",
                        qa.scales[i], qb.scales[j]
                    )
                })?;
            }
            record_floats(format!("{dtype}: the product, over its terms' magnitudes"), &normalized(&got, &magnitude), Tolerance {
                abs: 2e-5,
                rel: 0.0,
            });
            Ok(())
        })?;
    }
    Ok(format!("the scaled products are exact to f32 in f8e4m3 and f8e5m2, on {CASES} random pairs each"))
}

/// `quantize_rows` then `fp8_linear`, against the exact product of the `f32` matrices: every
/// element within the error that rounding both operands to the format allows, measured by the
/// judge in `f64`, in both formats.
pub fn error_stays_within_the_format(ctx: &Context) -> CheckResult {
    let mut worst = [0.0f64; 2];
    for (f, dtype) in FORMATS.into_iter().enumerate() {
        let (max, u) = (dtype.max_value() as f64, dtype.epsilon() as f64 / 2.0);
        let worst_ratio = std::cell::Cell::new(0.0f64);
        for_all(ctx, CASES, operands(), |(a, b)| {
            let (m, n, k) = (a.rows, b.rows, a.cols);
            let call = format!("fp8_linear(quantize_rows(a of {m}x{k}), quantize_rows(b of {n}x{k})) in {dtype}");
            let (qa, qb) = (quantize_rows(&a.tensor()?, dtype)?, quantize_rows(&b.tensor()?, dtype)?);
            let got = product_of(&qa, &qb, (m, n), &call)?;
            let exact_a: Vec<f64> = a.values.iter().map(|&v| v as f64).collect();
            let exact_b: Vec<f64> = b.values.iter().map(|&v| v as f64).collect();
            let (exact, magnitude) = exact_product(&exact_a, &exact_b, (m, n, k));
            // Each stored element is within u |x| + (half a subnormal step) * scale of its value,
            // and a scale in the top binade is at most 2 amax / max: a bound that holds for every
            // such scale, whichever the learner chose.
            let near_zero = |amax: f32| half_subnormal_step(dtype) * 2.0 * amax as f64 / max;
            let (la, lb) = (a.largest(), b.largest());
            let mut recorded = Vec::with_capacity(m * n);
            for i in 0..m {
                for j in 0..n {
                    let (ea, eb) = (near_zero(la[i]), near_zero(lb[j]));
                    let bound: f64 = (0..k)
                        .map(|t| {
                            let (x, y) = ((a.row(i)[t] as f64).abs(), (b.row(j)[t] as f64).abs());
                            let (dx, dy) = (u * x + ea, u * y + eb);
                            dx * y + x * dy + dx * dy
                        })
                        .sum::<f64>()
                        * (1.0 + 1e-3)
                        + 1e-6 * magnitude[i * n + j];
                    let (have, want) = (got[i * n + j] as f64, exact[i * n + j]);
                    let error = (have - want).abs();
                    ensure(error <= bound, || {
                        format!(
                            "{call}: element ({i}, {j}) is {have:e} where the exact product is {want:e}: an error of \
                             {error:e}, more than rounding both operands to {dtype} can make ({bound:e})"
                        )
                    })?;
                    if bound > 0.0 {
                        worst_ratio.set(worst_ratio.get().max(error / bound));
                    }
                    let size = magnitude[i * n + j];
                    recorded.push(if size > 0.0 { (have / size) as f32 } else { have as f32 });
                }
            }
            // Two answers within the bound differ by at most twice it: about 2 (2u + u^2) of the
            // terms' magnitudes.
            let abs = (4.0 * (2.0 * u + u * u)) as f32;
            record_floats(format!("{dtype}: the product, over its terms' magnitudes"), &recorded, Tolerance { abs, rel: 0.0 });
            Ok(())
        })?;
        worst[f] = worst_ratio.get();
    }
    Ok(format!(
        "the products stay within the rounding error of f8e4m3 and f8e5m2 (at most {:.0}% and {:.0}% of the bound)",
        worst[0] * 100.0,
        worst[1] * 100.0
    ))
}
