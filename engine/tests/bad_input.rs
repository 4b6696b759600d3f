//! Bad or edge-case input to the public API gives PyTorch's answer or an error naming the problem,
//! eagerly and compiled alike: overflowing shapes, reductions over an empty dimension, NaN; and
//! no panic anywhere on a learner's path (`no_panics`).

#[path = "bad_input/no_panics.rs"]
mod no_panics;

use engine::backends::Inductor;
use engine::{Tensor, dynamo};

#[test]
fn overflowing_reshape_and_matmul_are_errors_not_crashes() {
    let x = Tensor::zeros(&[2]);
    let err = x.reshape(&[(1usize << 63) + 1, 2]).unwrap_err().to_string();
    assert!(err.starts_with("reshape:"), "{err}");
    // Inputs are small views of huge shapes (stride 0), so only the product overflows.
    let big = 1usize << 40;
    let a = Tensor::zeros(&[1, 1]).expand(&[big, 1]).unwrap();
    let b = Tensor::zeros(&[1, 1]).expand(&[1, big]).unwrap();
    let err = a.matmul(&b).unwrap_err().to_string();
    assert!(err.contains(&format!("[{big}, 1]")) && err.contains(&format!("[1, {big}]")), "{err}");
}

#[test]
fn reductions_over_an_empty_dim_behave_as_pytorch() {
    let x = Tensor::zeros(&[3, 0]);
    assert_eq!(x.sum(1, false).unwrap().to_vec().unwrap(), vec![0.0; 3]);
    assert!(x.mean(1, false).unwrap().to_vec().unwrap().iter().all(|v| v.is_nan()));
    let err = x.amax(1, false).unwrap_err().to_string();
    assert!(err.contains("expected reduction dim 1 to have non-zero size"), "{err}");
    // Compiled through generated C, the same answers.
    let sum = dynamo::compile(|x: Tensor| x.sum(1, false)).backend(Inductor::default());
    assert_eq!(sum.call(&x).unwrap().to_vec().unwrap(), vec![0.0; 3]);
    let mean = dynamo::compile(|x: Tensor| x.mean(1, false)).backend(Inductor::default());
    assert!(mean.call(&x).unwrap().to_vec().unwrap().iter().all(|v| v.is_nan()));
    let max = dynamo::compile(|x: Tensor| x.amax(1, false)).backend(Inductor::default());
    assert!(max.call(&x).is_err());
}

#[test]
fn relu_of_nan_is_nan_eager_and_compiled() {
    let x = Tensor::from_vec(vec![f32::NAN, -1.0, 2.0], &[3]).unwrap();
    let eager = x.relu().unwrap().to_vec().unwrap();
    let compiled = dynamo::compile(|x: Tensor| x.relu()).backend(Inductor::default());
    for y in [eager, compiled.call(&x).unwrap().to_vec().unwrap()] {
        assert!(y[0].is_nan() && y[1] == 0.0 && y[2] == 2.0, "{y:?}");
    }
}

#[test]
fn set_outputs_refuses_a_node_of_another_graph() {
    let meta = Tensor::zeros(&[2]).meta();
    let mut big = engine::fx::Graph::new();
    let ids: Vec<_> = (0..3).map(|i| big.add_placeholder(&format!("x{i}"), meta.clone(), vec![1])).collect();
    let mut small = engine::fx::Graph::new();
    small.add_placeholder("x", meta, vec![1]);
    let err = small.set_outputs(vec![ids[2]]).unwrap_err().to_string();
    assert!(err.starts_with("set_outputs: ") && err.contains("not a node of this graph"), "{err}");
    assert!(small.outputs().is_empty());
}

#[test]
fn kernel_build_refuses_an_extern_group() {
    use engine::inductor::{kernel, lowering, scheduler};
    let tracer = engine::fx::proxy::Tracer::new();
    let x = tracer.input(&Tensor::randn(&[4, 4], 0)).unwrap();
    let y = x.matmul(&x).unwrap();
    let graph = tracer.finish(&[y]).unwrap().graph;
    let lowered = lowering::lower(&graph, &engine::fx::SymBindings::default()).unwrap();
    let schedule = scheduler::schedule(&lowered, scheduler::can_fuse).unwrap();
    let matmul = schedule.groups.iter().find(|g| g.kind == scheduler::LoopKind::Extern).expect("matmul is extern");
    let err = kernel::build(&lowered, &schedule, matmul, scheduler::KernelId(0)).unwrap_err().to_string();
    assert!(err.starts_with("kernel::build: "), "{err}");
}
