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
