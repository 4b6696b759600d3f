//! The tensor-core GEMM (`tf32x3_gemm`), which max-autotune may pick for a linear layer: on random
//! shapes, ragged edges and misaligned rows included, it equals eager (cuBLAS) within rounding and
//! stays within a float32 error bound of a float64 reference. Max-autotune is told to time only
//! the engine's kernels (`GemmBackends`), so the kernel runs whatever the timings say. GPU only:
//! elsewhere the test prints `skipped: <reason>` and passes.

mod common;

use common::{close_to_eager as close, gpu};
use engine::backends::Inductor;
use engine::dynamo::{self, Mode};
use engine::inductor::{Config as InductorConfig, GemmBackends};
use engine::{Device, Tensor};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// One random linear layer (then a ReLU, when `relu`).
#[derive(Clone, Copy, Debug)]
struct Case {
    rows: usize,
    batched: bool,
    k: usize,
    n: usize,
    relu: bool,
    /// Rows one float longer than `k` and starting one float in: only 4-byte copies line up.
    misaligned: bool,
    seed: u64,
}

/// `x @ w^T + b` (then a ReLU) in float64 on the host, and for each element the sum of the
/// magnitudes it adds up, which bounds its rounding error.
fn reference(x: &[f32], w: &[f32], b: &[f32], case: &Case) -> Vec<(f64, f64)> {
    let Case { rows, k, n, relu, .. } = *case;
    let mut out = Vec::with_capacity(rows * n);
    for r in 0..rows {
        for c in 0..n {
            let (mut sum, mut magnitude) = (f64::from(b[c]), f64::from(b[c].abs()));
            for i in 0..k {
                let p = f64::from(x[r * k + i]) * f64::from(w[c * k + i]);
                sum += p;
                magnitude += p.abs();
            }
            out.push((if relu { sum.max(0.0) } else { sum }, magnitude));
        }
    }
    out
}

fn agrees(device: Device, case: Case) -> Result<(), TestCaseError> {
    let Case { rows, batched, k, n, relu, misaligned, seed } = case;
    let host = |shape: &[usize], s: u64| Tensor::uniform(shape, -1.0, 1.0, seed.wrapping_add(s));
    let x_host = host(&[rows, k], 0);
    let (w_host, b_host) = (host(&[n, k], 1), host(&[n], 2));
    let x = if misaligned {
        // The same values in a buffer with a column in front: the view starts one float in.
        let wide = Tensor::cat(&[&Tensor::zeros(&[rows, 1]), &x_host], 1).unwrap().to(device).unwrap();
        wide.slice(1, 1, k + 1, 1).unwrap()
    } else {
        x_host.to(device).unwrap()
    };
    let x = if batched && rows % 2 == 0 { x.reshape(&[2, rows / 2, k]).unwrap() } else { x };
    let (w, b) = (w_host.to(device).unwrap(), b_host.to(device).unwrap());
    let f = |x: &Tensor| {
        let y = x.linear(&w, Some(&b))?;
        if relu { y.relu() } else { Ok(y) }
    };
    let config = InductorConfig {
        mode: Mode::MaxAutotune,
        gemm_backends: GemmBackends { libraries: false, engine: true },
        ..InductorConfig::default()
    };
    let inductor = Inductor::with_config(config);
    let compiled = dynamo::compile(|x: Tensor| f(&x)).backend(inductor.clone()).mode(Mode::MaxAutotune);
    let expected = f(&x).unwrap();
    let want = reference(&x_host.to_vec().unwrap(), &w_host.to_vec().unwrap(), &b_host.to_vec().unwrap(), &case);
    for call in 0..3 {
        let got = compiled.call(&x).unwrap();
        prop_assert!(close(&got, &expected).is_ok(), "call {call}: {:?}", close(&got, &expected));
        for (i, (g, (r, magnitude))) in got.to_vec().unwrap().iter().zip(&want).enumerate() {
            // A float32 GEMM's error: a few units of float32 rounding of the magnitudes summed.
            let bound = 1e-6 * magnitude + 1e-7;
            prop_assert!((f64::from(*g) - r).abs() <= bound, "element {i}: {g} against {r} (bound {bound:e})");
        }
    }
    let code = inductor.output_codes()[0].to_string();
    prop_assert!(code.contains("tf32x3_gemm "), "the tensor-core kernel, the only one timed:\n{code}");
    Ok(())
}

/// One test, not several: max-autotune records CUDA graphs on the device's one stream, which
/// another test thread's launches would break.
#[test]
fn gpu_tensor_core_linears_equal_eager_and_a_float64_reference() {
    let Some(device) = gpu() else { return };
    // A large layer first (many blocks, long `k`), then random ones: more than 16 rows (the
    // few-row kernel's limit), sizes on both sides of every tile's edges and of the 16-byte
    // copies' conditions.
    let large = Case { rows: 1024, batched: true, k: 1024, n: 512, relu: true, misaligned: false, seed: 7 };
    agrees(device, large).unwrap();
    let strategy = (17usize..400, any::<bool>(), 1usize..700, 1usize..300, any::<bool>(), any::<bool>(), any::<u64>());
    let outcome = TestRunner::new(Config { cases: 24, ..Config::default() }).run(
        &strategy,
        |(rows, batched, k, n, relu, misaligned, seed)| {
            agrees(device, Case { rows, batched, k, n, relu, misaligned, seed })
        },
    );
    outcome.unwrap_or_else(|e| panic!("{e}"));
}
