//! `bench roofline`: the device's two ceilings, measured (memory bandwidth from a large copy,
//! arithmetic throughput from a large GEMM), and every kernel of the `models` workloads, eager
//! and compiled, placed under them: flops and bytes from the kernel's shapes ([`cost`]), time
//! from the profiler (CUDA events on a GPU, the host clock on the CPU). The roofline model in one
//! command: a kernel left of the ridge point can go no faster than memory feeds it, one right
//! of it no faster than the arithmetic units run.

mod cost;
mod plot;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use engine::backends::Inductor;
use engine::bench::{Bench, baseline};
use engine::inductor::output_code::KernelCode;
use engine::profiler::{EventKind, Profile, Profiler};
use engine::{DType, Device, dynamo};
use serde::{Deserialize, Serialize};

use crate::Options;
use crate::models::{Workload, workloads};
use crate::table::Table;
use cost::Cost;

/// The measured ceilings of a device.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Ceilings {
    /// Copy bandwidth, bytes read plus bytes written per second, in GB/s.
    pub bandwidth_gbs: f64,
    /// GEMM throughput in GFLOP/s, in the workloads' dtype (bf16 on a GPU's tensor cores; the CPU
    /// multiplies every dtype in float32).
    pub gflops: f64,
}

// ANCHOR: roof
impl Ceilings {
    /// The intensity (flop/byte) where the two roofs meet: kernels left of it are memory-bound.
    pub fn ridge(&self) -> f64 {
        self.gflops / self.bandwidth_gbs
    }

    /// The fastest a kernel of `intensity` can run, in GFLOP/s.
    pub fn roof(&self, intensity: f64) -> f64 {
        self.gflops.min(self.bandwidth_gbs * intensity)
    }
}
// ANCHOR_END: roof

/// One kernel of one workload, placed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// The workload it ran in.
    pub workload: String,
    /// `eager` or `compiled`.
    pub version: String,
    /// The op or generated kernel.
    pub kernel: String,
    /// Launches of it per call of the workload.
    pub launches: usize,
    /// Its work and traffic per launch.
    #[serde(flatten)]
    pub cost: Cost,
    /// Median seconds per launch.
    pub seconds: f64,
}

impl Point {
    /// Achieved GFLOP/s.
    pub fn gflops(&self) -> f64 {
        self.cost.flops / self.seconds / 1e9
    }
}

/// The sizes of the ceiling measurements: a copy far beyond every cache, a GEMM big enough to
/// reach the arithmetic units' peak (smaller on the CPU, where one takes a second).
fn ceiling_sizes(device: Device) -> (usize, usize) {
    match device {
        Device::Cuda(_) => (1 << 28, 8192),
        Device::Cpu => (1 << 25, 2048),
    }
}

/// Measures the copy bandwidth and GEMM throughput of `options.device`.
pub fn ceilings(options: &Options) -> Result<Ceilings> {
    let device = options.device;
    let (n, size) = ceiling_sizes(device);
    let samples = if device == Device::Cpu { options.samples.min(10) } else { options.samples };
    let bench = Bench::new(device).samples(samples).warmup(options.warmup.max(1)).flush_cache(false);
    let copy = bench.run(baseline::copy(device, n)?)?;
    let gemm = bench.run(baseline::gemm(device, 1, size, size, size, options.dtype)?)?;
    // The fastest sample, not the median: a ceiling is what the machine can do, and background
    // load only ever lowers it.
    Ok(Ceilings {
        bandwidth_gbs: 8.0 * n as f64 / copy.min() / 1e9,
        gflops: 2.0 * (size as f64).powi(3) / gemm.min() / 1e9,
    })
}

/// Profiles `calls` runs of `run` after one unprofiled warm-up.
fn profiled(device: Device, calls: usize, run: &dyn Fn() -> engine::Result<()>) -> Result<Profile> {
    run()?;
    device.synchronize()?;
    let ((), profile) = Profiler::new().record_shapes(true).run(|| {
        for _ in 0..calls {
            run()?;
        }
        device.synchronize()
    })?;
    Ok(profile)
}

/// Seconds of a kernel event: its GPU time where it has one, else its host time (on the CPU a
/// kernel runs on the launching thread).
fn seconds(event: &engine::profiler::Event) -> f64 {
    event.device_span.map_or(event.host_time, |(_, d)| d).as_secs_f64()
}

/// A kernel's cost (if it has arithmetic) and the seconds of each of its launches.
type Launches = (Option<Cost>, Vec<f64>);

/// The kernels of `workload`, eager and compiled, each with its cost and median time.
fn kernel_points(workload: &Workload, device: Device, calls: usize) -> Result<Vec<Point>> {
    let eager = profiled(device, calls, &|| workload.eager().map(drop))?;
    let inductor = Inductor::default();
    let compiled = dynamo::compile(workload.traceable()).backend(inductor.clone());
    let compiled_profile = profiled(device, calls, &|| compiled.call(&workload.inputs).map(drop))?;
    let codes: Vec<KernelCode> = inductor.output_codes().into_iter().flat_map(|c| c.kernels).collect();
    let mut points = Vec::new();
    for (version, profile) in [("eager", &eager), ("compiled", &compiled_profile)] {
        // Launches of the same kernel on the same shapes, pooled over the profiled calls.
        let mut groups: BTreeMap<(String, Vec<Vec<usize>>), Launches> = BTreeMap::new();
        for event in profile.events().iter().filter(|e| e.kind != EventKind::Range) {
            let shapes = event.shapes.clone().unwrap_or_default();
            let cost = match event.kind {
                EventKind::Compiled => codes.iter().find(|k| k.name == event.name).and_then(cost::compiled),
                _ => cost::eager(&event.name, &shapes, workload.dtype()),
            };
            let group = groups.entry((event.name.clone(), shapes)).or_insert((cost, Vec::new()));
            group.1.push(seconds(event));
        }
        for ((kernel, shapes), (cost, mut times)) in groups {
            let Some(cost) = cost else { continue };
            // Eager ops and extern matmuls share names across shapes; generated kernels do not.
            let kernel = if shapes.len() > 1 || kernel == "matmul" || version == "eager" {
                format!("{kernel} {}", shapes.iter().map(|s| dims(s)).collect::<Vec<_>>().join(","))
            } else {
                kernel
            };
            times.sort_by(f64::total_cmp);
            points.push(Point {
                workload: workload.name.clone(),
                version: version.into(),
                kernel,
                launches: times.len() / calls,
                cost,
                seconds: times[times.len() / 2],
            });
        }
    }
    Ok(points)
}

/// `256x2048`: a shape as the table prints it.
fn dims(shape: &[usize]) -> String {
    shape.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

/// The whole report of `bench roofline --json`, which `--from-json` reads back.
#[derive(Serialize, Deserialize)]
struct Report {
    device: String,
    /// The workloads' dtype (float32 in reports written before it was recorded).
    #[serde(default)]
    dtype: DType,
    date: String,
    ceilings: Ceilings,
    ridge_flop_per_byte: f64,
    points: Vec<Point>,
}

/// `bench roofline`: measures the ceilings and every kernel of the workloads whose name contains
/// one of `only` (all when empty), or reads a report written by `--json` from `from`; prints it
/// and draws it as an SVG at `svg` when given.
pub fn run(options: &Options, only: &[String], svg: Option<&Path>, from: Option<&Path>) -> Result<()> {
    let report = match from {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not a `bench roofline --json` report", path.display()))?
        }
        None => measure(options, only)?,
    };
    if let Some(path) = svg {
        let title = format!("Roofline: {}, {}", report.device, report.date);
        plot::svg(path, &title, &report.ceilings, &report.points)?;
        eprintln!("roofline written to {}", path.display());
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", render(&report.device, &report.ceilings, &report.points));
    }
    Ok(())
}

/// Measures the ceilings of `options.device`, then places the kernels of the chosen workloads.
fn measure(options: &Options, only: &[String]) -> Result<Report> {
    let device = options.device;
    let name = describe(device)?;
    let date = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..10].to_string();
    let ceilings = ceilings(options)?;
    eprintln!(
        "ceilings on {name}: copy {:.1} GB/s, GEMM {:.1} GFLOP/s, ridge at {:.1} flop/byte",
        ceilings.bandwidth_gbs,
        ceilings.gflops,
        ceilings.ridge()
    );
    // A GPU runs each workload in milliseconds; the CPU in up to seconds.
    let calls = if device == Device::Cpu { 1 } else { 5 };
    let mut points = Vec::new();
    for workload in workloads(device, options.dtype) {
        let workload = workload?;
        if !only.is_empty() && !only.iter().any(|o| workload.name.contains(o.as_str())) {
            continue;
        }
        eprintln!("  profiling {}", workload.name);
        points.extend(kernel_points(&workload, device, calls)?);
    }
    Ok(Report { device: name, dtype: options.dtype, date, ceilings, ridge_flop_per_byte: ceilings.ridge(), points })
}

/// The device as captions name it: `NVIDIA H100 80GB HBM3`, or the CPU's model and threads.
fn describe(device: Device) -> Result<String> {
    Ok(match device {
        Device::Cuda(ordinal) => engine::device::cuda::CudaDevice::get(ordinal)?.facts().name.clone(),
        Device::Cpu => {
            let model = std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|info| {
                    info.lines().find_map(|l| {
                        l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
                    })
                })
                .unwrap_or_else(|| "CPU".into());
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            format!("{model}, {threads} threads")
        }
    })
}

fn render(name: &str, ceilings: &Ceilings, points: &[Point]) -> String {
    let mut table =
        Table::new(&["workload", "version", "kernel", "launches", "flop/byte", "GFLOP/s", "GB/s", "bound", "of roof"]);
    for p in points {
        let intensity = p.cost.intensity();
        table.row(vec![
            p.workload.clone(),
            p.version.clone(),
            p.kernel.clone(),
            p.launches.to_string(),
            format!("{intensity:.2}"),
            format!("{:.1}", p.gflops()),
            format!("{:.1}", p.cost.bytes / p.seconds / 1e9),
            if intensity < ceilings.ridge() { "memory" } else { "compute" }.into(),
            format!("{:.0}%", 100.0 * p.gflops() / ceilings.roof(intensity)),
        ]);
    }
    format!(
        "roofline on {name}\ncopy {:.1} GB/s, GEMM {:.1} GFLOP/s, ridge at {:.2} flop/byte\n\n{}",
        ceilings.bandwidth_gbs,
        ceilings.gflops,
        ceilings.ridge(),
        table.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::Tensor;

    #[test]
    fn the_roof_is_bandwidth_bound_left_of_the_ridge() {
        let c = Ceilings { bandwidth_gbs: 10.0, gflops: 50.0 };
        assert_eq!(c.ridge(), 5.0);
        assert_eq!((c.roof(0.5), c.roof(5.0), c.roof(100.0)), (5.0, 50.0, 50.0));
    }

    #[test]
    fn every_kernel_of_a_workload_is_placed_with_its_cost() {
        let (x, bias) = (Tensor::randn(&[64, 32], 0), Tensor::randn(&[32], 1));
        let workload = Workload::new("tiny", vec![x, bias], |t| t[0].add(&t[1])?.relu()?.mul(2.0));
        let points = kernel_points(&workload, Device::Cpu, 2).unwrap();
        let named: Vec<(&str, &str, usize)> =
            points.iter().map(|p| (p.version.as_str(), p.kernel.as_str(), p.launches)).collect();
        assert_eq!(
            named,
            [
                ("eager", "add 64x32,32", 1),
                ("eager", "mul 64x32", 1),
                ("eager", "relu 64x32", 1),
                ("compiled", "poi_fused_add_relu_mul_0", 1)
            ]
        );
        // Fused: the same three flops per element, over x, bias and the output only.
        let fused = &points[3].cost;
        assert_eq!((fused.flops, fused.bytes), (3.0 * 2048.0, 4.0 * (2048.0 + 32.0 + 2048.0)));
        assert!(points.iter().all(|p| p.seconds > 0.0 && p.gflops() > 0.0));
    }

    #[test]
    fn a_json_report_reads_back_and_draws() {
        let point = Point {
            workload: "w".into(),
            version: "compiled".into(),
            kernel: "poi_fused_add_0".into(),
            launches: 1,
            cost: Cost { flops: 1e6, bytes: 8e6 },
            seconds: 1e-3,
        };
        let ceilings = Ceilings { bandwidth_gbs: 10.0, gflops: 50.0 };
        let report = Report {
            device: "d".into(),
            dtype: DType::F32,
            date: "2026-11-23".into(),
            ceilings,
            ridge_flop_per_byte: 5.0,
            points: vec![point],
        };
        let dir = std::env::temp_dir().join(format!("roofline-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (json, svg) = (dir.join("r.json"), dir.join("r.svg"));
        std::fs::write(&json, serde_json::to_string(&report).unwrap()).unwrap();
        let options = Options { device: Device::Cpu, samples: 1, warmup: 0, json: true, dtype: DType::F32 };
        run(&options, &[], Some(&svg), Some(&json)).unwrap();
        let drawn = std::fs::read_to_string(&svg).unwrap();
        assert!(drawn.starts_with("<svg") && drawn.contains("Roofline: d, 2026-11-23"));
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(dir.with_extension("bad"), "{}").unwrap();
        assert!(run(&options, &[], None, Some(&dir.with_extension("bad"))).is_err());
        std::fs::remove_file(dir.with_extension("bad")).unwrap();
    }
}
