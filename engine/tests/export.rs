//! Exported programs (`fx::export`, as `torch.export`): saved and loaded, they are the same graph
//! and compute the same values; what cannot be exported says why; a damaged or hostile file is a
//! typed error naming what is wrong, never a panic and never a graph the engine's rules reject.

mod common;

use common::programs::programs;
use engine::dynamo::CustomOp;
use engine::fx::export::{ExportedProgram, ProgramInput, export};
use engine::{Device, Error, Tensor, dynamo};
use proptest::prelude::*;

/// A round trip through the text, on the CPU.
fn reloaded(program: &ExportedProgram) -> ExportedProgram {
    ExportedProgram::from_json(&program.to_json().unwrap(), Device::Cpu).unwrap()
}

/// The message of the error loading `text` gives.
fn load_error(text: &str) -> String {
    match ExportedProgram::from_json(text, Device::Cpu) {
        Err(error @ Error::Export { .. }) => error.to_string(),
        Err(other) => panic!("expected an export error, got {other}"),
        Ok(_) => panic!("the file loaded:\n{text}"),
    }
}

/// A tiny program: `relu(x @ w.T + b) * 2`, with `w` and `b` captured.
fn tiny() -> ExportedProgram {
    let w = Tensor::from_vec(vec![0.5, -1.0, 0.25, 2.0], &[2, 2]).unwrap().with_name("w");
    let b = Tensor::from_vec(vec![0.125, -0.5], &[2]).unwrap().with_name("b");
    export(|t| Ok(vec![t[0].linear(&w, Some(&b))?.relu()?.mul(2.0)?]), &[Tensor::ones(&[3, 2]).with_name("x")]).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random programs (views, reductions, layer norms and matmuls with captured weights, NaN-free
    /// scalars) survive the round trip as the same graph, and compute bit-identical values.
    #[test]
    fn random_programs_round_trip(program in programs(12), seed in 0u64..1000) {
        let inputs = program.inputs(seed);
        let exported = export(|t| program.run(&t), &inputs).unwrap();
        let loaded = reloaded(&exported);
        prop_assert!(loaded.graph() == exported.graph(), "{}\nreloaded as\n{}", exported.graph(), loaded.graph());
        let names = |p: &ExportedProgram| p.graph().nodes().iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        prop_assert_eq!(names(&loaded), names(&exported));
        let fresh = program.inputs(seed + 1);
        let (expected, actual) = (program.run(&fresh).unwrap(), loaded.run(&fresh).unwrap());
        for (e, a) in expected.iter().zip(&actual) {
            let bits = |t: &Tensor| t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(e), bits(a));
        }
    }
}

#[test]
fn the_format_is_readable_json() {
    insta::assert_snapshot!(
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(&tiny().to_json().unwrap()).unwrap())
            .unwrap()
    );
}

#[test]
fn captured_tensors_are_constants_and_arguments_user_inputs() {
    let program = tiny();
    let kinds: Vec<&str> = program
        .inputs()
        .iter()
        .map(|i| match i {
            ProgramInput::User => "user",
            ProgramInput::Constant(_) => "constant",
        })
        .collect();
    assert_eq!(kinds, ["user", "constant", "constant"]);
    assert_eq!(program.user_input_count(), 1);
    let err = program.run(&[]).unwrap_err().to_string();
    assert!(err.contains("takes 1 inputs, got 0"), "{err}");
}

#[test]
fn scalars_without_a_json_number_keep_their_bits() {
    let program =
        export(|t| Ok(vec![t[0].maximum(f32::NEG_INFINITY)?.add(f32::NAN)?.mul(-0.0)?]), &[Tensor::ones(&[2])])
            .unwrap();
    let text = program.to_json().unwrap();
    assert!(text.contains("scalar_bits"), "{text}");
    assert!(reloaded(&program).graph() == program.graph());
}

#[test]
fn a_graph_break_custom_op_or_cond_is_not_exported() {
    let x = Tensor::randn(&[2, 3], 0);
    let err = export(|t| Ok(vec![t[0].mul(t[0].sum_all()?.item()?)?]), std::slice::from_ref(&x)).unwrap_err();
    assert!(matches!(err, Error::GraphBreak { .. }), "{err}");

    let clip = CustomOp::elementwise("exportlib::clip", 1)
        .c_source("float clip(float x) { return x > 1.0f ? 1.0f : x; }")
        .register()
        .unwrap();
    let err = export(|t| Ok(vec![clip.call(&[&t[0]])?]), std::slice::from_ref(&x)).unwrap_err().to_string();
    assert!(err.contains("`exportlib::clip` is a custom op"), "{err}");

    let err = export(
        |t| {
            let positive = t[0].sum_all()?.gt(0.0)?;
            Ok(vec![dynamo::cond(&positive, |h| h[0].relu(), |h| h[0].neg(), &[&t[0]])?])
        },
        &[x],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`cond` holds graphs"), "{err}");
}

/// The tiny program's text with `from` replaced by `to` (which must occur).
fn edited(from: &str, to: &str) -> String {
    let text = tiny().to_json().unwrap();
    assert!(text.contains(from), "{from} is not in {text}");
    text.replacen(from, to, 1)
}

#[test]
fn damaged_files_are_errors_naming_what_is_wrong() {
    let cases = [
        (edited("\"version\":1", "\"version\":2"), "this engine reads `engine.exported_program` version 1"),
        (
            edited("\"target\":\"relu\"", "\"target\":\"soft_clip\""),
            "`soft_clip` is not an op of the engine's catalogue",
        ),
        (edited("\"target\":\"relu\"", "\"target\":\"sum\""), "`sum` needs the parameter `dim`"),
        (edited("\"target\":\"relu\"", "\"target\":\"relu\",\"params\":{\"dim\":0}"), "`relu` takes the parameters {}"),
        (edited("\"shape\":[3,2]}", "\"shape\":[3,5]}"), "node `linear`: linear: expects x[..., in]"),
        (
            edited(
                "\"target\":\"relu\",\"args\":[{\"node\":\"linear\"}],\"shape\":[3,2]",
                "\"target\":\"relu\",\"args\":[{\"node\":\"linear\"}],\"shape\":[3,3]",
            ),
            "written with shape [3, 3], but its op gives [3, 2]",
        ),
        (edited("{\"node\":\"linear\"}", "{\"node\":\"mul\"}"), "reads `mul`, which is not an earlier node"),
        (edited("{\"node\":\"linear\"}", "{\"scalar\":1.0}"), "operand 0 must be a tensor"),
        (edited("{\"node\":\"linear\"}", "{\"node\":\"linear\"},{\"node\":\"linear\"}"), "takes 1..=1 operands, got 2"),
        (edited("\"name\":\"b\"", "\"name\":\"w\""), "node `w`: the name is used twice"),
        (edited("\"data\":\"", "\"data\":\"AAAA"), "shape [2, 2] needs 16"),
        (edited("\"data\":\"", "\"data\":\"!"), "its data is not base64"),
        (edited("\"outputs\":[\"mul\"]", "\"outputs\":[\"nowhere\"]"), "output `nowhere` is no node"),
        (edited("\"outputs\":[\"mul\"]", "\"outputs\":[]"), "the program returns nothing"),
        (edited("\"outputs\"", "\"callback\":\"rm -rf\",\"outputs\""), "unknown field `callback`"),
        ("not json".to_string(), "not readable"),
    ];
    for (text, expected) in cases {
        let message = load_error(&text);
        assert!(message.contains(expected), "expected `{expected}` in: {message}");
    }
}

#[test]
fn a_loaded_program_lives_on_the_device_asked_for() {
    let Some(device) = common::gpu() else { return };
    let program = ExportedProgram::from_json(&tiny().to_json().unwrap(), device).unwrap();
    let x = Tensor::randn(&[3, 2], 4);
    let on_gpu = program.run(&[x.to(device).unwrap()]).unwrap()[0].to_vec().unwrap();
    assert_eq!(on_gpu.len(), 6);
    let on_cpu = tiny().run(&[x]).unwrap()[0].to_vec().unwrap();
    assert!(on_gpu.iter().zip(&on_cpu).all(|(a, b)| (a - b).abs() < 1e-5), "{on_gpu:?} vs {on_cpu:?}");
}

#[test]
fn attention_and_cat_round_trip() {
    let k = Tensor::randn(&[2, 5, 8], 1).with_name("k");
    let v = Tensor::randn(&[2, 5, 8], 2).with_name("v");
    let program = export(
        |t| {
            let attended = t[0].scaled_dot_product_attention(&k, &v, None, true, Some(0.3))?;
            Ok(vec![Tensor::cat(&[&attended, &t[0]], -1)?])
        },
        &[Tensor::randn(&[2, 5, 8], 3).with_name("q")],
    )
    .unwrap();
    let text = program.to_json().unwrap();
    assert!(text.contains("\"causal\":true") && text.contains("\"mask\":\"none\""), "{text}");
    let q = Tensor::randn(&[2, 5, 8], 4);
    let (before, after) = (program.run(std::slice::from_ref(&q)).unwrap(), reloaded(&program).run(&[q]).unwrap());
    assert_eq!(before[0].to_vec().unwrap(), after[0].to_vec().unwrap());
    assert!(load_error(&text.replace("\"mask\":\"none\"", "\"mask\":\"some\"")).contains("none, boolean or additive"));
}
