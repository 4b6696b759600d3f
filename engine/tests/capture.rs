//! Capturing closures into graphs: printed forms, cache behaviour and backend agreement.

use engine::backends::{AotEager, Eager};
use engine::{Tensor, dynamo};

struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Mlp {
    fn new(seed: u64) -> Self {
        Mlp {
            w1: Tensor::randn(&[32, 16], seed).with_name("fc1.weight"),
            b1: Tensor::randn(&[32], seed + 1).with_name("fc1.bias"),
            w2: Tensor::randn(&[8, 32], seed + 2).with_name("fc2.weight"),
            b2: Tensor::randn(&[8], seed + 3).with_name("fc2.bias"),
        }
    }

    fn forward(&self, x: &Tensor) -> engine::Result<Tensor> {
        let h = x.linear(&self.w1, Some(&self.b1))?.gelu()?;
        h.linear(&self.w2, Some(&self.b2))?.softmax(-1)
    }
}

#[test]
fn mlp_graph_prints_with_source_lines() {
    let mlp = Mlp::new(0);
    let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = recorded.clone();
    let model = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(RecordingBackend(sink));
    model.call(&Tensor::randn(&[4, 16], 9)).unwrap();
    let graphs = recorded.lock().unwrap();
    insta::assert_snapshot!("mlp_graph", graphs[0].to_string());
    insta::assert_snapshot!("mlp_graph_tabular", graphs[0].tabular());
    insta::assert_snapshot!("mlp_graph_decomposed", engine::aot::decompose(&graphs[0]).unwrap().to_string());
}

struct RecordingBackend(std::sync::Arc<std::sync::Mutex<Vec<engine::fx::Graph>>>);

impl engine::backends::Backend for RecordingBackend {
    fn name(&self) -> &str {
        "recording"
    }
    fn compile(
        &self,
        graph: &engine::fx::Graph,
        inputs: &[Tensor],
    ) -> engine::Result<Box<dyn engine::backends::CompiledGraph>> {
        self.0.lock().unwrap().push(graph.clone());
        Eager.compile(graph, inputs)
    }
}

#[test]
fn backends_agree_with_eager_on_the_mlp() {
    let mlp = Mlp::new(1);
    let x = Tensor::randn(&[5, 16], 2);
    let expected = mlp.forward(&x).unwrap().to_vec().unwrap();
    let eager = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(Eager);
    assert_eq!(eager.call(&x).unwrap().to_vec().unwrap(), expected);
    let aot = dynamo::compile(|x: Tensor| mlp.forward(&x)).backend(AotEager);
    let got = aot.call(&x).unwrap().to_vec().unwrap();
    for (g, e) in got.iter().zip(&expected) {
        assert!((g - e).abs() <= 1e-5 + 1e-4 * e.abs(), "{g} vs {e}");
    }
}

#[test]
fn a_second_call_with_the_same_shapes_hits_the_cache() {
    let f = dynamo::compile(|x: Tensor| x.exp()?.sum(0, false));
    f.call(&Tensor::randn(&[3, 4], 0)).unwrap();
    f.call(&Tensor::randn(&[3, 4], 1)).unwrap();
    f.call(&Tensor::randn(&[5, 4], 1)).unwrap();
    let stats = f.stats();
    assert_eq!((stats.calls, stats.compiles, stats.cache_hits), (3, 2, 1));
}

#[test]
fn item_under_fullgraph_is_an_error_naming_its_line() {
    let f = dynamo::compile(|x: Tensor| {
        let total = x.sum_all()?.item()?;
        x.mul(total)
    })
    .fullgraph(true);
    let err = f.call(&Tensor::ones(&[2])).unwrap_err().to_string();
    assert!(err.contains("Tensor::item()") && err.contains("capture.rs:85"), "{err}");
}

#[test]
fn a_closure_that_returns_no_tensor_is_refused_with_its_line() {
    let f = dynamo::compile(|x: Tensor| -> engine::Result<Vec<Tensor>> {
        x.exp()?;
        Ok(Vec::new())
    });
    let (err, line) = (f.call(&Tensor::ones(&[2])).unwrap_err().to_string(), line!());
    assert!(err.starts_with("the compiled function returned no tensor"), "{err}");
    assert!(err.contains(&format!("capture.rs:{line}")), "{err}");
}

/// The graphs a compiled function hands its backend, in order.
fn recorded_graphs(
    f: &dyn Fn(Tensor) -> engine::Result<Tensor>,
    calls: &[&Tensor],
) -> (Vec<engine::fx::Graph>, dynamo::CompileStats) {
    let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let compiled = dynamo::compile(|x: Tensor| f(x)).backend(RecordingBackend(recorded.clone())).dynamic(false);
    for x in calls {
        compiled.call(x).unwrap();
    }
    let graphs = recorded.lock().unwrap().clone();
    (graphs, compiled.stats())
}

#[test]
fn a_trace_that_leaves_the_cached_graph_compiles_what_a_fresh_trace_would() {
    // A cached call follows the graph compiled before instead of building its own; here each
    // variant leaves it somewhere else: another op midway, another captured weight, more ops
    // after its end, fewer ops (other outputs), another shape at the input. The graph compiled
    // then must be, node for node (names and lines too), the one a fresh function traces. (Another
    // captured weight of the same shape is only another input: that call hits, as in Dynamo,
    // where parameters are graph inputs.)
    let variant = std::cell::Cell::new(0);
    let (w, v) = (Tensor::randn(&[4], 1).with_name("w"), Tensor::randn(&[4], 2).with_name("v"));
    let f = |x: Tensor| -> engine::Result<Tensor> {
        let t = x.exp()?.mul(2.0)?;
        match variant.get() {
            0 => t.mul(&w)?.sum(0, false),
            1 => t.add(1.0)?.mul(&w)?.sum(0, false),
            2 => t.mul(&v)?.sum(0, false),
            3 => t.mul(&w)?.sum(0, false)?.relu(),
            _ => Ok(t),
        }
    };
    let (x, wide) = (Tensor::randn(&[3, 4], 0), Tensor::randn(&[5, 4], 0));
    for (second, input) in [(1, &x), (2, &x), (3, &x), (4, &x), (0, &wide)] {
        let mut graphs = Vec::new();
        for (v, input) in [(0, &x), (second, input)] {
            variant.set(v);
            graphs.push(recorded_graphs(&f, &[input]).0.remove(0));
        }
        let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let compiled = dynamo::compile(|x: Tensor| f(x)).backend(RecordingBackend(recorded.clone())).dynamic(false);
        for (v, input) in [(0, &x), (0, &x), (second, input)] {
            variant.set(v);
            compiled.call(input).unwrap();
        }
        let cached = recorded.lock().unwrap();
        if second == 2 {
            assert_eq!((compiled.stats().cache_hits, cached.len()), (2, 1), "another weight is another input");
            continue;
        }
        assert_eq!(compiled.stats().cache_hits, 1, "variant {second}: the repeated call hits");
        assert_eq!(cached.len(), 2, "variant {second}");
        assert_eq!(format!("{:?}", cached[1].nodes()), format!("{:?}", graphs[1].nodes()), "variant {second}");
        assert_eq!(cached[1].outputs(), graphs[1].outputs(), "variant {second}");
    }
}

#[test]
fn a_cached_call_that_breaks_its_graph_reuses_both_graphs() {
    let f = |x: Tensor| -> engine::Result<Tensor> {
        let total = x.exp()?.sum_all()?.item()?;
        x.mul(total)?.relu()
    };
    let x = Tensor::randn(&[3, 4], 0);
    let expected = f(x.clone()).unwrap().to_vec().unwrap();
    let (graphs, stats) = recorded_graphs(&f, &[&x, &x, &x]);
    assert_eq!((graphs.len(), stats.compiles, stats.cache_hits, stats.graph_breaks), (2, 2, 4, 3));
    let compiled = dynamo::compile(f);
    let first = compiled.call(&x).unwrap().to_vec().unwrap();
    for (g, e) in first.iter().zip(&expected) {
        assert!((g - e).abs() <= 1e-5 * (1.0 + e.abs()), "{g} vs {e}");
    }
    for _ in 0..2 {
        assert_eq!(compiled.call(&x).unwrap().to_vec().unwrap(), first, "a cached call runs the same code");
    }
}

#[test]
fn a_symbolic_tensor_the_code_keeps_is_left_alone_by_later_calls() {
    // A trace writes its symbolic tensors into the allocations of those an earlier trace handed
    // out and nothing holds any more; one the traced code kept is not among them.
    let kept = std::cell::RefCell::new(None);
    let f = dynamo::compile(|x: Tensor| {
        let h = x.exp()?;
        kept.borrow_mut().get_or_insert_with(|| h.clone());
        h.relu()
    });
    let (x, wide) = (Tensor::randn(&[3, 4], 0), Tensor::randn(&[7, 2, 5], 1));
    for input in [&x, &x, &wide, &wide, &x] {
        f.call(input).unwrap();
    }
    let kept = kept.borrow().clone().unwrap();
    assert_eq!((kept.shape(), kept.is_symbolic()), (&[3, 4][..], true));
    let err = kept.to_vec().unwrap_err().to_string();
    assert!(err.contains("escaped the compiled function that traced it"), "{err}");
}
