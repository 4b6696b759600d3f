//! `bench fp8`: the MLP 512-2048-512 with its two matrix products in FP8 (`f8e4m3` operands with
//! one scale per tensor, `torch._scaled_mm`'s contract) against the same model in bf16, eager and
//! compiled, each with its error against the float32 model.
//!
//! Both FP8 forms quantize each weight once, ahead of time (`w / s` with `s = max|w| / 448`,
//! e4m3's largest finite value), widen each product back by both scales and store it in bf16;
//! biases and GELU stay in bf16. They differ in the activations' scales, as float8 recipes do:
//!
//! - dynamic: each activation's `max|x|` is measured on every call, then divided out and the
//!   quotient rounded to e4m3 (a reduction over the whole tensor, then a pass over it);
//! - static (delayed): each activation's scale is fixed ahead of time from a calibration batch
//!   (its `max|x|` with a margin), so quantizing is one pointwise divide, clamp and round that the
//!   compiled graph fuses into the kernel producing the activation (bias, GELU and the e4m3 store
//!   in one kernel between the products), and no reduction runs per call.
//!
//! Timing is `bench models`' (interleaved CUDA-event samples, L2 flushed before each). Only GPUs of
//! compute capability 8.9 or newer have FP8 tensor cores; elsewhere the command says so and stops.

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

/// Headroom of a static scale: the calibration batch's `max|x|` maps to `448 / MARGIN`, so a
/// later batch may reach twice that magnitude before it saturates, at the cost of one binade at
/// the bottom of e4m3's range.
const CALIBRATION_MARGIN: f32 = 2.0;

/// `t` rounded to e4m3 after dividing by its per-tensor scale `max|t| / 448`, with the scale (a
/// one-element float32 tensor) to pass to `scaled_mm`. The quotient of a bf16 tensor by a float32
/// scale is float32 (type promotion), so no explicit widening: a compiled graph then keeps `t` in
/// memory as bf16 between the reduction and the division, not as a float32 copy.
fn quantize(t: &Tensor) -> engine::Result<(Tensor, Tensor)> {
    let amax = t.abs()?.amax(-1, true)?.amax(-2, true)?.to_dtype(DType::F32)?;
    let scale = amax.div(E4M3_MAX)?;
    Ok((t.div(&scale)?.to_dtype(DType::F8E4M3)?, scale))
}

/// `t / scale` clamped to e4m3's finite range and rounded to e4m3: quantization with a fixed
/// scale, where a value past the range saturates (as float8 recipes clamp before the cast)
/// instead of becoming NaN.
fn quantize_saturated(t: &Tensor, scale: &Tensor) -> engine::Result<Tensor> {
    t.div(scale)?.minimum(E4M3_MAX)?.maximum(-E4M3_MAX)?.to_dtype(DType::F8E4M3)
}

/// `max|t|` over the whole tensor, on the host.
fn amax(t: &Tensor) -> engine::Result<f32> {
    t.abs()?.amax(-1, true)?.amax(-2, true)?.to_dtype(DType::F32)?.item()
}

/// Where an activation's scale comes from.
#[derive(Clone)]
enum ActivationScales {
    /// Measured on every call, from the activation itself.
    Dynamic,
    /// Fixed ahead of time (one-element float32 tensors): the input's and the hidden layer's.
    Static { input: Tensor, hidden: Tensor },
}

/// Which product's input an activation is.
#[derive(Clone, Copy)]
enum Activation {
    Input,
    Hidden,
}

/// The MLP with e4m3 weights (`[in, out]` column-major views, as cuBLASLt's FP8 products take
/// them) and their scales; biases in bf16; the activations' scales dynamic or static.
#[derive(Clone)]
struct Fp8Mlp {
    fc1: (Tensor, Tensor),
    fc1_bias: Tensor,
    fc2: (Tensor, Tensor),
    fc2_bias: Tensor,
    scales: ActivationScales,
}

impl Fp8Mlp {
    /// The dynamically scaled form of `mlp`.
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
            scales: ActivationScales::Dynamic,
        })
    }

    /// The same weights with the activations' scales fixed at `input` and `hidden`.
    fn with_static_scales(&self, input: f32, hidden: f32) -> engine::Result<Fp8Mlp> {
        let device = self.fc1_bias.device();
        let input = Tensor::scalar(input).to(device)?;
        let hidden = Tensor::scalar(hidden).to(device)?;
        Ok(Fp8Mlp { scales: ActivationScales::Static { input, hidden }, ..self.clone() })
    }

    /// The statically scaled form, calibrated on the batch `x`: each activation's `max|t|` as
    /// this form computes it there, times [`CALIBRATION_MARGIN`], over 448.
    fn calibrated(&self, x: &Tensor) -> engine::Result<Fp8Mlp> {
        let scale = |amax: f32| amax * CALIBRATION_MARGIN / E4M3_MAX;
        self.with_static_scales(scale(amax(x)?), scale(amax(&self.hidden(x)?)?))
    }

    /// `t` quantized for the product it enters, with its scale.
    fn quantize(&self, t: &Tensor, which: Activation) -> engine::Result<(Tensor, Tensor)> {
        match (&self.scales, which) {
            (ActivationScales::Dynamic, _) => quantize(t),
            (ActivationScales::Static { input: scale, .. }, Activation::Input)
            | (ActivationScales::Static { hidden: scale, .. }, Activation::Hidden) => {
                Ok((quantize_saturated(t, scale)?, scale.clone()))
            }
        }
    }

    /// `gelu(fc1(x))` with the product in FP8, `x` quantized on the way in.
    fn hidden(&self, x: &Tensor) -> engine::Result<Tensor> {
        let (xq, sx) = self.quantize(x, Activation::Input)?;
        xq.scaled_mm(&self.fc1.0, &sx, &self.fc1.1, DType::BF16)?.add(&self.fc1_bias)?.gelu()
    }

    /// `fc2(gelu(fc1(x)))` with both products in FP8, the activations quantized on the way in.
    fn forward(&self, x: &Tensor) -> engine::Result<Tensor> {
        let (hq, sh) = self.quantize(&self.hidden(x)?, Activation::Hidden)?;
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

/// The static form's scales and how they were found.
#[derive(Serialize)]
struct Calibration {
    /// What the scales were measured on.
    batch: &'static str,
    /// The calibrated `max|x|` maps to `448 / margin`.
    margin: f32,
    /// The input's scale.
    input_scale: f32,
    /// The hidden layer's scale.
    hidden_scale: f32,
}

/// The report of `bench fp8 --json`.
#[derive(Serialize)]
struct Report {
    device: String,
    batch: usize,
    timing: &'static str,
    rows: Vec<Row>,
    calibration: Calibration,
    /// Compiled bf16's median over compiled dynamic FP8's.
    fp8_dynamic_speedup_compiled: f64,
    /// Compiled bf16's median over compiled static FP8's.
    fp8_static_speedup_compiled: f64,
}

/// `max |a - reference| / max |reference|`.
fn relative_error(a: &Tensor, reference: &[f32]) -> Result<f64> {
    let a = a.to_dtype(DType::F32)?.to_vec()?;
    let scale = reference.iter().fold(0.0f64, |m, v| m.max(f64::from(v.abs())));
    let worst = a.iter().zip(reference).fold(0.0f64, |m, (x, y)| m.max(f64::from((x - y).abs())));
    Ok(worst / scale.max(f64::MIN_POSITIVE))
}

/// `bench fp8`: the MLP at `batch` rows in bf16 and both FP8 forms, eager and compiled; with
/// `profile`, each form's kernels by device time after the timing.
pub fn run(options: &Options, batch: usize, profile: bool) -> Result<()> {
    let device = options.device;
    if !matches!(device, Device::Cuda(_)) {
        bail!("bench fp8 runs on a GPU (FP8 tensor cores need compute capability 8.9 or newer): pass --device cuda");
    }
    let mlp = Mlp::new(0, device)?;
    let x32 = Tensor::randn(&[batch, MLP_FEATURES], 1).to(device)?;
    let reference = mlp.forward(&x32)?.to_vec()?;
    let bf16 = mlp.to_dtype(DType::BF16)?;
    let dynamic = Fp8Mlp::new(&mlp).context("quantizing the weights to e4m3")?;
    // Calibrated on another batch than the one measured, as a deployed model's scales are.
    let calibration_batch = Tensor::randn(&[batch, MLP_FEATURES], 2).to(device)?.to_dtype(DType::BF16)?;
    let fixed = dynamic.calibrated(&calibration_batch).context("calibrating the static scales")?;
    let ActivationScales::Static { input, hidden } = &fixed.scales else { unreachable!("calibrated is static") };
    let calibration = Calibration {
        batch: "another batch of the same size (seed 2)",
        margin: CALIBRATION_MARGIN,
        input_scale: input.item()?,
        hidden_scale: hidden.item()?,
    };
    let x = x32.to_dtype(DType::BF16)?;

    let bf16_compiled = dynamo::compile(|t: Vec<Tensor>| bf16.forward(&t[0])).name("mlp bf16");
    let dynamic_compiled = dynamo::compile(|t: Vec<Tensor>| dynamic.forward(&t[0])).name("mlp fp8 dynamic");
    let fixed_compiled = dynamo::compile(|t: Vec<Tensor>| fixed.forward(&t[0])).name("mlp fp8 static");
    let inputs = vec![x.clone()];
    let names = [
        "bf16 eager",
        "bf16 compiled",
        "fp8 dynamic eager",
        "fp8 dynamic compiled",
        "fp8 static eager",
        "fp8 static compiled",
    ];
    let forms: [Box<dyn Fn() -> engine::Result<Tensor> + '_>; 6] = [
        Box::new(|| bf16.forward(&x)),
        Box::new(|| bf16_compiled.call(&inputs)),
        Box::new(|| dynamic.forward(&x)),
        Box::new(|| dynamic_compiled.call(&inputs)),
        Box::new(|| fixed.forward(&x)),
        Box::new(|| fixed_compiled.call(&inputs)),
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
    let fp8_dynamic_speedup_compiled = rows[1].ms / rows[3].ms;
    let fp8_static_speedup_compiled = rows[1].ms / rows[5].ms;
    if options.json {
        let timing = "CUDA: median of interleaved CUDA-event samples, L2 flushed before each";
        let report = Report {
            device: device.to_string(),
            batch,
            timing,
            rows,
            calibration,
            fp8_dynamic_speedup_compiled,
            fp8_static_speedup_compiled,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let mut table = Table::new(&["MLP 512-2048-512", "ms", "error vs f32"]);
        for row in &rows {
            table.row(vec![row.form.clone(), format!("{:.4}", row.ms), format!("{:.2e}", row.relative_error)]);
        }
        println!("batch {batch} on {device}\n{}", table.render());
        println!(
            "compiled FP8 is {fp8_dynamic_speedup_compiled:.2}x compiled bf16 with dynamic scales, \
             {fp8_static_speedup_compiled:.2}x with static ones (input scale {:.3e}, hidden {:.3e}, margin {})",
            calibration.input_scale, calibration.hidden_scale, calibration.margin
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use engine::backends::{Backend, CompiledGraph};
    use engine::fx::Graph;
    use engine::inductor::{Config, OutputCode, codegen, generate};

    use super::*;

    /// A backend that keeps the graph it is handed and runs nothing: the CPU has no FP8 product,
    /// but capturing the graph and printing its CUDA output code need none.
    #[derive(Clone, Default)]
    struct Keep(Arc<Mutex<Option<Graph>>>);

    impl Backend for Keep {
        fn name(&self) -> &str {
            "keep"
        }
        fn compile(&self, graph: &Graph, _: &[Tensor]) -> engine::Result<Box<dyn CompiledGraph>> {
            *self.0.lock().unwrap() = Some(graph.clone());
            Err(engine::Error::Backend { backend: "keep".into(), message: "kept, not compiled".into() })
        }
    }

    /// The CUDA output code Inductor generates for `model.forward` on a bf16 batch of 64 rows.
    fn cuda_output_code(model: &Fp8Mlp) -> OutputCode {
        let keep = Keep::default();
        let x = Tensor::randn(&[64, MLP_FEATURES], 1).to_dtype(DType::BF16).unwrap();
        let _ = dynamo::compile(|t: Vec<Tensor>| model.forward(&t[0])).backend(keep.clone()).call(&[x]);
        let graph = keep.0.lock().unwrap().take().expect("the forward was captured in one graph");
        generate(&graph, Device::Cuda(0), &Config::default()).unwrap()
    }

    /// The kernels the call function launches before, between and after the two FP8 products.
    fn kernels_around_the_products(code: &OutputCode) -> [Vec<String>; 3] {
        let names = code.kernel_names();
        let mut parts: [Vec<String>; 3] = Default::default();
        let mut products = 0;
        for line in code.call.lines().map(str::trim_start) {
            if line.starts_with("extern_kernels::scaled_mm(") {
                products += 1;
            } else if let Some(name) = names.iter().find(|n| line.starts_with(&format!("{n}("))) {
                parts[products].push(name.to_string());
            }
        }
        assert_eq!(products, 2, "two FP8 products in:\n{code}");
        parts
    }

    fn cpu_model() -> Fp8Mlp {
        Fp8Mlp::new(&Mlp::new(0, Device::Cpu).unwrap()).unwrap()
    }

    #[test]
    fn static_scales_fuse_bias_gelu_and_the_e4m3_store_into_one_kernel_between_the_products() {
        let code = cuda_output_code(&cpu_model().with_static_scales(0.01, 0.02).unwrap());
        let [before, between, after] = kernels_around_the_products(&code);
        // The input's divide and round; bias, GELU, divide, clamp and round; the last bias, which
        // cuBLASLt adds in the second product's epilogue where a GPU is there to run it.
        assert_eq!(before, ["poi_fused_div_minimum_maximum_todtype_0"], "{code}");
        assert_eq!(between, ["poi_fused_add_mul_erf_div_minimum_maximum_todtype_1"], "{code}");
        let bias_folded = engine::device::cuda::unavailable_reason().is_none();
        assert_eq!(after, if bias_folded { &[][..] } else { &["poi_fused_add_2"][..] }, "{code}");
        assert_eq!(code.call.contains("bias = "), bias_folded, "{code}");
        let kernel = code.kernels.iter().find(|k| k.name == between[0]).unwrap();
        // It reads the product and the bias (bf16) and the scale, and writes e4m3 only: the
        // hidden layer never reaches memory in bf16. Four e4m3 values go out as one 32-bit store,
        // rounded once (no round trip through float before the store).
        let dtypes: Vec<(DType, bool)> = kernel.args.iter().map(|a| (a.dtype, a.output)).collect();
        assert_eq!(
            dtypes,
            [(DType::BF16, false), (DType::BF16, false), (DType::F32, false), (DType::F8E4M3, true)],
            "{code}"
        );
        assert!(kernel.source.contains("vstore4(out_ptr0 + x0, "), "{}", kernel.source);
        assert!(!kernel.source.contains("f8e4m3_to_float"), "{}", kernel.source);
        insta::assert_snapshot!("fp8_static_hidden_kernel_cuda", kernel.source);
    }

    #[test]
    fn dynamic_scales_reduce_each_activation_before_dividing_it() {
        let code = cuda_output_code(&cpu_model());
        let [before, between, _] = kernels_around_the_products(&code);
        // Each activation: `max|t|` per row (fused with what produces it), over the rows, then
        // the pass that divides and rounds: the activation goes to memory and is read back.
        for part in [&before, &between] {
            assert_eq!(part.len(), 3, "{code}");
            assert!(part[0].starts_with("per_") && part[0].contains("_abs_amax"), "{code}");
            assert!(part[1].starts_with("per_fused_amax_todtype_div"), "{code}");
            assert!(part[2].starts_with("poi_fused_div_todtype"), "{code}");
        }
    }

    #[test]
    fn the_static_form_compiles_for_hopper_with_nvrtc() {
        let code = cuda_output_code(&cpu_model().with_static_scales(0.01, 0.02).unwrap());
        let module = code.module_source(&codegen::cuda::prelude());
        match &engine::device::cuda::probe().nvrtc {
            Ok(_) => {
                for arch in ["sm_90", "sm_80"] {
                    if let Err(why) = engine::device::cuda::nvrtc::compile_cubin(&module, arch) {
                        panic!("{arch}: {why}\n{module}");
                    }
                }
            }
            Err(why) => eprintln!("skipped: no NVRTC ({why})"),
        }
    }

    #[test]
    fn saturated_quantization_clamps_to_e4m3s_range() {
        let t = Tensor::from_vec(vec![1.0, -1000.0, 1000.0, 0.3], &[2, 2]).unwrap();
        let q = quantize_saturated(&t, &Tensor::scalar(0.5)).unwrap();
        assert_eq!(q.to_dtype(DType::F32).unwrap().to_vec().unwrap(), [2.0, -448.0, 448.0, 0.625]);
        // Without the clamp, e4m3 has no infinity: the overflow is NaN.
        let unclamped = t.div(0.5).unwrap().to_dtype(DType::F8E4M3).unwrap().to_dtype(DType::F32).unwrap();
        assert!(unclamped.to_vec().unwrap()[1].is_nan());
    }
}
