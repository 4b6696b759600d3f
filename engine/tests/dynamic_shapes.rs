//! Symbolic sizes: dynamic graphs print with symbols, serve every batch size, keep their
//! dynamism through AOT, and agree with eager.

use engine::backends::{AotEager, Backend, CompiledGraph, Eager};
use engine::fx::Graph;
use engine::{Tensor, dynamo};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};

/// A backend that keeps every graph it is handed, then runs it with `inner`.
struct Recording<B>(Arc<Mutex<Vec<Graph>>>, B);

impl<B: Backend> Backend for Recording<B> {
    fn name(&self) -> &str {
        "recording"
    }
    fn compile(&self, graph: &Graph, inputs: &[Tensor]) -> engine::Result<Box<dyn CompiledGraph>> {
        self.0.lock().unwrap().push(graph.clone());
        self.1.compile(graph, inputs)
    }
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-4 + 1e-4 * y.abs())
}

struct Block {
    w: Tensor,
    b: Tensor,
    gamma: Tensor,
    beta: Tensor,
}

impl Block {
    fn new() -> Block {
        Block {
            w: Tensor::randn(&[16, 8], 1).with_name("w"),
            b: Tensor::randn(&[16], 2).with_name("b"),
            gamma: Tensor::randn(&[16], 3).with_name("gamma"),
            beta: Tensor::randn(&[16], 4).with_name("beta"),
        }
    }

    /// `x: [batch, 4, 8]`: a linear, a norm, a reshape that merges the batch, a reduction.
    fn forward(&self, x: &Tensor) -> engine::Result<Tensor> {
        let h = x.linear(&self.w, Some(&self.b))?.layer_norm(&self.gamma, &self.beta, 1e-5)?;
        let flat = h.reshape(&[x.shape()[0] * 4, 16])?;
        flat.softmax(-1)?.sum(1, true)?.mul(&flat.amax(1, true)?)
    }
}

#[test]
fn dynamic_true_compiles_once_for_every_batch_size() {
    let block = Block::new();
    let graphs = Arc::new(Mutex::new(Vec::new()));
    let f = dynamo::compile(|x: Tensor| block.forward(&x)).backend(Recording(graphs.clone(), Eager)).dynamic(true);
    for batch in [8, 16, 3, 8] {
        let x = Tensor::randn(&[batch, 4, 8], batch as u64);
        let got = f.call(&x).unwrap();
        assert_eq!(got.shape(), &[batch * 4, 1]);
        assert!(close(&got.to_vec().unwrap(), &block.forward(&x).unwrap().to_vec().unwrap()));
    }
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.cache_hits), (1, 3));
    insta::assert_snapshot!("dynamic_block_graph", graphs.lock().unwrap()[0].to_string());
}

#[test]
fn a_size_change_recompiles_once_then_the_size_is_dynamic() {
    let block = Block::new();
    let f = dynamo::compile(|x: Tensor| block.forward(&x));
    for batch in [8, 16, 32, 5] {
        f.call(&Tensor::randn(&[batch, 4, 8], 0)).unwrap();
    }
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.recompiles, stats.cache_hits), (2, 1, 2));
}

#[test]
fn aot_keeps_the_graph_dynamic() {
    let block = Block::new();
    let graphs = Arc::new(Mutex::new(Vec::new()));
    let f = dynamo::compile(|x: Tensor| block.forward(&x)).backend(Recording(graphs.clone(), AotEager)).dynamic(true);
    for batch in [2, 7] {
        let x = Tensor::randn(&[batch, 4, 8], 9);
        assert!(close(&f.call(&x).unwrap().to_vec().unwrap(), &block.forward(&x).unwrap().to_vec().unwrap()));
    }
    let decomposed = engine::aot::decompose(&graphs.lock().unwrap()[0]).unwrap();
    assert!(decomposed.is_dynamic());
    insta::assert_snapshot!("dynamic_block_decomposed", decomposed.to_string());
}

#[test]
fn broadcasting_against_a_static_size_specializes() {
    let bias = Tensor::randn(&[6, 5], 0).with_name("bias");
    let graphs = Arc::new(Mutex::new(Vec::new()));
    let f = dynamo::compile(|x: Tensor| x.add(&bias)).backend(Recording(graphs.clone(), Eager)).dynamic(true);
    f.call(&Tensor::randn(&[6, 5], 1)).unwrap();
    let graph = &graphs.lock().unwrap()[0];
    assert!(!graph.is_dynamic());
    let specialized: Vec<String> = graph.specializations().iter().map(ToString::to_string).collect();
    assert_eq!(specialized.len(), 2, "{specialized:?}");
    assert!(specialized[0].starts_with("s0 = 6: add: broadcast against a static size"), "{specialized:?}");
    // As eagerly, another batch size no longer broadcasts with the bias.
    f.call(&Tensor::randn(&[7, 5], 1)).unwrap_err();
}

#[test]
fn unified_sizes_share_one_symbol() {
    let graphs = Arc::new(Mutex::new(Vec::new()));
    let f = dynamo::compile(|(a, b): (Tensor, Tensor)| a.mul(&b)?.matmul(&b.t()?))
        .backend(Recording(graphs.clone(), Eager))
        .dynamic(true);
    f.call((&Tensor::randn(&[4, 3], 0), &Tensor::randn(&[4, 3], 1))).unwrap();
    let graph = graphs.lock().unwrap()[0].to_string();
    assert!(graph.starts_with("graph(arg0: f32[s0, s1], arg1: f32[s0, s1]):"), "{graph}");
    assert!(graph.contains("f32[s0, s0] = matmul"), "{graph}");
}

#[test]
fn a_dynamic_graph_checks_the_sizes_it_relies_on() {
    let graphs = Arc::new(Mutex::new(Vec::new()));
    let w = Tensor::randn(&[4, 3], 0);
    let f = dynamo::compile(|x: Tensor| x.matmul(&w)).backend(Recording(graphs.clone(), Eager)).dynamic(true);
    f.call(&Tensor::randn(&[5, 4], 1)).unwrap();
    let graph = graphs.lock().unwrap()[0].clone();
    let interpreter = engine::fx::Interpreter::new(graph);
    let ok = interpreter.run(&[Tensor::randn(&[9, 4], 2), w.clone()]).unwrap();
    assert_eq!(ok[0].shape(), &[9, 3]);
    let err = interpreter.run(&[Tensor::randn(&[9, 5], 2), w.clone()]).unwrap_err().to_string();
    assert!(err.starts_with("input 0: size mismatch at dim 1, expected 4, got 5"), "{err}");
    let err = interpreter.run(&[Tensor::randn(&[1, 4], 2), w]).unwrap_err().to_string();
    assert!(err.starts_with("input 0: size mismatch at dim 0, expected s0 (dynamic, at least 2), got 1"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// A dynamic graph compiled at one batch size gives eager's results at others.
    #[test]
    fn dynamic_graphs_agree_with_eager(first in 2usize..9, sizes in proptest::collection::vec(2usize..12, 1..4), seed in 0u64..1000) {
        let w = Tensor::randn(&[6, 5], seed).with_name("w");
        let model = |x: &Tensor| -> engine::Result<Tensor> {
            let h = x.matmul(&w)?.gelu()?;
            let n = h.shape()[0];
            let wide = h.unsqueeze(1)?.expand(&[n, 2, 5])?.reshape(&[n * 2, 5])?;
            wide.log_softmax(1)?.add(&wide.mean(0, true)?)?.transpose(0, 1)?.contiguous()
        };
        let f = dynamo::compile(|x: Tensor| model(&x)).backend(AotEager).dynamic(true);
        for batch in std::iter::once(first).chain(sizes) {
            let x = Tensor::randn(&[batch, 6], seed + batch as u64);
            let got = f.call(&x).unwrap().to_vec().unwrap();
            prop_assert!(close(&got, &model(&x).unwrap().to_vec().unwrap()));
        }
        prop_assert_eq!(f.stats().compiles, 1);
    }
}

thread_local! {
    /// The wires tripped on this thread since [`symbolic_wires_tripped_by`] last cleared them.
    static TRIPPED: std::cell::RefCell<Vec<engine::wires::Wire>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The wires of the symbolic-size machinery that `f` trips on this thread, in order.
fn symbolic_wires_tripped_by(f: impl FnOnce()) -> Vec<engine::wires::Wire> {
    use engine::wires::Wire;
    const SYMBOLIC: [Wire; 4] =
        [Wire::WithDynamicDims, Wire::DynamicPlaceholder, Wire::AddDynamicPlaceholder, Wire::BindSymbols];
    TRIPPED.with(|t| t.borrow_mut().clear());
    f();
    TRIPPED.with(|t| t.take()).into_iter().filter(|w| SYMBOLIC.contains(w)).collect()
}

/// The public items that decide symbolic sizes trip their wires (phase 2's `recompiles` arms
/// them), each its own and once; the engine's own uses of the same machinery (a compiled
/// function's re-trace with a symbol, its guards on every call, `cond`'s branches made dynamic,
/// Inductor's kernels for new sizes, the interpreter running a dynamic graph) trip none.
#[test]
fn symbolic_sizes_trip_their_wires_only_when_called_from_outside_the_engine() {
    use engine::fx::{Interpreter, proxy::Tracer};
    use engine::wires::Wire;
    assert!(engine::wires::install(|wire| TRIPPED.with(|t| t.borrow_mut().push(wire))), "the only hook");
    let x = Tensor::randn(&[4, 8], 0);
    let traced = engine::fx::trace(std::slice::from_ref(&x), |xs| Ok(vec![xs[0].relu()?.sum(-1, false)?])).unwrap();
    let mut dynamic = Graph::new();
    let tripped = symbolic_wires_tripped_by(|| dynamic = traced.graph.with_dynamic_dims(&[vec![0]]).unwrap());
    assert_eq!(tripped, [Wire::WithDynamicDims]);
    assert!(dynamic.is_dynamic());
    let tripped = symbolic_wires_tripped_by(|| assert!(dynamic.bind_symbols(&[&[6, 8]]).is_ok()));
    assert_eq!(tripped, [Wire::BindSymbols]);
    let tripped = symbolic_wires_tripped_by(|| {
        Tracer::new().dynamic_placeholder("x", x.meta(), vec![8, 1], &[0]);
    });
    assert_eq!(tripped, [Wire::DynamicPlaceholder]);
    let tripped = symbolic_wires_tripped_by(|| {
        Graph::new().add_dynamic_placeholder("x", x.meta(), vec![8, 1], &[0]);
    });
    assert_eq!(tripped, [Wire::AddDynamicPlaceholder]);

    let run = || Interpreter::new(dynamic.clone()).run(&[Tensor::randn(&[6, 8], 1)]).unwrap();
    assert_eq!(symbolic_wires_tripped_by(|| drop(run())), []);
    /// Four calls of a compiled function whose first dim changes: a re-trace with a symbol, whose
    /// `cond` gets branches as dynamic as its operand, and guards checked on each call.
    fn calls_with_a_changing_size(backend: impl Backend + 'static) -> Vec<Wire> {
        let f = dynamo::compile(|x: Tensor| {
            let positive = x.sum_all()?.gt(0.0)?;
            dynamo::cond(&positive, |xs| xs[0].mul(2.0), |xs| xs[0].neg(), &[&x])?.relu()?.sum(-1, false)
        })
        .backend(backend);
        let tripped = symbolic_wires_tripped_by(|| {
            for n in [2, 3, 5, 3] {
                f.call(&Tensor::randn(&[n, 8], n as u64)).unwrap();
            }
        });
        assert_eq!((f.stats().compiles, f.stats().cache_hits), (2, 2), "the size became a symbol");
        tripped
    }
    assert_eq!(calls_with_a_changing_size(Eager), []);
    assert_eq!(calls_with_a_changing_size(engine::backends::Inductor::default()), []);
}
