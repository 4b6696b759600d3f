//! `bench modes`: every `bench models` workload compiled in every mode (`default`,
//! `reduce-overhead`, `max-autotune`), each against eager timed in the same interleaved run, with
//! what each mode costs to compile, cold and warm (its choices already on disk), and the targets of
//! the compile-modes work checked on the results.

use anyhow::{Result, bail};
use engine::dynamo::{self, Mode};
use serde::Serialize;

use crate::Options;
use crate::models::{Workload, measure, workloads};
use crate::table::Table;

/// One row of `bench modes --json`: one workload in one mode.
#[derive(Serialize)]
struct Row {
    workload: String,
    mode: String,
    eager_ms: f64,
    compiled_ms: f64,
    speedup: f64,
    /// Milliseconds the backend spent compiling the first time (max-autotune's timing included).
    compile_ms: f64,
    /// The same compile again in a new compiled function: kernels and GEMM choices from the caches.
    warm_compile_ms: f64,
    samples: usize,
    max_difference: f64,
}

/// A target of the compile-modes work and whether these results meet it.
#[derive(Serialize)]
struct Target {
    target: String,
    measured: String,
    met: bool,
}

#[derive(Serialize)]
struct Report {
    device: String,
    rows: Vec<Row>,
    targets: Vec<Target>,
}

/// Compiles `workload` in `mode` and times it against eager.
fn time_mode(workload: &Workload, mode: Mode, options: &Options) -> Result<Row> {
    let compiled = dynamo::compile(workload.traceable()).mode(mode).name(&workload.name);
    let measured = measure(workload, &|inputs| compiled.call(inputs), options)?;
    let warm = dynamo::compile(workload.traceable()).mode(mode).name(&workload.name);
    warm.call(&workload.inputs)?;
    Ok(Row {
        workload: workload.name.clone(),
        mode: mode.to_string(),
        eager_ms: measured.eager.median() * 1e3,
        compiled_ms: measured.compiled.median() * 1e3,
        speedup: measured.eager.median() / measured.compiled.median(),
        compile_ms: compiled.stats().compile_time.as_secs_f64() * 1e3,
        warm_compile_ms: warm.stats().compile_time.as_secs_f64() * 1e3,
        samples: measured.eager.samples().len(),
        max_difference: measured.max_difference,
    })
}

/// `bench modes`: the workloads whose name contains one of `only` (all when empty), in `modes`
/// (all when empty).
pub fn run(options: &Options, only: &[String], modes: &[Mode]) -> Result<()> {
    let modes = if modes.is_empty() { &Mode::ALL[..] } else { modes };
    let mut rows = Vec::new();
    for workload in workloads(options.device, options.dtype) {
        let workload = workload?;
        if !only.is_empty() && !only.iter().any(|o| workload.name.contains(o.as_str())) {
            continue;
        }
        for &mode in modes {
            let row = time_mode(&workload, mode, options)?;
            if row.max_difference > 1e-3 {
                bail!("{} in {mode}: compiled differs from eager by {:.1e}", row.workload, row.max_difference);
            }
            eprintln!(
                "  {} [{}]: eager {:.3} ms, compiled {:.3} ms ({:.2}x)",
                row.workload, row.mode, row.eager_ms, row.compiled_ms, row.speedup
            );
            rows.push(row);
        }
    }
    let targets = targets(&rows);
    if options.json {
        let report = Report { device: options.device.to_string(), rows, targets };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("bench modes on {}\n", options.device);
    let mut table =
        Table::new(&["workload", "mode", "eager ms", "compiled ms", "speedup", "compile ms", "warm compile ms"]);
    for r in &rows {
        table.row(vec![
            r.workload.clone(),
            r.mode.clone(),
            format!("{:.3}", r.eager_ms),
            format!("{:.3}", r.compiled_ms),
            format!("{:.2}x", r.speedup),
            format!("{:.1}", r.compile_ms),
            format!("{:.2}", r.warm_compile_ms),
        ]);
    }
    println!("{}\n", table.render());
    let mut summary = Table::new(&["target", "measured", "met"]);
    for t in &targets {
        summary.row(vec![t.target.clone(), t.measured.clone(), if t.met { "yes" } else { "NO" }.into()]);
    }
    println!("{}", summary.render());
    Ok(())
}

/// The targets, for the rows present (a target whose rows were filtered out is skipped).
fn targets(rows: &[Row]) -> Vec<Target> {
    let find = |workload: &str, mode: Mode| rows.iter().find(|r| r.workload == workload && r.mode == mode.name());
    let mut targets = Vec::new();
    let default_rows: Vec<&Row> = rows.iter().filter(|r| r.mode == Mode::Default.name()).collect();
    if !default_rows.is_empty() {
        let slowest = default_rows.iter().min_by(|a, b| a.speedup.total_cmp(&b.speedup)).expect("not empty");
        targets.push(Target {
            target: "default at least as fast as eager on every workload".into(),
            measured: format!("slowest: {} {:.2}x", slowest.workload, slowest.speedup),
            met: slowest.speedup >= 1.0,
        });
    }
    for batch in [1, 16] {
        if let Some(r) = find(&format!("mlp bs={batch}"), Mode::ReduceOverhead) {
            targets.push(Target {
                target: format!("reduce-overhead >= 1.5x eager, mlp bs={batch}"),
                measured: format!("{:.2}x", r.speedup),
                met: r.speedup >= 1.5,
            });
        }
    }
    if let Some(r) = find("mlp bs=4096", Mode::MaxAutotune) {
        targets.push(Target {
            target: "max-autotune >= 1.15x eager, mlp bs=4096".into(),
            measured: format!("{:.2}x", r.speedup),
            met: r.speedup >= 1.15,
        });
    }
    for r in rows.iter().filter(|r| r.workload.starts_with("block") && r.mode == Mode::MaxAutotune.name()) {
        if let Some(d) = find(&r.workload, Mode::Default) {
            targets.push(Target {
                target: format!("max-autotune faster than default, {}", r.workload),
                measured: format!("{:.3} ms against {:.3} ms", r.compiled_ms, d.compiled_ms),
                met: r.compiled_ms < d.compiled_ms,
            });
        }
    }
    for r in rows.iter().filter(|r| r.mode == Mode::MaxAutotune.name()) {
        targets.push(Target {
            target: format!("max-autotune warm compile < 1 ms, {}", r.workload),
            measured: format!("{:.2} ms (cold {:.1} ms)", r.warm_compile_ms, r.compile_ms),
            met: r.warm_compile_ms < 1.0,
        });
    }
    targets
}
