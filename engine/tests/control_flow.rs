//! The fixes for data-dependent control flow and side effects: `cond`, `where_`, `is_compiling`.

use engine::backends::AotEager;
use engine::{Error, Tensor, dynamo};
use proptest::prelude::*;

struct Gate {
    w: Tensor,
    bias: Tensor,
}

impl Gate {
    fn new(seed: u64) -> Gate {
        Gate { w: Tensor::randn(&[4, 4], seed).with_name("w"), bias: Tensor::randn(&[4], seed + 1).with_name("bias") }
    }

    /// The branch as ordinary Rust control flow: a graph break at `item()`.
    fn with_if(&self, x: &Tensor) -> engine::Result<Tensor> {
        let h = x.matmul(&self.w)?;
        if h.sum_all()?.item()? > 0.0 { h.softmax(-1)?.add(&self.bias) } else { h.sub(x)?.relu() }
    }

    /// The same with `cond`: both branches become subgraphs of one graph. The false branch reads
    /// `x` from the enclosing function and the true branch a captured weight.
    fn with_cond(&self, x: &Tensor) -> engine::Result<Tensor> {
        let h = x.matmul(&self.w)?;
        let positive = h.sum_all()?.gt(0.0)?;
        dynamo::cond(&positive, |hs| hs[0].softmax(-1)?.add(&self.bias), |hs| hs[0].sub(x)?.relu(), &[&h])
    }
}

#[test]
fn cond_captures_both_branches_in_one_graph() {
    let gate = Gate::new(0);
    let report = dynamo::explain(|x: Tensor| gate.with_cond(&x)).call(&Tensor::randn(&[3, 4], 1)).unwrap();
    assert_eq!((report.graph_count(), report.graph_break_count()), (1, 0));
    insta::assert_snapshot!("cond_graph", report.graphs[0].to_string());
    let broken = dynamo::explain(|x: Tensor| gate.with_if(&x)).call(&Tensor::randn(&[3, 4], 1)).unwrap();
    assert_eq!((broken.graph_count(), broken.graph_break_count()), (2, 1));
}

#[test]
fn cond_under_fullgraph_dynamic_and_aot_takes_both_sides() {
    let gate = Gate::new(3);
    let f = dynamo::compile(|x: Tensor| gate.with_cond(&x)).fullgraph(true).dynamic(true).backend(AotEager);
    let mut sides = [0, 0];
    for seed in 0..12 {
        let x = Tensor::randn(&[2 + seed as usize % 5, 4], seed);
        let expected = gate.with_if(&x).unwrap().to_vec().unwrap();
        let got = f.call(&x).unwrap().to_vec().unwrap();
        assert!(got.iter().zip(&expected).all(|(g, e)| (g - e).abs() <= 1e-5 + 1e-4 * e.abs()), "{got:?} {expected:?}");
        sides[usize::from(x.matmul(&gate.w).unwrap().sum_all().unwrap().item().unwrap() > 0.0)] += 1;
    }
    assert!(sides[0] > 0 && sides[1] > 0, "both sides taken: {sides:?}");
    assert_eq!(f.stats().compiles, 1);
}

#[test]
fn cond_runs_eagerly_outside_a_compiled_function() {
    let gate = Gate::new(5);
    for seed in 0..4 {
        let x = Tensor::randn(&[3, 4], seed);
        assert_eq!(gate.with_cond(&x).unwrap().to_vec().unwrap(), gate.with_if(&x).unwrap().to_vec().unwrap());
    }
}

/// A branch that needs a concrete value cannot be captured.
fn cond_with_a_breaking_branch(x: &Tensor) -> engine::Result<Tensor> {
    let positive = x.sum_all()?.gt(0.0)?;
    dynamo::cond(
        &positive,
        |xs| {
            let peak = xs[0].amax(0, false)?.item()?;
            xs[0].div(peak)
        },
        |xs| xs[0].neg(),
        &[x],
    )
}

#[test]
fn a_break_inside_a_branch_falls_back_or_fails_under_fullgraph() {
    let x = Tensor::randn(&[1], 3);
    let report = dynamo::explain(|x: Tensor| cond_with_a_breaking_branch(&x)).call(&x).unwrap();
    assert_eq!(report.graph_break_count(), 1);
    assert!(report.breaks[0].reason.starts_with("`cond` fell back to Rust control flow because a branch of `cond`"));
    assert_eq!(report.outputs[0].to_vec().unwrap(), cond_with_a_breaking_branch(&x).unwrap().to_vec().unwrap());
    let f = dynamo::compile(|x: Tensor| cond_with_a_breaking_branch(&x)).fullgraph(true);
    match f.call(&x).unwrap_err() {
        Error::GraphBreak { reason, location } => {
            assert!(reason.contains("Tensor::item() needs the tensor's value"), "{reason}");
            assert_eq!(location.line(), 73);
        }
        other => panic!("expected a graph break, got {other}"),
    }
}

#[test]
fn branches_must_agree_on_their_output() {
    let f = dynamo::compile(|x: Tensor| {
        let p = x.sum_all()?.gt(0.0)?;
        dynamo::cond(&p, |xs| xs[0].sum(0, false), |xs| xs[0].relu(), &[&x])
    });
    let err = f.call(&Tensor::randn(&[3, 2], 0)).unwrap_err().to_string();
    assert!(err.starts_with("cond: the branches return different shapes: [2] and [3, 2]"), "{err}");
    let err = dynamo::cond(&Tensor::ones(&[2]), |xs| xs[0].relu(), |xs| xs[0].neg(), &[]).unwrap_err().to_string();
    assert!(err.starts_with("cond: the predicate must have exactly one element, got shape [2]"), "{err}");
}

#[test]
fn is_compiling_keeps_a_log_line_out_of_the_graph() {
    let f = |x: Tensor| -> engine::Result<Tensor> {
        let h = x.exp()?;
        if !dynamo::is_compiling() {
            engine::println!("h = {h}")?;
        }
        h.relu()
    };
    let report = dynamo::explain(f).call(&Tensor::randn(&[3], 0)).unwrap();
    assert_eq!((report.graph_count(), report.graph_break_count()), (1, 0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// `where_` computes both sides and selects per element: no branch, no break, and the same
    /// values as an elementwise `if`.
    #[test]
    fn where_matches_an_elementwise_if(values in proptest::collection::vec(-3.0f32..3.0, 1..40)) {
        let x = Tensor::from_vec(values.clone(), &[values.len()]).unwrap();
        let model = |x: Tensor| x.gt(0.0)?.where_(&x.mul(2.0)?, &x.neg()?.exp()?);
        let report = dynamo::explain(model).call(&x).unwrap();
        prop_assert_eq!(report.graph_break_count(), 0);
        let expected: Vec<f32> = values.iter().map(|&v| if v > 0.0 { v * 2.0 } else { (-v).exp() }).collect();
        // `exp` on the CPU is the engine's vector math, within 2e-7 (relative) of libm's.
        for (got, want) in report.outputs[0].to_vec().unwrap().iter().zip(&expected) {
            prop_assert!((got - want).abs() <= 4e-7 * want.abs().max(1.0), "{got} against {want}");
        }
    }
}
