//! `scaled_dot_product_attention`: the fused op against a float64 reference and against the
//! naive form, on random shapes (sequence lengths that are not multiples of the kernels' tiles,
//! head dims 32, 64 and 128, every mask kind, causal, operands dense or as views); the pattern matcher rewriting each naive
//! variant into the op (and leaving alone what it must not touch); the output code of
//! `examples/naive_attention.rs`. Each case runs on the CPU and, where CUDA can run, on the GPU;
//! without one the GPU cases print `skipped: <reason>` and pass.

mod common;

#[allow(dead_code)] // the example's `main` is not called here
#[path = "../examples/naive_attention.rs"]
mod example;

use common::gpu;
use common::reference::RefTensor;
use engine::backends::Inductor;
use engine::{AttnMask, DType, Device, Error, Result, Tensor, dynamo, logs};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};

/// How a case masks the scores.
#[derive(Clone, Copy, Debug)]
enum MaskCase {
    None,
    Causal,
    /// Random 0/1 values, broadcast over the heads (`[batch, 1, L, S]`).
    Boolean,
    /// Random values with some `-inf`, one `[L, S]` for every batch entry and head.
    Additive,
}

/// How a case's q, k and v lie in memory (the values the kernel sees are the same).
#[derive(Clone, Copy, Debug)]
enum Lay {
    /// Dense `[batch, heads, len, width]`.
    Contiguous,
    /// Heads split from a wider projection: `[batch, len, heads, width + 3]`, sliced to `width`
    /// and transposed, as a model's `reshape(...).transpose(1, 2)` leaves them.
    HeadsSplit,
    /// Each row's elements `len` apart (a transpose of the last two dims): not read in place.
    RowsStrided,
}

/// One random case: `[batch, heads, L, E]` queries, `S` keys, values of width `Ev`.
#[derive(Clone, Debug)]
struct Case {
    batch: usize,
    heads: usize,
    q_len: usize,
    kv_len: usize,
    head_dim: usize,
    value_dim: usize,
    mask: MaskCase,
    lay: Lay,
    seed: u64,
}

fn cases() -> impl Strategy<Value = Case> {
    let dims = prop_oneof![Just(32usize), Just(64), Just(128), 1usize..40];
    let mask =
        prop_oneof![Just(MaskCase::None), Just(MaskCase::Causal), Just(MaskCase::Boolean), Just(MaskCase::Additive)];
    let lay = prop_oneof![Just(Lay::Contiguous), Just(Lay::HeadsSplit), Just(Lay::RowsStrided)];
    (1usize..3, 1usize..4, 1usize..140, 1usize..140, dims, any::<bool>(), (mask, lay), any::<u64>()).prop_map(
        |(batch, heads, q_len, kv_len, head_dim, same_width, (mask, lay), seed)| Case {
            batch,
            heads,
            q_len,
            kv_len,
            head_dim,
            value_dim: if same_width { head_dim } else { 1 + (seed as usize % 64) },
            mask,
            lay,
            seed,
        },
    )
}

/// A random `[batch, heads, len, width]` operand laid out as `lay` says.
fn operand(lay: Lay, [batch, heads, len, width]: [usize; 4], seed: u64) -> Tensor {
    match lay {
        Lay::Contiguous => Tensor::randn(&[batch, heads, len, width], seed),
        Lay::HeadsSplit => Tensor::randn(&[batch, len, heads, width + 3], seed)
            .slice(-1, 0, width, 1)
            .and_then(|t| t.transpose(1, 2))
            .unwrap(),
        Lay::RowsStrided => Tensor::randn(&[batch, heads, width, len], seed).transpose(2, 3).unwrap(),
    }
}

/// The case's inputs on `device`: q, k, v and the mask tensor (if any).
fn inputs(case: &Case, device: Device) -> (Tensor, Tensor, Tensor, Option<Tensor>) {
    let Case { batch, heads, q_len, kv_len, head_dim, value_dim, lay, seed, .. } = *case;
    let on = |t: Tensor| t.to(device).unwrap();
    let q = on(operand(lay, [batch, heads, q_len, head_dim], seed));
    let k = on(operand(lay, [batch, heads, kv_len, head_dim], seed ^ 1));
    let v = on(operand(lay, [batch, heads, kv_len, value_dim], seed ^ 2));
    let mask = match case.mask {
        MaskCase::None | MaskCase::Causal => None,
        MaskCase::Boolean => Some(Tensor::randn(&[batch, 1, q_len, kv_len], seed ^ 3).gt(-0.5).unwrap()),
        MaskCase::Additive => {
            let values = Tensor::randn(&[q_len, kv_len], seed ^ 3);
            Some(values.where_(&values.gt(-1.5).unwrap(), f32::NEG_INFINITY).unwrap())
        }
    };
    (q, k, v, mask.map(on))
}

/// The fused op on the case's inputs.
fn fused(case: &Case, (q, k, v, mask): &(Tensor, Tensor, Tensor, Option<Tensor>)) -> Result<Tensor> {
    let mask = match case.mask {
        MaskCase::Boolean => mask.as_ref().map(AttnMask::Boolean),
        MaskCase::Additive => mask.as_ref().map(AttnMask::Additive),
        _ => None,
    };
    q.scaled_dot_product_attention(k, v, mask, matches!(case.mask, MaskCase::Causal), None)
}

/// The same attention in float64, one score row at a time.
fn reference(case: &Case, (q, k, v, mask): &(Tensor, Tensor, Tensor, Option<Tensor>)) -> RefTensor {
    let Case { batch, heads, q_len, kv_len, head_dim, value_dim, .. } = *case;
    let host = |t: &Tensor| t.to_vec().unwrap().into_iter().map(f64::from).collect::<Vec<f64>>();
    let (q, k, v) = (host(q), host(k), host(v));
    let mask = mask.as_ref().map(host);
    let scale = 1.0 / (head_dim as f64).sqrt();
    let mut out = Vec::with_capacity(batch * heads * q_len * value_dim);
    for n in 0..batch * heads {
        for i in 0..q_len {
            let scores: Vec<f64> = (0..kv_len)
                .map(|j| {
                    let dot: f64 = (0..head_dim)
                        .map(|d| q[(n * q_len + i) * head_dim + d] * k[(n * kv_len + j) * head_dim + d])
                        .sum();
                    let s = dot * scale;
                    match (case.mask, &mask) {
                        (MaskCase::Causal, _) if j > i => f64::NEG_INFINITY,
                        (MaskCase::Boolean, Some(m)) if m[((n / heads) * q_len + i) * kv_len + j] == 0.0 => {
                            f64::NEG_INFINITY
                        }
                        (MaskCase::Additive, Some(m)) => s + m[i * kv_len + j],
                        _ => s,
                    }
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = weights.iter().sum();
            for c in 0..value_dim {
                let acc: f64 = weights.iter().enumerate().map(|(j, w)| w * v[(n * kv_len + j) * value_dim + c]).sum();
                out.push(acc / sum);
            }
        }
    }
    RefTensor::new(vec![batch, heads, q_len, value_dim], out)
}

/// The naive form in the engine's own eager ops: what the pattern matcher rewrites.
fn naive(case: &Case, (q, k, v, mask): &(Tensor, Tensor, Tensor, Option<Tensor>)) -> Result<Tensor> {
    let scores = q.matmul(&k.transpose(-2, -1)?)?.div((case.head_dim as f32).sqrt())?;
    let scores = match (case.mask, mask) {
        (MaskCase::Boolean, Some(m)) => m.where_(&scores, f32::NEG_INFINITY)?,
        (MaskCase::Additive, Some(m)) => scores.add(m)?,
        (MaskCase::Causal, _) => {
            let (l, s) = (case.q_len, case.kv_len);
            let keep: Vec<f32> = (0..l * s).map(|e| f32::from(u8::from(e % s <= e / s))).collect();
            let keep = Tensor::from_vec(keep, &[l, s])?.to(q.device())?;
            keep.where_(&scores, f32::NEG_INFINITY)?
        }
        _ => scores,
    };
    scores.softmax(-1)?.matmul(v)
}

fn check(cases_count: u32, device: Device) {
    let mut runner = TestRunner::new(RunnerConfig { cases: cases_count, ..RunnerConfig::default() });
    let result = runner.run(&cases(), |case| {
        let operands = inputs(&case, device);
        let got = fused(&case, &operands).unwrap();
        // f32 accumulation over up to 128 products and 140 keys.
        common::assert_close(&got, &reference(&case, &operands), None, 1e-4, 1e-4);
        let naive = naive(&case, &operands).unwrap().to_vec().unwrap();
        for (g, n) in got.to_vec().unwrap().iter().zip(&naive) {
            let same = (g.is_nan() && n.is_nan()) || (g - n).abs() <= 1e-4 + 1e-4 * n.abs();
            prop_assert!(same, "fused {g} vs naive {n} in {case:?}");
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn fused_matches_reference_and_naive_on_cpu() {
    check(48, Device::Cpu);
}

#[test]
fn fused_matches_reference_and_naive_on_cuda() {
    let Some(device) = gpu() else { return };
    check(96, device);
}

#[test]
fn a_fully_masked_row_is_nan_as_in_pytorch() {
    for device in [Some(Device::Cpu), gpu()].into_iter().flatten() {
        let on = |t: Tensor| t.to(device).unwrap();
        let (q, k, v) =
            (on(Tensor::randn(&[1, 3, 8], 0)), on(Tensor::randn(&[1, 5, 8], 1)), on(Tensor::randn(&[1, 5, 8], 2)));
        let mut keep = vec![1.0f32; 15];
        keep[5..10].fill(0.0); // query 1 sees no key
        let keep = on(Tensor::from_vec(keep, &[3, 5]).unwrap());
        let out = q.scaled_dot_product_attention(&k, &v, Some(AttnMask::Boolean(&keep)), false, None).unwrap();
        let out = out.to_vec().unwrap();
        assert!(out[8..16].iter().all(|x| x.is_nan()), "{device}: {out:?}");
        assert!(out[..8].iter().chain(&out[16..]).all(|x| x.is_finite()), "{device}: {out:?}");
    }
}

#[test]
fn a_fully_masked_row_passes_no_gradient() {
    // Its output is NaN, but it has no probability to carry a gradient: its query's gradient is
    // zero and every key and value keeps a finite one, on the CPU as the CUDA kernels give.
    for device in [Some(Device::Cpu), gpu()].into_iter().flatten() {
        let on = |t: Tensor| t.to(device).unwrap().requires_grad_(true);
        let (q, k, v) =
            (on(Tensor::randn(&[1, 3, 8], 0)), on(Tensor::randn(&[1, 5, 8], 1)), on(Tensor::randn(&[1, 5, 8], 2)));
        let mut keep = vec![1.0f32; 15];
        keep[5..10].fill(0.0); // query 1 sees no key
        let keep = Tensor::from_vec(keep, &[3, 5]).unwrap().to(device).unwrap();
        let out = q.scaled_dot_product_attention(&k, &v, Some(AttnMask::Boolean(&keep)), false, None).unwrap();
        let upstream = Tensor::randn(&[1, 3, 8], 3).to(device).unwrap();
        out.backward_with(Some(&upstream), false).unwrap();
        let grad = |t: &Tensor| t.grad().expect("a gradient").to_vec().unwrap();
        let dq = grad(&q);
        assert!(dq[8..16].iter().all(|&x| x == 0.0), "{device}: {dq:?}");
        assert!(dq[..8].iter().chain(&dq[16..]).all(|x| x.is_finite()), "{device}: {dq:?}");
        for (name, g) in [("k", grad(&k)), ("v", grad(&v))] {
            assert!(g.iter().all(|x| x.is_finite()), "{device}: d{name} {g:?}");
        }
    }
}

#[test]
fn bad_operands_are_errors_naming_the_problem() {
    let t = |shape: &[usize]| Tensor::zeros(shape);
    let err = |r: Result<Tensor>| r.unwrap_err().to_string();
    let q = t(&[2, 4, 8]);
    let message = err(q.scaled_dot_product_attention(&t(&[2, 4, 7]), &t(&[2, 4, 8]), None, false, None));
    assert!(message.contains("head_dim 8 differs from k's 7"), "{message}");
    let message = err(q.scaled_dot_product_attention(&t(&[2, 5, 8]), &t(&[2, 4, 8]), None, false, None));
    assert!(message.contains("5 keys but v has 4"), "{message}");
    let message = err(q.scaled_dot_product_attention(&t(&[3, 4, 8]), &t(&[3, 4, 8]), None, false, None));
    assert!(message.contains("same leading"), "{message}");
    let mask = t(&[4, 3]);
    let message = err(q.scaled_dot_product_attention(&q, &q, Some(AttnMask::Additive(&mask)), false, None));
    assert!(message.contains("does not broadcast"), "{message}");
    let mask = t(&[4, 4]);
    let message = err(q.scaled_dot_product_attention(&q, &q, Some(AttnMask::Boolean(&mask)), true, None));
    assert!(message.contains("not both"), "{message}");
    let message = err(t(&[4]).scaled_dot_product_attention(&t(&[4]), &t(&[4]), None, false, None));
    assert!(message.contains("at least 2"), "{message}");
    assert!(matches!(
        t(&[2, 0]).scaled_dot_product_attention(&t(&[2, 0]), &t(&[2, 0]), None, false, None),
        Err(Error::InvalidArgument { .. })
    ));
}

/// The naive variants people write, each a function of `(q, k, v, mask)`.
type Variant = fn(&Tensor, &Tensor, &Tensor, &Tensor) -> Result<Tensor>;

fn variants() -> Vec<(&'static str, Variant)> {
    vec![
        ("divide by sqrt(d)", |q, k, v, _| q.matmul(&k.transpose(-2, -1)?)?.div(8.0)?.softmax(-1)?.matmul(v)),
        ("multiply, transpose(2, 3)", |q, k, v, _| q.matmul(&k.transpose(2, 3)?)?.mul(0.125)?.softmax(-1)?.matmul(v)),
        ("scale first, hand-written softmax", |q, k, v, _| {
            let s = q.mul(0.125)?.matmul(&k.transpose(-1, -2)?)?;
            let e = s.sub(&s.amax(-1, true)?)?.exp()?;
            e.div(&e.sum(-1, true)?)?.matmul(v)
        }),
        ("additive mask", |q, k, v, m| q.matmul(&k.transpose(-2, -1)?)?.div(8.0)?.add(m)?.softmax(-1)?.matmul(v)),
        ("mask first, then scores", |q, k, v, m| {
            m.add(&q.matmul(&k.transpose(-2, -1)?)?.mul(0.125)?)?.softmax(-1)?.matmul(v)
        }),
        ("where(mask, scores, -inf)", |q, k, v, m| {
            let keep = m.gt(-1.0)?;
            keep.where_(&q.matmul(&k.transpose(-2, -1)?)?.div(8.0)?, f32::NEG_INFINITY)?.softmax(-1)?.matmul(v)
        }),
        ("where(mask, -inf, scores)", |q, k, v, m| {
            let drop = m.le(-1.0)?;
            drop.where_(f32::NEG_INFINITY, &q.matmul(&k.transpose(-2, -1)?)?.div(8.0)?)?.softmax(-1)?.matmul(v)
        }),
        ("k given transposed", |q, k, v, _| {
            q.matmul(&k.permute(&[0, 1, 3, 2])?.contiguous()?)?.div(8.0)?.softmax(-1)?.matmul(v)
        }),
    ]
}

#[test]
fn every_naive_variant_becomes_one_flash_attention_call() {
    for device in [Some(Device::Cpu), gpu()].into_iter().flatten() {
        let on = |t: Tensor| t.to(device).unwrap();
        let shape = [2, 3, 77, 64];
        let (q, k, v) = (on(Tensor::randn(&shape, 1)), on(Tensor::randn(&shape, 2)), on(Tensor::randn(&shape, 3)));
        let mask = on(Tensor::randn(&[77, 77], 4));
        for (name, f) in variants() {
            let inductor = Inductor::default();
            let compiled = dynamo::compile(|(q, k, v, m): (Tensor, Tensor, Tensor, Tensor)| f(&q, &k, &v, &m))
                .backend(inductor.clone());
            let (got, log) = logs::capture(&[logs::Artifact::Fusion], || compiled.call((&q, &k, &v, &mask)));
            let code = inductor.output_codes()[0].to_string();
            assert!(log.contains("pattern `attention:"), "{name} on {device}: no pattern fired:\n{log}");
            assert!(code.contains("extern_kernels::flash_attention("), "{name} on {device}:\n{code}");
            assert!(!code.contains("extern_kernels::matmul"), "{name} on {device}: a matmul is left:\n{code}");
            let want = f(&q, &k, &v, &mask).unwrap().to_vec().unwrap();
            for (g, w) in got.unwrap().to_vec().unwrap().iter().zip(&want) {
                assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "{name} on {device}: {g} vs {w}");
            }
        }
    }
}

#[test]
fn a_match_whose_scores_are_read_elsewhere_is_left_alone() {
    let shape = [1, 2, 9, 16];
    let (q, k, v) = (Tensor::randn(&shape, 1), Tensor::randn(&shape, 2), Tensor::randn(&shape, 3));
    let inductor = Inductor::default();
    let compiled = dynamo::compile(|(q, k, v): (Tensor, Tensor, Tensor)| {
        let scores = q.matmul(&k.transpose(-2, -1)?)?.div(4.0)?;
        Ok((scores.softmax(-1)?.matmul(&v)?, scores))
    })
    .backend(inductor.clone());
    compiled.call((&q, &k, &v)).unwrap();
    assert!(!inductor.output_codes()[0].to_string().contains("flash_attention"));
}

/// Heads split from one projection `[batch, len, heads * width]` as a model splits them.
fn heads_of(x: &Tensor, heads: usize) -> Tensor {
    let [batch, len, wide] = x.shape()[..] else { panic!("a [batch, len, width] projection") };
    x.reshape(&[batch, len, heads, wide / heads]).and_then(|t| t.transpose(1, 2)).unwrap()
}

#[test]
fn compiled_attention_writes_q_layout_so_merging_heads_copies_nothing() {
    // Value widths 64 (the Hopper kernel's, in bf16) and 40 (the mma.sync and float32 kernels'),
    // causal and not, in float32 and bf16: the output comes back merged into rows.
    for device in [Some(Device::Cpu), gpu()].into_iter().flatten() {
        for (dtype, width, causal) in
            [(DType::F32, 64, false), (DType::BF16, 64, false), (DType::BF16, 64, true), (DType::BF16, 40, false)]
        {
            let (batch, len, heads) = (2, 67, 3);
            let on =
                |seed| Tensor::randn(&[batch, len, heads * width], seed).to_dtype(dtype).unwrap().to(device).unwrap();
            let (q, k, v) = (on(1), on(2), on(3));
            let attend = move |(q, k, v): (Tensor, Tensor, Tensor)| {
                let out = heads_of(&q, heads).scaled_dot_product_attention(
                    &heads_of(&k, heads),
                    &heads_of(&v, heads),
                    None,
                    causal,
                    None,
                )?;
                out.transpose(1, 2)?.contiguous()?.reshape(&[batch, len, heads * width])
            };
            let inductor = Inductor::default();
            let got = dynamo::compile(attend).backend(inductor.clone()).call((&q, &k, &v)).unwrap();
            let output_code = &inductor.output_codes()[0];
            let code = output_code.to_string();
            let case = format!("{dtype} width {width} causal {causal} on {device}");
            assert!(code.contains("extern_kernels::flash_attention("), "{case}:\n{code}");
            assert!(code.contains("out = buf0.as_strided("), "{case}: the output is not in q's layout:\n{code}");
            assert!(output_code.kernel_names().is_empty(), "{case}: a kernel copies the heads back:\n{code}");
            let want = attend((q.clone(), k.clone(), v.clone())).unwrap();
            let tolerance = if dtype == DType::F32 { 1e-4 } else { 2e-2 };
            for (g, w) in got.to_vec().unwrap().iter().zip(&want.to_vec().unwrap()) {
                assert!((g - w).abs() <= tolerance + tolerance * w.abs(), "{case}: {g} vs {w}");
            }
        }
    }
}

#[test]
fn naive_attention_example_output_code() {
    insta::assert_snapshot!("naive_attention_c", example::output_code(Device::Cpu).unwrap().to_string());
    insta::assert_snapshot!("naive_attention_cuda", example::output_code(Device::Cuda(0)).unwrap().to_string());
}
