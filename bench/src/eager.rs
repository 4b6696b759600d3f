//! `bench eager`: every class of eager op at a size that fills the device, as achieved bandwidth
//! (or FLOP rate) and its ratio to a ceiling timed in the same run, interleaved with it: a
//! device-to-device copy for memory-bound ops, the vendor GEMM on ready buffers for matmul.
//!
//! Bytes are the fewest a kernel must move (each input read once, the output written once), so a
//! ratio near 1.0 means the kernel runs at the speed of memory, and speedups from compilation
//! can only come from moving fewer bytes: fusing ops.

use anyhow::Result;
use engine::bench::baseline::{self, Work};
use engine::bench::{Bench, Timing, time_once};
use engine::{Device, Tensor};

use crate::table::Table;
use crate::{Options, say};

/// The ceiling a workload is compared with.
#[derive(Clone, Copy, PartialEq)]
enum Ceiling {
    /// A device-to-device copy of `n` floats: compare bandwidth.
    Copy,
    /// The vendor GEMM on the same `(batch, m, n, k)`: compare FLOP rates.
    Gemm(usize, usize, usize, usize),
}

/// What one workload is, what it must move or compute, and the closure that queues it.
struct Workload {
    op: String,
    shape: String,
    /// Fewest bytes moved (memory-bound ops) or floating-point operations (matmul).
    amount: f64,
    ceiling: Ceiling,
    /// Which target, if any, the ratio must meet on a GPU.
    target: Option<Target>,
    run: Work,
}

#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// Large pointwise kernels: 80% of copy bandwidth.
    Pointwise,
    /// Row reductions: 70% of copy bandwidth.
    Reduction,
}

impl Target {
    fn bar(self) -> f64 {
        match self {
            Target::Pointwise => 0.80,
            Target::Reduction => 0.70,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Target::Pointwise => "large dense pointwise kernels",
            Target::Reduction => "4096x4096 row reductions",
        }
    }
}

/// Problem sizes: large enough to fill an H100 (inputs far beyond its 50 MB L2); the CPU uses
/// smaller matrix products so the run stays short.
struct Sizes {
    n: usize,
    rows: usize,
    cols: usize,
    matmul: usize,
    batched: (usize, usize),
}

impl Sizes {
    fn for_device(device: Device) -> Sizes {
        match device {
            Device::Cuda(_) => Sizes { n: 1 << 24, rows: 4096, cols: 4096, matmul: 4096, batched: (64, 512) },
            Device::Cpu => Sizes { n: 1 << 24, rows: 4096, cols: 4096, matmul: 1024, batched: (8, 256) },
        }
    }
}

pub fn run(options: &Options) -> Result<()> {
    let device = options.device;
    describe_device(options)?;
    let sizes = Sizes::for_device(device);
    let bench = Bench::new(device).samples(options.samples).warmup(options.warmup);
    let mut copy = baseline::copy(device, sizes.n)?;
    let copy_bytes = 8.0 * sizes.n as f64;
    let copy_alone = bench.run(&mut copy)?;
    let mut table = Table::new(&["op", "shape", "moved", "median", "spread", "rate", "ceiling", "ratio"]);
    table.row(vec![
        "copy (ceiling)".into(),
        format!("[{}]", sizes.n),
        megabytes(copy_bytes),
        micros(&copy_alone),
        percent(copy_alone.spread()),
        rate(copy_bytes, copy_alone.median(), Ceiling::Copy),
        "-".into(),
        "1.00".into(),
    ]);
    let mut misses = Vec::new();
    let mut met = Vec::new();
    for mut workload in workloads(device, &sizes)? {
        let (ceiling_time, time, ceiling_amount) = match workload.ceiling {
            Ceiling::Copy => {
                let t = bench.run_interleaved(&mut [&mut copy, &mut workload.run])?;
                (t[0].clone(), t[1].clone(), copy_bytes)
            }
            Ceiling::Gemm(batch, m, n, k) => {
                let mut gemm = baseline::gemm(device, batch, m, n, k, engine::DType::F32)?;
                let t = bench.run_interleaved(&mut [&mut gemm, &mut workload.run])?;
                (t[0].clone(), t[1].clone(), 2.0 * (batch * m * n * k) as f64)
            }
        };
        let achieved = workload.amount / time.median();
        let ceiling = ceiling_amount / ceiling_time.median();
        let ratio = achieved / ceiling;
        if let (Some(target), Device::Cuda(_)) = (workload.target, device) {
            let entry = (target, workload.op.clone(), ratio);
            if ratio < target.bar() { misses.push(entry) } else { met.push(entry) }
        }
        table.row(vec![
            workload.op,
            workload.shape,
            if workload.ceiling == Ceiling::Copy { megabytes(workload.amount) } else { gigaflops(workload.amount) },
            micros(&time),
            percent(time.spread()),
            rate(workload.amount, time.median(), workload.ceiling),
            rate(ceiling_amount, ceiling_time.median(), workload.ceiling),
            format!("{ratio:.2}"),
        ]);
    }
    if options.json {
        println!("{}", serde_json::json!({ "device": device.to_string(), "rows": table.to_json() }));
    } else {
        println!("{}", table.render());
    }
    report_targets(options, &met, &misses);
    Ok(())
}

/// Prints which device runs the table and, on a GPU, how long the eager kernels took to load.
fn describe_device(options: &Options) -> Result<()> {
    let device = options.device;
    match device {
        Device::Cpu => {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            say(options, &format!("device: cpu ({threads} threads)"));
        }
        Device::Cuda(ordinal) => {
            let gpu = engine::device::cuda::CudaDevice::get(ordinal)?;
            let f = gpu.facts();
            let description = format!(
                "device: {device} {} (sm_{}{}, {} SMs, {:.0} GiB, L2 {} MiB)",
                f.name,
                f.compute_capability.0,
                f.compute_capability.1,
                f.multiprocessors,
                f.total_memory as f64 / (1u64 << 30) as f64,
                f.l2_cache >> 20
            );
            say(options, &description);
            let ((), first) = time_once(device, || Tensor::ones(&[4]).to(device)?.exp().map(drop))?;
            let module = gpu.eager_module("unary_exp_f32")?;
            let how = if module.compiled_now() { "compiled by NVRTC" } else { "loaded from the disk cache" };
            let seconds = first.as_secs_f64();
            let path = module.cubin_path().display();
            say(options, &format!("first eager op, exp: {:.1} ms (its kernel module {how}: {path})", seconds * 1e3));
        }
    }
    Ok(())
}

fn workloads(device: Device, sizes: &Sizes) -> Result<Vec<Workload>> {
    let Sizes { n, rows, cols, matmul, batched } = *sizes;
    let on = |shape: &[usize], seed: u64| Tensor::randn(shape, seed).to(device);
    let (x, y) = (on(&[n], 1)?, on(&[n], 2)?);
    let cond = on(&[n], 3)?.gt(0.0)?;
    let (m, m2, row) = (on(&[rows, cols], 4)?, on(&[rows, cols], 5)?, on(&[cols], 6)?);
    let (weight, bias) = (on(&[cols], 7)?, on(&[cols], 8)?);
    let (a, b) = (on(&[matmul, matmul], 9)?, on(&[matmul, matmul], 10)?);
    let (batch, side) = batched;
    let (ba, bb) = (on(&[batch, side, side], 11)?, on(&[batch, side, side], 12)?);
    let f = 4.0; // bytes per f32
    let (n_f, rc, c) = (n as f64, (rows * cols) as f64, cols as f64);
    let vector = format!("[{n}]");
    let matrix = format!("[{rows}, {cols}]");
    let memory = |op: &str, shape: &str, bytes: f64, target: Option<Target>, run: Work| Workload {
        op: op.into(),
        shape: shape.into(),
        amount: bytes,
        ceiling: Ceiling::Copy,
        target,
        run,
    };
    let pointwise = Some(Target::Pointwise);
    let reduction = Some(Target::Reduction);
    let mut list = vec![
        memory(
            "exp",
            &vector,
            2.0 * f * n_f,
            pointwise,
            boxed({
                let x = x.clone();
                move || x.exp()
            }),
        ),
        memory(
            "gelu",
            &vector,
            2.0 * f * n_f,
            pointwise,
            boxed({
                let x = x.clone();
                move || x.gelu()
            }),
        ),
        memory(
            "mul by scalar",
            &vector,
            2.0 * f * n_f,
            pointwise,
            boxed({
                let x = x.clone();
                move || x.mul(2.0)
            }),
        ),
        memory(
            "add",
            &vector,
            3.0 * f * n_f,
            pointwise,
            boxed({
                let (x, y) = (x.clone(), y.clone());
                move || x.add(&y)
            }),
        ),
        memory("where", &vector, 4.0 * f * n_f, pointwise, boxed(move || cond.where_(&x, &y))),
        memory(
            "add row (broadcast)",
            &matrix,
            f * (2.0 * rc + c),
            None,
            boxed({
                let (m, row) = (m.clone(), row.clone());
                move || m.add(&row)
            }),
        ),
        memory(
            "add transposed",
            &matrix,
            3.0 * f * rc,
            None,
            boxed({
                let (m, m2) = (m.clone(), m2.clone());
                move || m.t()?.add(&m2)
            }),
        ),
        memory(
            "contiguous(transpose)",
            &matrix,
            2.0 * f * rc,
            None,
            boxed({
                let m = m.clone();
                move || m.t()?.contiguous()
            }),
        ),
        memory(
            "sum dim=1 (rows)",
            &matrix,
            f * (rc + rows as f64),
            reduction,
            boxed({
                let m = m.clone();
                move || m.sum(1, false)
            }),
        ),
        memory(
            "amax dim=1 (rows)",
            &matrix,
            f * (rc + rows as f64),
            reduction,
            boxed({
                let m = m.clone();
                move || m.amax(1, false)
            }),
        ),
        memory(
            "sum dim=0 (columns)",
            &matrix,
            f * (rc + c),
            None,
            boxed({
                let m = m.clone();
                move || m.sum(0, false)
            }),
        ),
        memory(
            "mean of all",
            &vector,
            f * n_f,
            None,
            boxed({
                let m = m.clone();
                move || m.reshape(&[rows * cols])?.mean(0, false)
            }),
        ),
        memory(
            "softmax dim=1",
            &matrix,
            2.0 * f * rc,
            None,
            boxed({
                let m = m.clone();
                move || m.softmax(1)
            }),
        ),
        memory(
            "log_softmax dim=0",
            &matrix,
            2.0 * f * rc,
            None,
            boxed({
                let m = m.clone();
                move || m.log_softmax(0)
            }),
        ),
        memory(
            "layer_norm",
            &matrix,
            f * (2.0 * rc + 2.0 * c),
            None,
            boxed(move || m.layer_norm(&weight, &bias, 1e-5)),
        ),
    ];
    list.push(Workload {
        op: "matmul".into(),
        shape: format!("[{matmul}, {matmul}] @ [{matmul}, {matmul}]"),
        amount: 2.0 * (matmul as f64).powi(3),
        ceiling: Ceiling::Gemm(1, matmul, matmul, matmul),
        target: None,
        run: boxed(move || a.matmul(&b)),
    });
    list.push(Workload {
        op: "batched matmul".into(),
        shape: format!("[{batch}, {side}, {side}] @ [{batch}, {side}, {side}]"),
        amount: 2.0 * batch as f64 * (side as f64).powi(3),
        ceiling: Ceiling::Gemm(batch, side, side, side),
        target: None,
        run: boxed(move || ba.matmul(&bb)),
    });
    Ok(list)
}

/// A timed closure from an op that returns a tensor (dropped at once: eager frees as it goes).
fn boxed(mut op: impl FnMut() -> engine::Result<Tensor> + 'static) -> Work {
    Box::new(move || op().map(drop))
}

fn report_targets(options: &Options, met: &[(Target, String, f64)], misses: &[(Target, String, f64)]) {
    for target in [Target::Pointwise, Target::Reduction] {
        let all: Vec<&(Target, String, f64)> = met.iter().chain(misses).filter(|(t, ..)| *t == target).collect();
        let Some(worst) = all.iter().min_by(|a, b| a.2.total_cmp(&b.2)) else { continue };
        let verdict = if worst.2 >= target.bar() { "met" } else { "MISSED" };
        let (name, bar, lowest, op) = (target.name(), target.bar(), worst.2, &worst.1);
        say(options, &format!("target: {name} at >= {bar:.2} of copy bandwidth: {verdict} (lowest {lowest:.2}, {op})"));
    }
}

fn micros(t: &Timing) -> String {
    format!("{:.1} us", t.median() * 1e6)
}

fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

fn megabytes(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

fn gigaflops(flops: f64) -> String {
    format!("{:.1} GFLOP", flops / 1e9)
}

fn rate(amount: f64, seconds: f64, ceiling: Ceiling) -> String {
    match ceiling {
        Ceiling::Copy => format!("{:.0} GB/s", amount / seconds / 1e9),
        Ceiling::Gemm(..) => format!("{:.1} TFLOP/s", amount / seconds / 1e12),
    }
}
