//! Custom ops with their own C kernel: one graph node instead of a graph break.

use engine::backends::AotEager;
use engine::dynamo::CustomOp;
use engine::{Tensor, dynamo};
use proptest::prelude::*;

fn soft_clip() -> CustomOp {
    CustomOp::elementwise("mylib::soft_clip", 1)
        .c_source("float soft_clip(float x) { return x / (1.0f + fabsf(x)); }")
        .cuda_source("__device__ float soft_clip(float x) { return x / (1.0f + fabsf(x)); }")
        .register()
        .unwrap()
}

fn blend() -> CustomOp {
    CustomOp::elementwise("mylib::blend", 2)
        .c_source("float blend(float a, float b) { return a > b ? a - 0.5f * b : 0.25f * a * b; }")
        .register()
        .unwrap()
}

fn blend_reference(a: f32, b: f32) -> f32 {
    if a > b { a - 0.5 * b } else { 0.25 * a * b }
}

#[test]
fn a_custom_op_is_one_node_of_one_graph() {
    let op = soft_clip();
    let report =
        dynamo::explain(|x: Tensor| op.call(&[&x.mul(3.0)?])?.add(&x)).call(&Tensor::randn(&[2, 3], 0)).unwrap();
    assert_eq!((report.graph_count(), report.graph_break_count()), (1, 0));
    insta::assert_snapshot!("custom_op_graph", report.graphs[0].to_string());
    assert_eq!(op.name(), "mylib::soft_clip");
    assert_eq!(op.function(), "soft_clip");
    assert!(op.cuda_source().unwrap().starts_with("__device__"));
}

#[test]
fn custom_ops_broadcast_and_survive_aot_and_dynamic_shapes() {
    let op = blend();
    let f = dynamo::compile(|(a, b): (Tensor, Tensor)| op.call(&[&a, &b])).backend(AotEager).dynamic(true);
    for rows in [3, 5] {
        let (a, b) = (Tensor::randn(&[rows, 1], rows as u64), Tensor::randn(&[4], 7));
        let got = f.call((&a, &b)).unwrap();
        assert_eq!(got.shape(), &[rows, 4]);
        let (av, bv) = (a.to_vec().unwrap(), b.to_vec().unwrap());
        let expected: Vec<f32> = (0..rows * 4).map(|i| blend_reference(av[i / 4], bv[i % 4])).collect();
        assert_eq!(got.to_vec().unwrap(), expected);
    }
    assert_eq!(f.stats().compiles, 1);
}

#[test]
fn mistakes_in_a_definition_are_reported_at_registration() {
    let error = |b: dynamo::CustomOpBuilder| b.register().map(|_| ()).unwrap_err().to_string();
    let bad_name = error(CustomOp::elementwise("soft clip", 1).c_source("float x(float v) { return v; }"));
    assert!(bad_name.contains("must be `namespace::function`"), "{bad_name}");
    let no_source = error(CustomOp::elementwise("mylib::f", 1));
    assert!(no_source.contains("needs a C source defining `float f(...)`"), "{no_source}");
    let arity = error(CustomOp::elementwise("mylib::f", 0).c_source("float f(void) { return 1.0f; }"));
    assert!(arity.contains("takes 1 to 4 inputs, not 0"), "{arity}");
    let line = line!() + 1;
    let broken = error(CustomOp::elementwise("mylib::broken", 1).c_source("float broken(float x) { return x +; }"));
    assert!(broken.contains("error"), "{broken}");
    // The compiler's message names the Rust line that registered the op, where the fix goes.
    assert!(broken.contains(&format!("registered at {}:{line}:", file!())), "{broken}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// The compiled C kernel computes the same values as the Rust definition.
    #[test]
    fn the_c_kernel_matches_the_reference(values in proptest::collection::vec(-50.0f32..50.0, 1..3000)) {
        let x = Tensor::from_vec(values.clone(), &[values.len()]).unwrap();
        let got = soft_clip().call(&[&x]).unwrap().to_vec().unwrap();
        let expected: Vec<f32> = values.iter().map(|v| v / (1.0 + v.abs())).collect();
        prop_assert_eq!(got, expected);
    }
}

#[test]
fn registering_an_op_again_does_not_leak_its_name_again() {
    // Op names are `&'static str`; each distinct name is leaked once, not once per registration.
    let (first, again) = (soft_clip(), soft_clip());
    assert!(std::ptr::eq(first.name(), again.name()));
    assert_eq!(first, again);
}

#[test]
fn the_interpreter_target_calls_a_custom_ops_c_function() {
    use engine::backends::Inductor;
    use engine::inductor::{Config, TargetKind};
    let op = blend();
    let inductor = Inductor::with_config(Config { target: TargetKind::Interpreter, ..Config::default() });
    let f = dynamo::compile(|(a, b): (Tensor, Tensor)| op.call(&[&a.relu()?, &b])?.mul(2.0)).backend(inductor.clone());
    let (a, b) = (Tensor::randn(&[3, 1], 1), Tensor::randn(&[4], 2));
    let got = f.call((&a, &b)).unwrap().to_vec().unwrap();
    let (av, bv) = (a.to_vec().unwrap(), b.to_vec().unwrap());
    let expected: Vec<f32> = (0..12).map(|i| 2.0 * blend_reference(av[i / 4].max(0.0), bv[i % 4])).collect();
    assert_eq!(got, expected);
    let code = inductor.output_codes()[0].to_string();
    assert!(code.contains("in kernel IR") && code.contains("blend(tmp"), "{code}");
}
