//! `cat` (PyTorch's semantics and errors, on random shapes, dims and layouts) and the rewrite
//! that joins parallel linears of one input into one matmul by concatenated weights: compiled
//! against eager on random shapes, the fusion log, and what it must leave alone. Each case runs on
//! the CPU and, where CUDA can run, on the GPU; without one the GPU cases print
//! `skipped: <reason>` and pass.

mod common;

use common::gpu;
use engine::backends::Inductor;
use engine::{Device, Error, Result, Tensor, dynamo, logs};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn devices() -> Vec<Device> {
    [Some(Device::Cpu), gpu()].into_iter().flatten().collect()
}

/// Runs a property over `cases` random inputs, shrinking any failure to a small example.
fn check<S: Strategy>(cases: u32, strategy: S, test: impl Fn(S::Value) -> std::result::Result<(), TestCaseError>) {
    let mut runner = TestRunner::new(Config { cases, ..Config::default() });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// `cat` by its definition: output element `[.., i, ..]` along `dim` is element `i - offset` of
/// the input whose band holds `i`.
fn cat_reference(parts: &[(Vec<f32>, Vec<usize>)], dim: usize) -> Vec<f32> {
    let outer: usize = parts[0].1[..dim].iter().product();
    let mut out = Vec::new();
    for row in 0..outer {
        for (data, shape) in parts {
            let width: usize = shape[dim..].iter().product();
            out.extend_from_slice(&data[row * width..(row + 1) * width]);
        }
    }
    out
}

/// A rank, a dim of it, the shared sizes, and 1 to 4 sizes along the dim (0 included).
fn cat_cases() -> impl Strategy<Value = (Vec<usize>, usize, Vec<usize>, bool, u64)> {
    (1usize..=4).prop_flat_map(|rank| {
        (
            prop::collection::vec(1usize..6, rank),
            0..rank,
            prop::collection::vec(0usize..5, 1..=4),
            any::<bool>(),
            any::<u64>(),
        )
    })
}

#[test]
fn cat_joins_along_any_dim_like_pytorch() {
    for device in devices() {
        check(64, cat_cases(), |(shape, dim, sizes, transposed, seed)| {
            let mut parts = Vec::new();
            let mut tensors = Vec::new();
            for (i, &size) in sizes.iter().enumerate() {
                let mut s = shape.clone();
                s[dim] = size;
                let t = Tensor::randn(&s, seed.wrapping_add(i as u64));
                parts.push((t.to_vec().unwrap(), s.clone()));
                // A transposed view of the same values: cat reads through strides.
                let t = if transposed && s.len() >= 2 {
                    let r = s.len();
                    let mut swapped = s.clone();
                    swapped.swap(r - 2, r - 1);
                    let stored = t.transpose(-2, -1).unwrap().contiguous().unwrap().reshape(&swapped).unwrap();
                    stored.transpose(-2, -1).unwrap()
                } else {
                    t
                };
                tensors.push(t.to(device).unwrap());
            }
            let refs: Vec<&Tensor> = tensors.iter().collect();
            let got = Tensor::cat(&refs, dim as isize - shape.len() as isize).unwrap();
            let mut want_shape = shape.clone();
            want_shape[dim] = sizes.iter().sum();
            prop_assert_eq!(got.shape(), &want_shape[..]);
            prop_assert_eq!(got.to_vec().unwrap(), cat_reference(&parts, dim), "on {}", device);
            Ok(())
        });
    }
}

#[test]
fn cat_of_more_parts_than_one_launch_joins_with_empty_ones_among_them() {
    // The GPU joins up to eight inputs per launch: eleven, two of them empty, take two launches.
    // With an innermost size of 4 every band is a multiple of four floats, which the GPU copies
    // four at a time.
    let widths = [3, 0, 5, 1, 2, 4, 0, 6, 1, 2, 7];
    for (device, inner) in devices().into_iter().flat_map(|d| [(d, 2), (d, 4)]) {
        let parts: Vec<(Vec<f32>, Vec<usize>)> = widths
            .iter()
            .enumerate()
            .map(|(i, &w)| (Tensor::randn(&[4, w, inner], i as u64).to_vec().unwrap(), vec![4, w, inner]))
            .collect();
        let tensors: Vec<Tensor> =
            parts.iter().map(|(v, s)| Tensor::from_vec(v.clone(), s).unwrap().to(device).unwrap()).collect();
        let refs: Vec<&Tensor> = tensors.iter().collect();
        let got = Tensor::cat(&refs, 1).unwrap();
        assert_eq!(got.shape(), &[4, 31, inner]);
        assert_eq!(got.to_vec().unwrap(), cat_reference(&parts, 1), "on {device}");
    }
}

#[test]
fn bad_cat_operands_are_errors_naming_the_problem() {
    let (a, b) = (Tensor::zeros(&[2, 3]), Tensor::zeros(&[2, 4]));
    let message = |r: Result<Tensor>| r.unwrap_err().to_string();
    assert!(message(Tensor::cat(&[], 0)).contains("cat: expected a non-empty list of tensors"));
    let sizes = message(Tensor::cat(&[&a, &b], 0));
    assert!(sizes.contains("sizes of tensors must match except in dimension 0"), "{sizes}");
    assert!(sizes.contains("expected size 3 but got size 4 for tensor number 1"), "{sizes}");
    assert_eq!(Tensor::cat(&[&a, &b], 1).unwrap().shape(), &[2, 7]);
    let ranks = message(Tensor::cat(&[&a, &Tensor::zeros(&[2, 3, 1])], 0));
    assert!(ranks.contains("same number of dimensions"), "{ranks}");
    assert!(matches!(Tensor::cat(&[&a, &b], 2), Err(Error::InvalidArgument { op: "cat", .. })));
}

/// One random case of the rewrite: `x: [batch, seq, d_in]` projected to widths `outs`.
fn linear_cases() -> impl Strategy<Value = (usize, usize, usize, Vec<usize>, bool, u64)> {
    (1usize..4, 1usize..9, 1usize..40, prop::collection::vec(1usize..40, 2..=4), any::<bool>(), any::<u64>())
}

#[test]
fn parallel_linears_compile_to_one_matmul_and_match_eager() {
    for device in devices() {
        check(24, linear_cases(), |(batch, seq, d_in, outs, biased, seed)| {
            let on = |t: Tensor| t.to(device).unwrap();
            let x = on(Tensor::randn(&[batch, seq, d_in], seed));
            let weights: Vec<Tensor> =
                outs.iter().enumerate().map(|(i, &o)| on(Tensor::randn(&[o, d_in], seed ^ (i as u64 + 1)))).collect();
            let biases: Vec<Tensor> =
                outs.iter().enumerate().map(|(i, &o)| on(Tensor::randn(&[o], seed ^ (i as u64 + 9)))).collect();
            // The projections are read together, as attention reads q, k and v.
            let f = |x: &Tensor| -> Result<Tensor> {
                let mut sum: Option<Tensor> = None;
                for (w, b) in weights.iter().zip(&biases) {
                    let y = x.linear(w, biased.then_some(b))?.sum(-1, true)?;
                    sum = Some(match sum {
                        None => y,
                        Some(s) => s.add(&y)?,
                    });
                }
                Ok(sum.expect("two or more projections"))
            };
            let inductor = Inductor::default();
            let compiled = dynamo::compile(|x: Tensor| f(&x)).backend(inductor.clone());
            let (got, log) = logs::capture(&[logs::Artifact::Fusion], || compiled.call(&x));
            prop_assert!(log.contains("pattern `concat linear`"), "no rewrite on {}:\n{}", device, log);
            let code = inductor.output_codes()[0].to_string();
            prop_assert_eq!(code.matches("extern_kernels::matmul(").count(), 1, "{}", code);
            let (got, want) = (got.unwrap().to_vec().unwrap(), f(&x).unwrap().to_vec().unwrap());
            for (g, w) in got.iter().zip(&want) {
                prop_assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()) * d_in as f32, "{} vs {} on {}", g, w, device);
            }
            Ok(())
        });
    }
}

#[test]
fn projections_of_different_inputs_or_computed_weights_are_left_alone() {
    let (x, y) = (Tensor::randn(&[2, 5, 8], 1), Tensor::randn(&[2, 5, 8], 2));
    let (w1, w2) = (Tensor::randn(&[4, 8], 3), Tensor::randn(&[4, 8], 4));
    let inductor = Inductor::default();
    let compiled = dynamo::compile(|(x, y): (Tensor, Tensor)| {
        // Different inputs; then one input, but a weight computed in the graph.
        let a = x.linear(&w1, None)?.add(&y.linear(&w2, None)?)?;
        a.add(&x.linear(&w1.mul(2.0)?, None)?)
    })
    .backend(inductor.clone());
    let (out, log) = logs::capture(&[logs::Artifact::Fusion], || compiled.call((&x, &y)));
    out.unwrap();
    assert!(!log.contains("concat linear"), "{log}");
    assert_eq!(inductor.output_codes()[0].to_string().matches("extern_kernels::matmul(").count(), 3);
}

/// Attention's query, key and value projections with biases, joined into one matmul: the joined
/// bias, read only by attention (through the heads' views), folds into the GEMM, so that nothing
/// but extern kernels is left (the joins, the product, attention). It folds wherever the target's
/// GEMMs apply epilogues: on the CPU in every dtype, on a GPU for the half-precision products
/// that run on cuBLASLt. Compiled against eager in f32, bf16 and f16, where eager rounds the
/// product and the bias add apart and the GEMM once: the weights are scaled by `1/sqrt(d)`, as a
/// model's are, since with unit weights the logits' spread is about 14 and one rounding more or
/// less swaps near-tied keys (0.64 apart in bf16, measured on the CPU), whatever the kernels.
#[test]
fn joined_projections_read_by_attention_carry_their_bias_in_the_gemm() {
    use engine::DType;
    let (d, heads) = (128, 2);
    for device in devices() {
        for dtype in [DType::F32, DType::BF16, DType::F16] {
            let tol = (16.0 * dtype.epsilon()).max(1e-3);
            let param = |shape: &[usize], seed, scale: f32| {
                Tensor::uniform(shape, -1.0, 1.0, seed).mul(scale).unwrap().to_dtype(dtype).unwrap().to(device).unwrap()
            };
            for (batch, seq) in [(2, 128), (3, 37)] {
                let x = param(&[batch, seq, d], 6, 1.0);
                let weights: Vec<Tensor> = (0..3).map(|i| param(&[d, d], 7 + i, 1.0 / (d as f32).sqrt())).collect();
                let biases: Vec<Tensor> = (0..3).map(|i| param(&[d], 10 + i, 1.0)).collect();
                let attention = |x: &Tensor| -> Result<Tensor> {
                    let split = |t: Tensor| t.reshape(&[batch, seq, heads, d / heads])?.transpose(1, 2);
                    let project = |i: usize| split(x.linear(&weights[i], Some(&biases[i]))?);
                    project(0)?.scaled_dot_product_attention(&project(1)?, &project(2)?, None, false, None)
                };
                let inductor = Inductor::default();
                let compiled = dynamo::compile(|x: Tensor| attention(&x)).backend(inductor.clone());
                let got = compiled.call(&x).unwrap();
                let code = inductor.output_codes()[0].clone();
                let what = format!("attention of three projections, [{batch}, {seq}, {d}], {dtype} on {device}");
                let folds = device == Device::Cpu || dtype.is_half();
                assert_eq!(code.kernel_names().is_empty(), folds, "{what}: the bias in the GEMM:\n{code}");
                let (g, e) = (got.to_vec().unwrap(), attention(&x).unwrap().to_vec().unwrap());
                if let Some(i) = g.iter().zip(&e).position(|(x, y)| (x - y).abs() > tol * (1.0 + y.abs())) {
                    panic!("{what}: element {i}: compiled {}, eager {}\n{code}", g[i], e[i]);
                }
            }
        }
    }
}
