//! Inductor on the CPU: fusion decisions, kernel names, the call plan, generated code snapshots
//! (C and CUDA C, which needs no GPU to print), and compiled-equals-eager on random programs.

use std::sync::{Arc, Mutex};

use engine::backends::{Backend, CompiledGraph, Inductor};
use engine::fx::{Graph, Interpreter};
use engine::inductor::Config;
use engine::inductor::scheduler::can_fuse;
use engine::{Device, Result, Tensor, dynamo};
use proptest::prelude::*;

mod models;

/// A backend that keeps the graphs it is handed and runs them eagerly.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Graph>>>);

impl Backend for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn compile(&self, graph: &Graph, _: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        self.0.lock().unwrap().push(graph.clone());
        Ok(Box::new(Interpreter::new(graph.clone())))
    }
}

/// The graph `f` captures on `inputs`.
fn capture(f: impl Fn(Vec<Tensor>) -> Result<Tensor>, inputs: &[Tensor]) -> Graph {
    let recorder = Recorder::default();
    dynamo::compile(f).backend(recorder.clone()).call(inputs).unwrap();
    recorder.0.lock().unwrap().pop().unwrap()
}

fn close(got: &[f32], expected: &[f32]) -> std::result::Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!("{} values, expected {}", got.len(), expected.len()));
    }
    for (i, (&g, &e)) in got.iter().zip(expected).enumerate() {
        let same_special = (g.is_nan() && e.is_nan()) || (g.is_infinite() && g == e);
        let near = (g - e).abs() <= 1e-3 * (1.0 + e.abs());
        if !same_special && !near {
            return Err(format!("element {i}: compiled {g}, eager {e}"));
        }
    }
    Ok(())
}

fn mlp_inputs() -> Vec<Tensor> {
    vec![
        Tensor::randn(&[4, 16], 0),
        Tensor::randn(&[32, 16], 1).with_name("fc1.weight"),
        Tensor::randn(&[32], 2).with_name("fc1.bias"),
        Tensor::randn(&[8, 32], 3).with_name("fc2.weight"),
        Tensor::randn(&[8], 4).with_name("fc2.bias"),
    ]
}

type Model = fn(Vec<Tensor>) -> Result<Tensor>;

fn snapshot_cases() -> Vec<(&'static str, Model, Vec<Tensor>)> {
    vec![
        ("add_relu_mul", models::add_relu_mul, vec![Tensor::randn(&[1000], 0), Tensor::randn(&[1000], 1)]),
        ("chain8", models::chain8, vec![Tensor::randn(&[1003], 0), Tensor::randn(&[1003], 1)]),
        ("softmax", models::softmax, vec![Tensor::randn(&[64, 4096], 0)]),
        (
            "layer_norm",
            models::layer_norm,
            vec![Tensor::randn(&[32, 1024], 0), Tensor::ones(&[1024]), Tensor::zeros(&[1024])],
        ),
        ("mlp", models::mlp, mlp_inputs()),
        ("transpose_read", models::transpose_read, vec![Tensor::randn(&[6, 6], 0)]),
        ("column_sum", models::column_sum, vec![Tensor::randn(&[5, 7], 0)]),
    ]
}

#[test]
fn generated_code_snapshots() {
    for (name, model, inputs) in snapshot_cases() {
        let graph = capture(model, &inputs);
        let c = engine::inductor::generate(&graph, Device::Cpu, &Config::default()).unwrap();
        let cuda = engine::inductor::generate(&graph, Device::Cuda(0), &Config::default()).unwrap();
        insta::assert_snapshot!(format!("{name}_c"), c.to_string());
        insta::assert_snapshot!(format!("{name}_cuda"), cuda.to_string());
    }
}

#[test]
fn kernel_names_say_what_was_fused() {
    let names = |model: Model, inputs: &[Tensor]| {
        let code = engine::inductor::generate(&capture(model, inputs), Device::Cpu, &Config::default()).unwrap();
        code.kernel_names().iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let pair = [Tensor::randn(&[64], 0), Tensor::randn(&[64], 1)];
    assert_eq!(names(models::add_relu_mul, &pair), ["poi_fused_add_relu_mul_0"]);
    assert_eq!(names(models::chain8, &pair), ["poi_fused_add_mul_sub_0"]);
    assert_eq!(names(models::softmax, &[Tensor::randn(&[4, 8], 0)]), ["per_fused_amax_sub_exp_sum_div_0"]);
    assert_eq!(names(models::softmax, &[Tensor::randn(&[2, 10000], 0)]), ["red_fused_amax_sub_exp_sum_div_0"]);
    let ln = [Tensor::randn(&[4, 8], 0), Tensor::ones(&[8]), Tensor::zeros(&[8])];
    assert_eq!(names(models::layer_norm, &ln), ["per_fused_mean_sub_mul_add_rsqrt_0"]);
    let mlp = names(models::mlp, &mlp_inputs());
    assert_eq!(mlp, ["poi_fused_add_mul_erf_0", "per_fused_add_amax_sub_exp_sum_div_1"]);
    assert_eq!(names(models::transpose_read, &[Tensor::randn(&[3, 3], 0)]).len(), 2);
}

#[test]
fn refusals_name_their_reason() {
    let graph = capture(models::transpose_read, &[Tensor::randn(&[3, 3], 0)]);
    let decomposed = engine::aot::decompose(&graph).unwrap();
    let lowered = engine::inductor::lowering::lower(&decomposed).unwrap();
    let schedule = engine::inductor::scheduler::schedule(&lowered, can_fuse).unwrap();
    let refusal = schedule.decisions.iter().find(|d| d.to_string().starts_with("cannot fuse")).unwrap();
    assert_eq!(
        refusal.to_string(),
        "cannot fuse add (buf1) into [exp]: add reads buf0 at other elements than the ones it computes (a view or \
         broadcast of it), so buf0 must be written to memory first"
    );
}

/// A policy that fuses nothing: every node its own kernel.
fn never(_: &engine::inductor::scheduler::FusionCandidate) -> engine::inductor::scheduler::Decision {
    engine::inductor::scheduler::Decision::Refuse("this policy never fuses".into())
}

/// A policy that fuses everything, which the scheduler must reject rather than miscompile.
fn always(_: &engine::inductor::scheduler::FusionCandidate) -> engine::inductor::scheduler::Decision {
    engine::inductor::scheduler::Decision::Fuse(engine::inductor::scheduler::FusionKind::Pointwise)
}

#[test]
fn fusion_policies_plug_in_and_wrong_ones_fail_loudly() {
    let x = Tensor::randn(&[16, 16], 0);
    let unfused = Inductor::with_fusion_policy(never);
    let f = dynamo::compile(|x: Tensor| x.softmax(-1)).backend(unfused.clone());
    let y = f.call(&x).unwrap().to_vec().unwrap();
    close(&y, &x.softmax(-1).unwrap().to_vec().unwrap()).unwrap();
    assert_eq!(unfused.output_codes()[0].kernels.len(), 5);
    let wrong = dynamo::compile(|x: Tensor| x.softmax(-1)).backend(Inductor::with_fusion_policy(always));
    let err = wrong.call(&x).err().unwrap().to_string();
    assert!(err.contains("cannot work"), "{err}");
}

#[test]
fn dead_buffers_lend_their_memory() {
    let w = Tensor::randn(&[8, 8], 1);
    let f = |x: &Tensor| x.matmul(&w)?.relu()?.matmul(&w)?.relu();
    let inductor = Inductor::default();
    let model = dynamo::compile(|x: Tensor| f(&x)).backend(inductor.clone());
    let x = Tensor::randn(&[8, 8], 0);
    close(&model.call(&x).unwrap().to_vec().unwrap(), &f(&x).unwrap().to_vec().unwrap()).unwrap();
    let call = &inductor.output_codes()[0].call;
    assert!(call.contains("let buf2 = buf0;  // reuse"), "{call}");
}

#[test]
fn outputs_may_be_views_and_inputs() {
    let inductor = Inductor::default();
    let f = |(x, y): (Tensor, Tensor)| Ok((x.exp()?.t()?, y.slice(0, 1, 3, 1)?));
    let model = dynamo::compile(f).backend(inductor);
    let x = Tensor::randn(&[2, 3], 0);
    let y = Tensor::randn(&[4], 1);
    let (a, b) = model.call((&x, &y)).unwrap();
    let (ea, eb) = f((x.clone(), y.clone())).unwrap();
    assert_eq!(a.shape(), [3, 2]);
    close(&a.to_vec().unwrap(), &ea.to_vec().unwrap()).unwrap();
    assert_eq!(b.to_vec().unwrap(), eb.to_vec().unwrap());
}

#[test]
fn strided_and_offset_inputs_are_indexed_correctly() {
    let base = Tensor::randn(&[6, 9], 3);
    let x = base.slice(1, 2, 8, 2).unwrap().t().unwrap();
    let f = |x: Tensor| x.mul(3.0)?.sum(1, true)?.add(&x);
    let model = dynamo::compile(f).backend(Inductor::default());
    close(&model.call(&x).unwrap().to_vec().unwrap(), &f(x.clone()).unwrap().to_vec().unwrap()).unwrap();
}

/// One step of a random program over a pool of tensors (indices wrap around the pool).
#[derive(Clone, Debug)]
enum Instr {
    Unary(usize, usize),
    Binary(usize, usize, usize),
    Scalar(usize, usize, f32),
    Where(usize, usize, usize),
    Reduce(usize, usize, usize, bool),
    SubRowMax(usize, usize),
    Transpose(usize),
    Slice(usize, usize),
    Flatten(usize),
    Softmax(usize),
    LayerNorm(usize),
    Matmul(usize, usize),
}

fn instr() -> impl Strategy<Value = Instr> {
    let i = || 0usize..64;
    prop_oneof![
        (i(), i()).prop_map(|(o, a)| Instr::Unary(o, a)),
        (i(), i(), i()).prop_map(|(o, a, b)| Instr::Binary(o, a, b)),
        (i(), i(), -2.0f32..2.0).prop_map(|(o, a, s)| Instr::Scalar(o, a, s)),
        (i(), i(), i()).prop_map(|(c, a, b)| Instr::Where(c, a, b)),
        (i(), i(), i(), any::<bool>()).prop_map(|(k, a, d, keep)| Instr::Reduce(k, a, d, keep)),
        (i(), i()).prop_map(|(a, d)| Instr::SubRowMax(a, d)),
        i().prop_map(Instr::Transpose),
        (i(), i()).prop_map(|(a, d)| Instr::Slice(a, d)),
        i().prop_map(Instr::Flatten),
        i().prop_map(Instr::Softmax),
        i().prop_map(Instr::LayerNorm),
        (i(), 1usize..10).prop_map(|(a, n)| Instr::Matmul(a, n)),
    ]
}

/// Unary ops that stay finite and well conditioned on inputs of moderate size.
const UNARY: [engine::op::UnaryOp; 10] = {
    use engine::op::UnaryOp::*;
    [Neg, Exp, Sin, Cos, Tanh, Erf, Abs, Relu, Sigmoid, Gelu]
};

fn run_program(program: &[Instr], inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    use engine::op::{BinaryOp, Op};
    let mut pool = inputs;
    let here = engine::SourceLocation::caller();
    for ins in program {
        let pick = |k: usize| pool[k % pool.len()].clone();
        let next = match ins {
            Instr::Unary(o, a) => Some(Op::Unary(UNARY[o % UNARY.len()]).apply(&[(&pick(*a)).into()], here)?),
            Instr::Binary(o, a, b) => {
                let (a, b) = (pick(*a), pick(*b));
                let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Maximum, BinaryOp::Minimum][o % 5];
                match engine::layout::broadcast_shapes(a.shape(), b.shape()) {
                    Some(_) => Some(Op::Binary(op).apply(&[(&a).into(), (&b).into()], here)?),
                    None => None,
                }
            }
            Instr::Scalar(o, a, s) => {
                let ops = [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Gt, BinaryOp::Pow];
                let op = ops[o % ops.len()];
                let s = match op {
                    BinaryOp::Div => s.abs() + 0.5,
                    BinaryOp::Pow => 2.0,
                    _ => *s,
                };
                Some(Op::Binary(op).apply(&[(&pick(*a)).into(), s.into()], here)?)
            }
            Instr::Where(c, a, b) => {
                let (c, a, b) = (pick(*c), pick(*a), pick(*b));
                let mask = c.gt(0.0)?;
                let fits = engine::layout::broadcast_shapes(a.shape(), b.shape())
                    .and_then(|s| engine::layout::broadcast_shapes(&s, mask.shape()))
                    .is_some();
                if fits { Some(mask.where_(&a, &b)?) } else { None }
            }
            Instr::Reduce(k, a, d, keep) => {
                let a = pick(*a);
                if a.rank() == 0 {
                    None
                } else {
                    let dim = (*d % a.rank()) as isize;
                    Some(match k % 3 {
                        0 => a.sum(dim, *keep)?,
                        1 => a.mean(dim, *keep)?,
                        _ => a.amax(dim, *keep)?,
                    })
                }
            }
            Instr::SubRowMax(a, d) => {
                let a = pick(*a);
                if a.rank() == 0 { None } else { Some(a.sub(&a.amax((*d % a.rank()) as isize, true)?)?) }
            }
            Instr::Transpose(a) => {
                let a = pick(*a);
                if a.rank() < 2 { None } else { Some(a.transpose(0, -1)?) }
            }
            Instr::Slice(a, d) => {
                let a = pick(*a);
                if a.rank() == 0 || a.shape()[d % a.rank()] < 2 {
                    None
                } else {
                    let dim = d % a.rank();
                    Some(a.slice(dim as isize, 1, a.shape()[dim], 2)?)
                }
            }
            Instr::Flatten(a) => {
                let a = pick(*a);
                Some(a.reshape(&[a.numel()])?)
            }
            Instr::Softmax(a) => {
                let a = pick(*a);
                if a.rank() == 0 { None } else { Some(a.softmax(-1)?) }
            }
            Instr::LayerNorm(a) => {
                let a = pick(*a);
                match a.shape().last() {
                    Some(&d) => {
                        Some(a.layer_norm(&Tensor::uniform(&[d], 0.5, 1.5, 7), &Tensor::randn(&[d], 8), 1e-5)?)
                    }
                    None => None,
                }
            }
            Instr::Matmul(a, n) => {
                let a = pick(*a);
                if a.rank() != 2 {
                    None
                } else {
                    Some(a.matmul(&Tensor::uniform(&[a.shape()[1], *n], -0.5, 0.5, 9))?)
                }
            }
        };
        pool.extend(next);
    }
    let start = pool.len().saturating_sub(3);
    Ok(pool[start..].to_vec())
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..10, 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn compiled_equals_eager_on_random_programs(
        program in prop::collection::vec(instr(), 1..7),
        shape in shape(),
        seed in 0u64..1000,
    ) {
        let inputs = vec![Tensor::uniform(&shape, -2.0, 2.0, seed), Tensor::uniform(&shape, -2.0, 2.0, seed + 1)];
        let expected = run_program(&program, inputs.clone()).unwrap();
        let compiled = dynamo::compile(|t: Vec<Tensor>| run_program(&program, t)).backend(Inductor::default());
        let got = compiled.call(&inputs).unwrap();
        for (g, e) in got.iter().zip(&expected) {
            prop_assert_eq!(g.shape(), e.shape());
            if let Err(why) = close(&g.to_vec().unwrap(), &e.to_vec().unwrap()) {
                return Err(TestCaseError::fail(why));
            }
        }
    }
}

#[test]
fn modules_that_ran_in_parallel_can_be_dropped() {
    // Large enough for the OpenMP team to start; unloading its code would crash the process.
    for i in 0..3 {
        let x = Tensor::randn(&[100_000], i);
        let model = dynamo::compile(|x: Tensor| x.mul(1.5 + i as f32)).backend(Inductor::default());
        close(&model.call(&x).unwrap().to_vec().unwrap(), &x.mul(1.5 + i as f32).unwrap().to_vec().unwrap()).unwrap();
    }
}
