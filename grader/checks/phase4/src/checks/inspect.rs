//! Checks of `inspect`: kernel names are read correctly, and the summaries agree with the output
//! code the engine itself reports.

use engine::backends::Inductor;
use engine::dynamo;
use engine::inductor::output_code::KernelCode;
use grader_harness::{CheckResult, Context, Failure, ensure, for_all, record};
use proptest::prelude::*;

use super::support::reference_code;
use crate::subject::{KernelKind, KernelSummary, catalogue, inspect, parse_kernel_name};

/// The ops a kernel computes, in the order they first run: what its name lists.
fn ops_of(kernel: &KernelCode) -> Vec<String> {
    let mut ops: Vec<String> = Vec::new();
    for origin in &kernel.origins {
        if !ops.iter().any(|o| o == origin.op) {
            ops.push(origin.op.to_string());
        }
    }
    ops
}

fn kind_of(name: &str) -> KernelKind {
    match &name[..3] {
        "poi" => KernelKind::Pointwise,
        "per" => KernelKind::PersistentReduction,
        _ => KernelKind::LoopedReduction,
    }
}

const PREFIXES: [(&str, KernelKind); 3] =
    [("poi", KernelKind::Pointwise), ("per", KernelKind::PersistentReduction), ("red", KernelKind::LoopedReduction)];

const OPS: [&str; 10] = ["add", "mul", "relu", "exp", "amax", "sum", "div", "sub", "rsqrt", "mean"];

/// A synthetic kernel name with the kind and ops it stands for.
#[derive(Clone, Debug)]
struct KernelName {
    name: String,
    kind: KernelKind,
    ops: Vec<String>,
}

/// Every kernel name the engine generates for the catalogue, synthetic names, and names of other
/// forms (which must give `None`).
pub fn names_are_read(ctx: &Context) -> CheckResult {
    let mut seen = 0;
    for (model_name, model, inputs) in catalogue(ctx.seed) {
        for kernel in reference_code(&model, &inputs)?.kernels {
            let expected = (kind_of(&kernel.name), ops_of(&kernel));
            let got = parse_kernel_name(&kernel.name);
            record(format!("parse_kernel_name(\"{}\")", kernel.name), format!("{got:?}"));
            ensure(got.as_ref() == Some(&expected), || {
                format!(
                    "model `{model_name}`: parse_kernel_name(\"{}\") returned {got:?}, expected {:?}",
                    kernel.name,
                    Some(&expected)
                )
            })?;
            seen += 1;
        }
    }
    // Each case carries the name itself, so a failure shows the name that was misread.
    let names =
        (0usize..3, prop::collection::vec(0usize..OPS.len(), 1..6), 0usize..200).prop_map(|(prefix, ops, position)| {
            let (text, kind) = PREFIXES[prefix];
            let ops: Vec<String> = ops.iter().map(|&i| OPS[i].to_string()).collect();
            KernelName { name: format!("{text}_fused_{}_{position}", ops.join("_")), kind, ops }
        });
    for_all(ctx, 200, names, |KernelName { name, kind, ops }| {
        let got = parse_kernel_name(&name);
        record(format!("parse_kernel_name(\"{name}\")"), format!("{got:?}"));
        ensure(got == Some((kind, ops.clone())), || {
            format!("parse_kernel_name(\"{name}\") returned {got:?}, expected {:?}", Some((kind, ops)))
        })
    })?;
    for bad in
        ["tri_fused_add_0", "poi_fused_add", "poi_fused__3", "poi_add_relu_0", "poi_fused_add_x", "", "per_fused"]
    {
        let got = parse_kernel_name(bad);
        record(format!("parse_kernel_name(\"{bad}\")"), format!("{got:?}"));
        ensure(got.is_none(), || format!("\"{bad}\" is not a kernel name, but parse_kernel_name returned {got:?}"))?;
    }
    Ok(format!("{seen} generated names, 200 synthetic ones and 7 malformed ones read correctly"))
}

/// `inspect` on every catalogue model agrees with the output code the grader gets itself.
pub fn kernels_are_summarised(ctx: &Context) -> CheckResult {
    let mut kernels = 0;
    let mut models = catalogue(ctx.seed);
    models.push(seeded_model(ctx));
    let count = models.len();
    for (model_name, model, inputs) in models {
        let got = inspect(model, &inputs)?;
        record(format!("your summary of model `{model_name}`"), format!("{got:?}"));
        let inductor = Inductor::default();
        dynamo::compile(model).backend(inductor.clone()).call(&inputs)?;
        let code = inductor.output_codes().pop().expect("one compile");
        let expected: Vec<KernelSummary> = code
            .kernels
            .iter()
            .map(|k| KernelSummary {
                name: k.name.clone(),
                kind: kind_of(&k.name),
                ops: ops_of(k),
                nodes: k.origins.iter().map(|o| o.node.clone()).collect(),
                bytes: k.args.iter().map(|a| 4 * a.elements).sum(),
            })
            .collect();
        ensure(got.len() == expected.len(), || {
            format!("model `{model_name}` compiles to {} kernels, you reported {}:\n{code}", expected.len(), got.len())
        })?;
        for (g, e) in got.iter().zip(&expected) {
            if g != e {
                return Err(Failure::fail(format!(
                    "model `{model_name}`, kernel `{}`:\n  you reported {g:?}\n  expected     {e:?}\n\nthe output \
                     code:\n{code}",
                    e.name
                )));
            }
        }
        kernels += expected.len();
    }
    Ok(format!("{kernels} kernels of {count} models summarised as the output code says"))
}

/// A model of the seed's own shape (rows and columns drawn from it), so that the kernels' bytes
/// are the seed's.
fn seeded_model(ctx: &Context) -> (&'static str, crate::subject::Model, Vec<engine::Tensor>) {
    fn scaled_rows(t: Vec<engine::Tensor>) -> engine::Result<engine::Tensor> {
        let h = t[0].mul(&t[1])?.add(1.0)?.relu()?;
        h.div(&h.sum(-1, true)?.add(1.0)?)
    }
    let (rows, cols) = (2 + (ctx.seed % 13) as usize, 3 + ((ctx.seed / 13) % 17) as usize);
    let inputs = vec![engine::Tensor::randn(&[rows, cols], ctx.seed), engine::Tensor::randn(&[cols], ctx.seed + 1)];
    ("scaled rows of the seed's shape", scaled_rows, inputs)
}
