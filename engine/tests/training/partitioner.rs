//! The partitioner's choices on hand-built graphs (snapshots of the printed forward and backward
//! graphs and the saved list), its minimum cut against brute force on small random networks, and
//! compiled functions under autograd: the compiled backward node, guards on requires_grad, graph
//! breaks, the `aot_graphs` log.

use engine::aot::{self, INFINITE, Network};
use engine::backends::{AotEager, Inductor};
use engine::fx::{self, Graph};
use engine::logs::{self, Artifact};
use engine::{Result, Tensor, dynamo};
use proptest::prelude::*;

/// The graph of `f` traced on tensors of `shapes` (named `x`, `w`, ... in order).
fn traced(shapes: &[(&str, &[usize])], f: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>) -> Graph {
    let inputs: Vec<Tensor> = shapes.iter().map(|(name, s)| Tensor::zeros(s).with_name(name)).collect();
    fx::trace(&inputs, f).unwrap().graph
}

fn printed(partition: &aot::Partition) -> String {
    format!("forward:\n{}\nbackward:\n{}\n{}", partition.forward, partition.backward, partition.saved)
}

#[test]
fn pointwise_chains_are_recomputed_not_saved() {
    // tanh(sin(x) * 2): the backward needs sin's input and tanh's output; saving x alone (an
    // input) and recomputing the chain in the backward saves no activation at all.
    let graph = traced(&[("x", &[64, 64])], |t| Ok(vec![t[0].sin()?.mul(2.0)?.tanh()?]));
    let partition = aot::min_cut_partition(&graph, &[true]).unwrap();
    assert_eq!(partition.saved.activation_bytes(), 0, "{}", partition.saved);
    insta::assert_snapshot!(printed(&partition));
}

#[test]
fn matmul_outputs_are_saved_and_gelu_recomputed() {
    // The MLP's first layer: the linear's product is compute-intensive (banned from
    // recomputation), the GELU after it is cheap: the product is saved, the GELU recomputed.
    let graph = traced(&[("x", &[8, 16]), ("w1", &[32, 16]), ("b1", &[32]), ("w2", &[4, 32])], |t| {
        Ok(vec![t[0].linear(&t[1], Some(&t[2]))?.gelu()?.linear(&t[3], None)?])
    });
    let partition = aot::min_cut_partition(&graph, &[false, true, true, true]).unwrap();
    insta::assert_snapshot!(printed(&partition));
}

#[test]
fn small_reductions_are_saved() {
    // A layer norm's statistics are reductions to 1/64 of their input: saved, not recomputed
    // (PyTorch's rule), while the normalised value is recomputed from them.
    let graph = traced(&[("x", &[16, 64]), ("w", &[64]), ("b", &[64])], |t| {
        Ok(vec![t[0].layer_norm(&t[1], &t[2], 1e-5)?.relu()?])
    });
    let partition = aot::min_cut_partition(&graph, &[true, true, true]).unwrap();
    insta::assert_snapshot!(printed(&partition));
}

#[test]
fn inputs_without_grad_get_no_gradient() {
    let graph = traced(&[("x", &[4, 3]), ("w", &[5, 3])], |t| Ok(vec![t[0].linear(&t[1], None)?.relu()?]));
    let joint = aot::joint_graph(&graph, &[false, true]).unwrap();
    assert_eq!(joint.gradients.iter().map(Option::is_some).collect::<Vec<_>>(), vec![false, true]);
    let partition = aot::partition(joint).unwrap();
    assert_eq!(partition.backward.outputs().len(), 1);
    assert_eq!(partition.backward.node(partition.backward.outputs()[0]).meta.shape, vec![5, 3]);
}

/// The capacity of the cheapest cut of `edges` separating 0 from `n - 1`, by trying every set of
/// vertices on the source's side.
fn brute_force_cut(n: usize, edges: &[(usize, usize, u64)]) -> u64 {
    (0..1u32 << (n - 2))
        .map(|mask| {
            let side = |v: usize| v == 0 || (v != n - 1 && mask >> (v - 1) & 1 == 1);
            edges.iter().filter(|&&(a, b, _)| side(a) && !side(b)).map(|&(_, _, c)| c).fold(0u64, u64::saturating_add)
        })
        .min()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_min_cut_is_optimal(n in 3usize..9, raw in proptest::collection::vec((0usize..9, 0usize..9, 0u64..20, any::<bool>()), 1..24)) {
        let edges: Vec<(usize, usize, u64)> = raw
            .into_iter()
            .map(|(a, b, c, inf)| (a % n, b % n, if inf && c < 4 { INFINITE } else { c }))
            .filter(|(a, b, _)| a != b)
            .collect();
        let mut network = Network::new(n);
        for &(a, b, c) in &edges {
            network.add_edge(a, b, c);
        }
        let (flow, side) = network.min_cut(0, n - 1);
        let expected = brute_force_cut(n, &edges);
        prop_assert!(side[0] && !side[n - 1] || flow >= INFINITE);
        prop_assert_eq!(flow.min(INFINITE), expected.min(INFINITE));
        // The reported side is a cut of exactly that capacity.
        let cut: u64 = edges.iter().filter(|&&(a, b, _)| side[a] && !side[b]).map(|&(_, _, c)| c).fold(0u64, u64::saturating_add);
        prop_assert_eq!(cut.min(INFINITE), expected.min(INFINITE));
    }
}

#[test]
fn compiled_outputs_carry_the_compiled_backward() {
    let w = Tensor::randn(&[3, 4], 0).requires_grad_(true);
    let f = dynamo::compile(|x: Tensor| x.linear(&w, None)?.tanh()).backend(AotEager);
    let x = Tensor::randn(&[2, 4], 1);
    let y = f.call(&x).unwrap();
    assert_eq!(y.grad_fn().as_deref(), Some("CompiledFunctionBackward"));
    y.sum_all().unwrap().backward().unwrap();
    let eager_w = w.detach().requires_grad_(true);
    x.linear(&eager_w, None).unwrap().tanh().unwrap().sum_all().unwrap().backward().unwrap();
    let (got, expected) = (w.grad().unwrap().to_vec().unwrap(), eager_w.grad().unwrap().to_vec().unwrap());
    assert!(got.iter().zip(&expected).all(|(a, b)| (a - b).abs() < 1e-5), "{got:?} vs {expected:?}");
    // Under no_grad the same function needs a graph without a backward: a recompile, whose
    // output requires no grad.
    let y = engine::autograd::no_grad(|| f.call(&x).unwrap());
    assert!(!y.requires_grad());
    assert_eq!(f.stats().compiles, 2);
    let again = f.call(&x).unwrap();
    assert!(again.requires_grad());
    assert_eq!(f.stats().compiles, 2, "each of the two graphs is reused");
}

#[test]
fn graph_breaks_chain_compiled_backwards() {
    // A host read in the middle splits the function in two graphs; the gradient flows through
    // both compiled backwards, and backward() inside a compiled function is itself a break.
    let w = Tensor::randn(&[4], 2).requires_grad_(true);
    let f = dynamo::compile(|x: Tensor| {
        let h = x.mul(&w)?.exp()?;
        let scale = h.sum_all()?.item()?; // graph break
        h.mul(1.0 / scale)?.sum_all()
    })
    .backend(Inductor::default());
    let x = Tensor::randn(&[4], 3);
    let loss = f.call(&x).unwrap();
    assert_eq!(f.stats().graph_breaks, 1);
    loss.backward().unwrap();
    let eager_w = w.detach().requires_grad_(true);
    let h = x.mul(&eager_w).unwrap().exp().unwrap();
    let scale = h.sum_all().unwrap().item().unwrap();
    h.mul(1.0 / scale).unwrap().sum_all().unwrap().backward().unwrap();
    let (got, expected) = (w.grad().unwrap().to_vec().unwrap(), eager_w.grad().unwrap().to_vec().unwrap());
    assert!(got.iter().zip(&expected).all(|(a, b)| (a - b).abs() < 1e-4), "{got:?} vs {expected:?}");

    let step = dynamo::compile(|x: Tensor| {
        let loss = x.mul(&w)?.sum_all()?;
        loss.backward()?;
        Ok(loss)
    })
    .backend(AotEager);
    w.zero_grad();
    step.call(&x).unwrap();
    assert_eq!(w.grad().unwrap().to_vec().unwrap(), x.to_vec().unwrap());
}

#[test]
fn the_aot_graphs_log_prints_joint_forward_backward_and_saved() {
    let w = Tensor::randn(&[3], 4).requires_grad_(true);
    let f = dynamo::compile(|x: Tensor| x.mul(&w)?.relu()).backend(AotEager);
    let (_, text) = logs::capture(&[Artifact::AotGraphs], || f.call(&Tensor::randn(&[3], 5)).unwrap());
    for part in ["joint graph:", "forward graph:", "backward graph:", "saved for backward:", "tangents_1"] {
        assert!(text.contains(part), "missing `{part}` in:\n{text}");
    }
}

#[test]
fn a_new_batch_size_recompiles_a_training_graph_statically() {
    let w = Tensor::randn(&[4, 3], 6).requires_grad_(true);
    let f = dynamo::compile(|x: Tensor| x.linear(&w, None)?.relu()).backend(AotEager);
    f.call(&Tensor::randn(&[2, 3], 7)).unwrap();
    let (_, log) = logs::capture(&[Artifact::Recompiles], || f.call(&Tensor::randn(&[5, 3], 8)).unwrap());
    assert!(log.contains("compiled for these static sizes"), "{log}");
    assert!(!log.contains("automatic dynamic shapes"), "{log}");
    let y = f.call(&Tensor::randn(&[5, 3], 9)).unwrap();
    y.sum_all().unwrap().backward().unwrap();
    assert_eq!(f.stats().compiles, 2);
}
