//! Checks of `compare_backends`.

use engine::backends::{AotEager, Backend, Eager, Inductor};
use engine::{Tensor, dynamo};
use grader_harness::{CheckResult, Context, Tolerance, ensure, for_all, max_abs_diff, record, record_floats};
use proptest::prelude::*;

use super::support::Probe;
use crate::subject::{Mlp, backends, compare_backends, example_input};

/// How far a reported difference may be from the grader's measurement of it.
const MEASURED: Tolerance = Tolerance { abs: 1e-6, rel: 1e-3 };

/// One report per backend of `backends()`, named and in order, and one for a probe backend
/// that shifts every output by an amount drawn from the seed (so that the answers depend on it).
pub fn reports_every_backend(ctx: &Context) -> CheckResult {
    let (mlp, x) = (Mlp::new(ctx.seed), example_input(4, ctx.seed + 1));
    let offset = (1 + ctx.seed % 97) as f32 / 256.0;
    let with_probe = || {
        let mut all = backends();
        all.push(Box::new(Probe::new().offset(offset)));
        all
    };
    let expected: Vec<String> = with_probe().iter().map(|b| b.name().to_string()).collect();
    let reports = compare_backends(&mlp, &x, with_probe())?;
    let names: Vec<&str> = reports.iter().map(|r| r.backend.as_str()).collect();
    record("backends reported", format!("{names:?}"));
    let diffs: Vec<f32> = reports.iter().map(|r| r.max_abs_diff).collect();
    record_floats("max |diff| per backend", &diffs, MEASURED);
    ensure(names == expected, || {
        format!("expected one BackendDiff per backend, named and in this order: {expected:?}; got {names:?}")
    })?;
    let summary: Vec<String> = reports.iter().map(|r| format!("{} {:e}", r.backend, r.max_abs_diff)).collect();
    Ok(format!("max |diff| against eager: {}", summary.join(", ")))
}

/// One random case, named so that a failing one reads well: the MLP's weights come from
/// `model_seed`, and the probe backend adds `probe_offset` to every output.
#[derive(Clone, Debug)]
struct Case {
    model_seed: u64,
    batch: usize,
    probe_offset: f32,
}

/// The reported differences are the real ones: checked against the grader's own measurement,
/// on random models and batches, with a probe backend that shifts outputs by a known amount.
pub fn differences_are_measured(ctx: &Context) -> CheckResult {
    let cases = 12;
    let strategy = (any::<u64>(), 1usize..8, 0.001f32..0.5).prop_map(|(model_seed, batch, probe_offset)| Case {
        model_seed,
        batch,
        probe_offset,
    });
    for_all(ctx, cases, strategy, |Case { model_seed: seed, batch, probe_offset: offset }| {
        let (mlp, x) = (Mlp::new(seed), example_input(batch, seed ^ 1));
        let make = || -> Vec<Box<dyn Backend>> {
            vec![
                Box::new(Eager),
                Box::new(AotEager),
                Box::new(Inductor::default()),
                Box::new(Probe::new().offset(offset)),
            ]
        };
        let reports = compare_backends(&mlp, &x, make())?;
        ensure(reports.len() == 4, || {
            format!("given 4 backends [eager, aot_eager, inductor, probe], you returned {} reports", reports.len())
        })?;
        let expected = mlp.forward(&x)?.to_vec()?;
        for (report, backend) in reports.iter().zip(make()) {
            let name = backend.name().to_string();
            let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(backend);
            let truth = max_abs_diff(&compiled.call(&x)?.to_vec()?, &expected);
            let reported = report.max_abs_diff;
            record(format!("backend reported for `{name}`"), &report.backend);
            record_floats(format!("max |diff| reported for `{name}`"), &[reported], MEASURED);
            ensure(report.backend == name && (reported - truth).abs() <= MEASURED.abs + MEASURED.rel * truth, || {
                let shifted = if name == "probe" {
                    format!(" (a backend that adds {offset} to every output)")
                } else {
                    String::new()
                };
                format!(
                    "for backend `{name}`{shifted} you reported `{}` with max |diff| {reported:e}; the grader measured {truth:e}",
                    report.backend
                )
            })?;
        }
        Ok(())
    })?;
    Ok(format!("reported differences match the grader's measurement on {cases} random models and batches"))
}
