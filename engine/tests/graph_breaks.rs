//! Graph breaks: each kind splits the call into graphs that together compute exactly what eager
//! does; `explain` reports them with the learner's lines; `fullgraph` turns them into errors.

use engine::backends::AotEager;
use engine::logs::{self, Artifact};
use engine::{Tensor, dynamo};
use proptest::prelude::*;
use std::cell::RefCell;

/// A data-dependent branch on a value, then a print of a tensor: 3 graphs, 2 breaks.
fn branch_and_print(x: &Tensor, w: &Tensor) -> engine::Result<Tensor> {
    let h = x.matmul(w)?.tanh()?;
    let h = if h.sum_all()?.item()? > 0.0 { h.mul(2.0)? } else { h.neg()?.exp()? };
    engine::println!("row means: {}", h.mean(1, false)?)?;
    h.softmax(-1)
}

/// Host arithmetic on the values of a tensor, fed back as a constant.
fn host_round_trip(x: &Tensor) -> engine::Result<Tensor> {
    let h = x.relu()?;
    let values = h.to_vec()?;
    let mean = values.iter().sum::<f32>() / values.len() as f32;
    h.sub(mean)?.mul(x)
}

/// An opaque host function in the middle of the model.
fn opaque(x: &Tensor) -> engine::Result<Tensor> {
    let h = x.mul(3.0)?;
    let clipped = h.map_host("soft_clip", |v| v / (1.0 + v.abs()))?;
    clipped.add(x)
}

/// Formatting a tensor's values with `Display` (here into `text`, as `println!` would print it).
fn formats_a_value(x: &Tensor, text: &RefCell<String>) -> engine::Result<Tensor> {
    let h = x.exp()?;
    *text.borrow_mut() = format!("{h}");
    h.sum(0, false)
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn explain_reports_three_graphs_and_two_breaks_with_their_lines() {
    let w = Tensor::randn(&[4, 6], 1).with_name("w");
    let report = dynamo::explain(|x: Tensor| branch_and_print(&x, &w)).call(&Tensor::randn(&[3, 4], 2)).unwrap();
    assert_eq!((report.graph_count(), report.graph_break_count()), (3, 2));
    insta::assert_snapshot!("explain_branch_and_print", report.to_string());
}

#[test]
fn each_break_kind_gives_eager_results() {
    let w = Tensor::randn(&[4, 6], 1);
    for seed in 0..6 {
        let x = Tensor::randn(&[3, 4], seed);
        let f = dynamo::compile(|x: Tensor| branch_and_print(&x, &w));
        // The compiled softmax sums its row in vector lanes, so it may round differently in
        // the last place; everything else here is bit-exact.
        let (compiled, eager) =
            (f.call(&x).unwrap().to_vec().unwrap(), branch_and_print(&x, &w).unwrap().to_vec().unwrap());
        assert!(
            compiled.iter().zip(&eager).all(|(a, b)| (a - b).abs() <= 1e-6 * b.abs().max(1e-3)),
            "{compiled:?} vs {eager:?}"
        );
        let g = dynamo::compile(|x: Tensor| host_round_trip(&x));
        assert_eq!(bits(&g.call(&x).unwrap()), bits(&host_round_trip(&x).unwrap()));
        let h = dynamo::compile(|x: Tensor| opaque(&x));
        assert_eq!(bits(&h.call(&x).unwrap()), bits(&opaque(&x).unwrap()));
        let (text, expected_text) = (RefCell::default(), RefCell::default());
        let k = dynamo::compile(|x: Tensor| formats_a_value(&x, &text));
        let (sum, expected_sum) = (k.call(&x).unwrap(), formats_a_value(&x, &expected_text).unwrap());
        assert_eq!((bits(&sum), text.take()), (bits(&expected_sum), expected_text.take()));
    }
}

#[test]
fn every_break_kind_is_reported_with_its_reason_and_line() {
    let x = Tensor::randn(&[3, 4], 0);
    let reasons = |report: dynamo::ExplainOutput| -> Vec<String> {
        report.breaks.iter().map(|b| format!("{} @{}", b.reason, b.location.line())).collect()
    };
    let round_trip = reasons(dynamo::explain(|x: Tensor| host_round_trip(&x)).call(&x).unwrap());
    assert_eq!(round_trip, ["Tensor::to_vec() needs the tensor's values @21"]);
    let host = reasons(dynamo::explain(|x: Tensor| opaque(&x)).call(&x).unwrap());
    assert_eq!(host, ["`map_host(\"soft_clip\")` runs a Rust function that the tracer cannot see into @29"]);
    let text = RefCell::default();
    let display = reasons(dynamo::explain(|x: Tensor| formats_a_value(&x, &text)).call(&x).unwrap());
    assert_eq!(display, ["formatting a tensor's values with `{}` (Display) needs them @35"]);
}

#[test]
fn fullgraph_turns_each_break_into_an_error_at_its_line() {
    let x = Tensor::randn(&[3, 4], 0);
    let w = Tensor::randn(&[4, 6], 1);
    let error = |e: engine::Error| match e {
        engine::Error::GraphBreak { reason, location } => format!("{reason} @{}", location.line()),
        other => panic!("expected a graph break, got {other}"),
    };
    let f = dynamo::compile(|x: Tensor| branch_and_print(&x, &w)).fullgraph(true);
    assert_eq!(error(f.call(&x).unwrap_err()), "Tensor::item() needs the tensor's value @13");
    let g = dynamo::compile(|x: Tensor| opaque(&x)).fullgraph(true);
    assert!(error(g.call(&x).unwrap_err()).ends_with("@29"));
    let text = RefCell::default();
    let k = dynamo::compile(|x: Tensor| formats_a_value(&x, &text)).fullgraph(true);
    assert_eq!(error(k.call(&x).unwrap_err()), "formatting a tensor's values with `{}` (Display) needs them @35");
    let p = dynamo::compile(|x: Tensor| {
        engine::print!("")?;
        x.exp()
    })
    .fullgraph(true);
    let message = error(p.call(&x).unwrap_err());
    assert!(message.starts_with("`engine::print!` is a side effect"), "{message}");
}

#[test]
fn only_live_values_leave_a_graph_at_a_break() {
    let report = dynamo::explain(|x: Tensor| {
        let kept = x.exp()?;
        let dropped = x.sin()?.cos()?;
        let scale = dropped.sum_all()?.item()?;
        drop(dropped);
        kept.mul(scale)
    })
    .call(&Tensor::randn(&[5], 3))
    .unwrap();
    let first = &report.graphs[0];
    let outputs: Vec<&str> = first.outputs().iter().map(|&o| first.node(o).name.as_str()).collect();
    // `dropped` is still alive at the break (it is dropped after `item()`), `x` needs no output.
    assert_eq!(outputs, ["exp", "cos", "sum"]);
    let second = report.graphs[1].to_string();
    assert!(second.starts_with("graph(exp: f32[5]):"), "{second}");
}

#[test]
fn a_value_known_on_the_host_needs_no_break() {
    let report = dynamo::explain(|x: Tensor| {
        let first = x.to_vec()?[0];
        x.mul(first)
    })
    .call(&Tensor::randn(&[4], 0))
    .unwrap();
    assert_eq!((report.graph_count(), report.graph_break_count()), (1, 0));
}

#[test]
fn graph_breaks_are_logged_with_their_lines() {
    let (result, text) = logs::capture(&[Artifact::GraphBreaks], || {
        dynamo::compile(|x: Tensor| host_round_trip(&x)).name("round_trip").call(&Tensor::randn(&[4], 0))
    });
    result.unwrap();
    assert_eq!(
        text,
        "[engine:graph_breaks] graph break in `round_trip` at engine/tests/graph_breaks.rs:21: Tensor::to_vec() \
         needs the tensor's values\n"
    );
}

#[test]
fn graphs_after_a_break_are_cached_per_resume_point() {
    let w = Tensor::randn(&[4, 6], 1);
    let f = dynamo::compile(|x: Tensor| branch_and_print(&x, &w));
    let x = Tensor::randn(&[3, 4], 0);
    f.call(&x).unwrap();
    f.call(&x).unwrap();
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.cache_hits, stats.graph_breaks), (3, 3, 4));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Compiled with breaks (AOT-decomposed graphs between them) agrees with eager, whichever
    /// side of the branch the input takes.
    #[test]
    fn broken_models_agree_with_eager(rows in 1usize..6, seed in 0u64..10_000) {
        let w = Tensor::randn(&[4, 6], seed + 1);
        let x = Tensor::randn(&[rows, 4], seed);
        let f = dynamo::compile(|x: Tensor| branch_and_print(&x, &w)).backend(AotEager);
        let (got, expected) = (f.call(&x).unwrap().to_vec().unwrap(), branch_and_print(&x, &w).unwrap().to_vec().unwrap());
        prop_assert!(got.iter().zip(&expected).all(|(g, e)| (g - e).abs() <= 1e-5 + 1e-4 * e.abs()));
        let g = dynamo::compile(|x: Tensor| host_round_trip(&x)).backend(AotEager);
        prop_assert_eq!(bits(&g.call(&x).unwrap()), bits(&host_round_trip(&x).unwrap()));
    }
}
