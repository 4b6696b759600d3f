//! `bench fp8`: the MLP 512-2048-512 with its two matrix products in FP8 (`f8e4m3` operands with
//! one scale per tensor, `torch._scaled_mm`'s contract) against the same model in bf16, eager and
//! compiled, each with its error against the float32 model.
//!
//! The FP8 form quantizes as float8 inference recipes do: each weight once, ahead of time (`w / s`
//! with `s = max|w| / 448`, e4m3's largest finite value), each activation on every call (its
//! `max|x|` measured, divided out and rounded to e4m3), the product widened back by both scales
//! and stored in bf16; biases and GELU stay in bf16. Timing is `bench models`' (interleaved
//! CUDA-event samples, L2 flushed before each). Only GPUs of compute capability 8.9 or newer have
//! FP8 tensor cores; elsewhere the command says so and stops.

use anyhow::{Context, Result, bail};
use engine::bench::Bench;
use engine::profiler::{self, SortBy};
use engine::{DType, Device, Tensor, dynamo};
use serde::Serialize;
use workbook_models::phase5::{MLP_FEATURES, Mlp};

use crate::Options;
use crate::table::Table;

/// The largest finite `f8e4m3` value: a tensor scaled to this magnitude uses the format's range.
const E4M3_MAX: f32 = 448.0;

/// `t` rounded to e4m3 after dividing by its per-tensor scale `max|t| / 448`, with the scale (a
/// one-element float32 tensor) to pass to `scaled_mm`.
fn quantize(t: &Tensor) -> engine::Result<(Tensor, Tensor)> {
    let amax = t.abs()?.amax(-1, true)?.amax(-2, true)?.to_dtype(DType::F32)?;
    let scale = amax.div(E4M3_MAX)?;
    Ok((t.to_dtype(DType::F32)?.div(&scale)?.to_dtype(DType::F8E4M3)?, scale))
}

/// The MLP with e4m3 weights (`[in, out]` column-major views, as cuBLASLt's FP8 products take
/// them) and their scales; biases in bf16.
struct Fp8Mlp {
    fc1: (Tensor, Tensor),
    fc1_bias: Tensor,
    fc2: (Tensor, Tensor),
    fc2_bias: Tensor,
}

impl Fp8Mlp {
    fn new(mlp: &Mlp) -> engine::Result<Fp8Mlp> {
        let weight = |w: &Tensor| -> engine::Result<(Tensor, Tensor)> {
            let (q, s) = quantize(w)?;
            Ok((q.t()?, s))
        };
        Ok(Fp8Mlp {
            fc1: weight(&mlp.fc1_weight)?,
            fc1_bias: mlp.fc1_bias.to_dtype(DType::BF16)?,
            fc2: weight(&mlp.fc2_weight)?,
            fc2_bias: mlp.fc2_bias.to_dtype(DType::BF16)?,
        })
    }

    /// `fc2(gelu(fc1(x)))` with both products in FP8, the activations quantized on the way in.
    fn forward(&self, x: &Tensor) -> engine::Result<Tensor> {
        let (xq, sx) = quantize(x)?;
        let h = xq.scaled_mm(&self.fc1.0, &sx, &self.fc1.1, DType::BF16)?.add(&self.fc1_bias)?.gelu()?;
        let (hq, sh) = quantize(&h)?;
        hq.scaled_mm(&self.fc2.0, &sh, &self.fc2.1, DType::BF16)?.add(&self.fc2_bias)
    }
}

/// One form's row: its median time and its error against float32.
#[derive(Serialize)]
struct Row {
    form: String,
    ms: f64,
    /// `max |y - y_f32| / max |y_f32|`.
    relative_error: f64,
}

/// The report of `bench fp8 --json`.
#[derive(Serialize)]
struct Report {
    device: String,
    batch: usize,
    timing: &'static str,
    rows: Vec<Row>,
    /// Compiled bf16's median over compiled FP8's.
    fp8_speedup_compiled: f64,
}

/// `max |a - reference| / max |reference|`.
fn relative_error(a: &Tensor, reference: &[f32]) -> Result<f64> {
    let a = a.to_dtype(DType::F32)?.to_vec()?;
    let scale = reference.iter().fold(0.0f64, |m, v| m.max(f64::from(v.abs())));
    let worst = a.iter().zip(reference).fold(0.0f64, |m, (x, y)| m.max(f64::from((x - y).abs())));
    Ok(worst / scale.max(f64::MIN_POSITIVE))
}

/// `bench fp8`: the MLP at `batch` rows in bf16 and FP8, eager and compiled; with `profile`, each
/// form's kernels by device time after the timing.
pub fn run(options: &Options, batch: usize, profile: bool) -> Result<()> {
    let device = options.device;
    if !matches!(device, Device::Cuda(_)) {
        bail!("bench fp8 runs on a GPU (FP8 tensor cores need compute capability 8.9 or newer): pass --device cuda");
    }
    let mlp = Mlp::new(0, device)?;
    let x32 = Tensor::randn(&[batch, MLP_FEATURES], 1).to(device)?;
    let reference = mlp.forward(&x32)?.to_vec()?;
    let bf16 = mlp.to_dtype(DType::BF16)?;
    let fp8 = Fp8Mlp::new(&mlp).context("quantizing the weights to e4m3")?;
    let x = x32.to_dtype(DType::BF16)?;

    let bf16_compiled = dynamo::compile(|t: Vec<Tensor>| bf16.forward(&t[0])).name("mlp bf16");
    let fp8_compiled = dynamo::compile(|t: Vec<Tensor>| fp8.forward(&t[0])).name("mlp fp8");
    let inputs = vec![x.clone()];
    let names = ["bf16 eager", "bf16 compiled", "fp8 eager", "fp8 compiled"];
    let forms: [Box<dyn Fn() -> engine::Result<Tensor> + '_>; 4] = [
        Box::new(|| bf16.forward(&x)),
        Box::new(|| bf16_compiled.call(&inputs)),
        Box::new(|| fp8.forward(&x)),
        Box::new(|| fp8_compiled.call(&inputs)),
    ];
    let mut errors = Vec::new();
    for (name, form) in names.iter().zip(&forms) {
        let y = form().with_context(|| format!("the {name} form's first call"))?;
        errors.push(relative_error(&y, &reference)?);
    }
    let bench = Bench::new(device).samples(options.samples).warmup(options.warmup).flush_cache(true);
    let mut runs: Vec<Box<dyn FnMut() -> engine::Result<()> + '_>> =
        forms.iter().map(|f| Box::new(move || f().map(drop)) as Box<dyn FnMut() -> engine::Result<()>>).collect();
    let mut refs: Vec<&mut dyn FnMut() -> engine::Result<()>> = runs.iter_mut().map(|f| &mut **f as _).collect();
    let timings = bench.run_interleaved(&mut refs)?;
    let rows: Vec<Row> = names
        .iter()
        .zip(&timings)
        .zip(&errors)
        .map(|((name, t), &relative_error)| Row { form: name.to_string(), ms: t.median() * 1e3, relative_error })
        .collect();
    if profile {
        for (name, form) in names.iter().zip(&forms) {
            let ((), calls) = profiler::profile(|| {
                for _ in 0..10 {
                    form()?;
                }
                device.synchronize()
            })?;
            eprintln!("{name}, 10 calls:\n{}\n", calls.key_averages().sort_by(SortBy::SelfDeviceTotal));
        }
    }
    let fp8_speedup_compiled = rows[1].ms / rows[3].ms;
    if options.json {
        let timing = "CUDA: median of interleaved CUDA-event samples, L2 flushed before each";
        let report = Report { device: device.to_string(), batch, timing, rows, fp8_speedup_compiled };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let mut table = Table::new(&["MLP 512-2048-512", "ms", "error vs f32"]);
        for row in &rows {
            table.row(vec![row.form.clone(), format!("{:.4}", row.ms), format!("{:.2e}", row.relative_error)]);
        }
        println!("batch {batch} on {device}\n{}", table.render());
        println!("compiled FP8 is {fp8_speedup_compiled:.2}x compiled bf16");
    }
    Ok(())
}
