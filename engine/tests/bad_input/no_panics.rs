//! No panic on a learner's path: the public API, given wrong arities, shapes, dims and sizes,
//! returns an error naming the problem (or PyTorch's answer), never a panic, whether it runs
//! eagerly, is recorded into a graph, or is compiled by any backend; and a compiler backend that
//! returns the wrong tensors is the backend's error, said by dynamo.

use std::panic::{AssertUnwindSafe, catch_unwind};

use engine::backends::{AotEager, Backend, CompiledGraph, Eager, Inductor};
use engine::fx::{Arg, Graph, Interpreter};
use engine::inductor::{Config, TargetKind};
use engine::op::{AttentionMask, BinaryOp, Op, ReduceOp, UnaryOp};
use engine::scalar::Scalar;
use engine::{Error, Operand, Result, SourceLocation, Tensor, dynamo};
use proptest::prelude::*;

/// A dim, often out of range for the small ranks below.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..4, Just(usize::MAX)]
}

/// A shape, sometimes with an empty or an enormous size.
fn shape() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(prop_oneof![4 => 0usize..4, 1 => Just(1usize << 62)], 0..4)
}

/// Every op of the catalogue but `cond` and custom ops (which have tests of their own), with
/// parameters that are as often wrong as right.
fn ops() -> impl Strategy<Value = Op> {
    let mask = prop_oneof![Just(AttentionMask::None), Just(AttentionMask::Boolean), Just(AttentionMask::Additive)];
    prop_oneof![
        proptest::sample::select(UnaryOp::ALL.to_vec()).prop_map(Op::Unary),
        proptest::sample::select(BinaryOp::ALL.to_vec()).prop_map(Op::Binary),
        Just(Op::Where),
        Just(Op::Contiguous),
        Just(Op::Matmul),
        Just(Op::Linear),
        (proptest::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max]), dim(), any::<bool>())
            .prop_map(|(kind, dim, keepdim)| Op::Reduce { kind, dim, keepdim }),
        dim().prop_map(|dim| Op::Softmax { dim }),
        dim().prop_map(|dim| Op::LogSoftmax { dim }),
        any::<f32>().prop_map(|eps| Op::LayerNorm { eps: Scalar(eps) }),
        shape().prop_map(|shape| Op::Reshape { shape }),
        proptest::collection::vec(0usize..5, 0..4).prop_map(|dims| Op::Permute { dims }),
        shape().prop_map(|shape| Op::Expand { shape }),
        (dim(), 0usize..5, prop_oneof![0usize..5, Just(usize::MAX)], 0usize..3)
            .prop_map(|(dim, start, end, step)| Op::Slice { dim, start, end, step }),
        dim().prop_map(|dim| Op::Cat { dim }),
        (mask, any::<bool>(), any::<f32>()).prop_map(|(mask, causal, scale)| Op::ScaledDotProductAttention {
            mask,
            causal,
            scale: Scalar(scale)
        }),
    ]
}

/// An operand: a tensor of a small random shape (sometimes a broadcast view of an enormous one),
/// or a scalar.
#[derive(Clone, Debug)]
enum Given {
    Tensor(Vec<usize>),
    Huge(Vec<usize>),
    Scalar(f32),
}

/// How many operands `op` takes, as often as not, else any count up to four.
fn arity(op: &Op) -> usize {
    match op {
        Op::Binary(_) | Op::Matmul | Op::Linear => 2,
        Op::Where | Op::LayerNorm { .. } | Op::ScaledDotProductAttention { .. } => 3,
        _ => 1,
    }
}

/// An op with operands: tensors that mostly share one shape (or a suffix of it, which
/// broadcasts), now and then one of another shape, a broadcast view of an enormous one, or a
/// scalar; as many as the op takes, or not.
fn calls() -> impl Strategy<Value = (Op, Vec<Given>)> {
    (ops(), proptest::collection::vec(0usize..4, 0..4), any::<bool>(), 0usize..5).prop_flat_map(
        |(op, base, exact, count)| {
            let count = if exact { arity(&op) } else { count };
            let suffix = base.clone();
            let given = prop_oneof![
                4 => Just(Given::Tensor(base.clone())),
                2 => (0..=suffix.len()).prop_map(move |drop| Given::Tensor(suffix[drop..].to_vec())),
                1 => proptest::collection::vec(0usize..4, 0..4).prop_map(Given::Tensor),
                1 => proptest::collection::vec(0usize..4, 0..4).prop_map(Given::Huge),
                1 => any::<f32>().prop_map(Given::Scalar),
            ];
            (Just(op), proptest::collection::vec(given, count..=count))
        },
    )
}

/// The tensors (`None` for scalars) the operands stand for.
fn tensors(given: &[Given]) -> Vec<Option<Tensor>> {
    given
        .iter()
        .enumerate()
        .map(|(i, g)| match g {
            Given::Tensor(shape) => Some(Tensor::uniform(shape, -2.0, 2.0, i as u64)),
            // A broadcast view of 2^40 elements over one.
            Given::Huge(shape) => {
                let ones = vec![1; shape.len().max(1)];
                let mut huge = ones.clone();
                huge[0] = 1 << 40;
                Some(Tensor::ones(&ones).expand(&huge).unwrap())
            }
            Given::Scalar(_) => None,
        })
        .collect()
}

fn as_operands<'a>(given: &[Given], tensors: &'a [Option<Tensor>]) -> Vec<Operand<'a>> {
    given
        .iter()
        .zip(tensors)
        .map(|(g, t)| match (g, t) {
            (Given::Scalar(v), _) => Operand::Scalar(*v),
            (_, Some(t)) => Operand::Tensor(t),
            (_, None) => unreachable!("tensors() makes one for every tensor operand"),
        })
        .collect()
}

/// Runs `f`, failing the property if it panics.
fn no_panic<R>(what: &str, f: impl FnOnce() -> R) -> std::result::Result<R, TestCaseError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("{what} panicked: {message}"))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Every op on every kind of operand list, eagerly and recorded into a graph by hand.
    #[test]
    fn ops_on_wrong_operands_are_errors((op, given) in calls()) {
        let tensors = tensors(&given);
        let operands = as_operands(&given, &tensors);
        let what = format!("{op:?} on {given:?}");
        let _ = no_panic(&what, || op.apply(&operands, SourceLocation::caller()).map(|t| t.to_vec()))?;
        let _ = no_panic(&what, || {
            let mut graph = Graph::new();
            let args: Vec<Arg> = operands
                .iter()
                .enumerate()
                .map(|(i, o)| match o {
                    Operand::Scalar(v) => Arg::Scalar(Scalar(*v)),
                    Operand::Tensor(t) => Arg::Node(graph.add_placeholder(&format!("x{i}"), t.meta(), t.strides().unwrap().to_vec())),
                })
                .collect();
            let node = graph.add_call(op.clone(), args, SourceLocation::caller())?;
            graph.set_outputs(vec![node])?;
            let inputs: Vec<Tensor> = tensors.iter().flatten().cloned().collect();
            Interpreter::new(graph).run(&inputs)
        })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same, captured by dynamo and compiled by each backend: eager, aot_eager, Inductor's C
    /// and its interpreter.
    #[test]
    fn compiled_ops_on_wrong_operands_are_errors((op, given) in calls(), backend in 0usize..4) {
        let tensors = tensors(&given);
        let inputs: Vec<Tensor> = tensors.iter().flatten().cloned().collect();
        let run = |xs: Vec<Tensor>| -> Result<Tensor> {
            let mut xs = xs.into_iter();
            let rebuilt: Vec<Option<Tensor>> = given.iter().map(|g| match g { Given::Scalar(_) => None, _ => xs.next() }).collect();
            op.apply(&as_operands(&given, &rebuilt), SourceLocation::caller())
        };
        let interpreter = Inductor::with_config(Config { target: TargetKind::Interpreter, ..Config::default() });
        let backends: [Box<dyn Backend>; 4] = [Box::new(Eager), Box::new(AotEager), Box::new(Inductor::default()), Box::new(interpreter)];
        let backend = backends.into_iter().nth(backend).unwrap();
        if !inputs.is_empty() {
            let _ = no_panic(&format!("{op:?} on {given:?} with {}", backend.name()), || {
                dynamo::compile(run).backend(backend).call(&inputs).map(|t| t.to_vec())
            })?;
        }
    }
}

/// What a compiled graph returns for its inputs.
type Answer = fn(&[Tensor]) -> Vec<Tensor>;

/// A backend whose compiled graph returns its answer to the inputs, whatever the graph.
struct Returns(Answer);

impl Backend for Returns {
    fn name(&self) -> &str {
        "returns"
    }

    fn compile(&self, _graph: &Graph, _example_inputs: &[Tensor]) -> Result<Box<dyn CompiledGraph>> {
        let answer = self.0;
        Ok(Box::new(move |inputs: &[Tensor]| Ok(answer(inputs))))
    }
}

#[test]
fn a_backend_returning_the_wrong_tensors_is_its_error() {
    let x = Tensor::randn(&[2, 3], 0);
    let cases: [(Answer, &str); 3] = [
        (|_| Vec::new(), "returned 0 tensor(s) for a graph with 2 output(s)"),
        (|i| vec![i[0].clone(); 3], "returned 3 tensor(s) for a graph with 2 output(s)"),
        (|_| vec![Tensor::zeros(&[2, 3]), Tensor::zeros(&[5])], "output 1 of the compiled graph is shape [5]"),
    ];
    for (answer, says) in cases {
        let f = dynamo::compile(|x: Tensor| Ok((x.relu()?, x.sum(1, false)?))).backend(Returns(answer));
        match f.call(&x) {
            Err(error @ Error::Backend { .. }) => {
                let text = error.to_string();
                assert!(text.contains("returns") && text.contains(says), "{text}");
            }
            other => panic!("expected the backend's error, got {:?}", other.map(|_| ())),
        }
    }
    // Across a graph break, the first graph's outputs are checked the same way.
    let f = dynamo::compile(|x: Tensor| {
        let y = x.exp()?;
        let peek = y.sum(0, false)?.sum(0, false)?.item()?;
        y.mul(peek)
    })
    .backend(Returns(|_| Vec::new()));
    let error = f.call(&x).unwrap_err().to_string();
    assert!(error.contains("returned 0 tensor(s)"), "{error}");
}

#[test]
fn compiled_programs_check_what_they_are_given() {
    let x = Tensor::randn(&[2, 3], 0);
    let traced = engine::fx::trace(std::slice::from_ref(&x), |t| Ok(vec![t[0].relu()?])).unwrap();
    for config in [Config::default(), Config { target: TargetKind::Interpreter, ..Config::default() }] {
        let module = engine::inductor::compile_fx(&traced.graph, &config).unwrap();
        for inputs in [vec![], vec![x.clone(), x.clone()], vec![Tensor::randn(&[3, 2], 1)], vec![x.t().unwrap()]] {
            assert!(module.run(&inputs).is_err(), "{} inputs ran", inputs.len());
        }
    }
    let interpreter = Interpreter::new(traced.graph.clone());
    assert!(interpreter.run(&[]).is_err() && interpreter.run(&[Tensor::randn(&[7], 2)]).is_err());
    let exported = engine::fx::export::export(|t| Ok(vec![t[0].exp()?]), std::slice::from_ref(&x)).unwrap();
    assert!(exported.run(&[]).is_err() && exported.run(&[Tensor::randn(&[4], 3)]).is_err());
    assert!(Tensor::from_vec(vec![1.0; 4], &[usize::MAX, 2]).is_err());
    assert!(Tensor::from_vec(vec![1.0; 4], &[1 << 40, 1 << 40]).is_err());
}

/// A reduction over a broadcast view of 2^40 elements is refused at once by every CPU backend, as
/// eager refuses it, rather than looping over every element (the interpreter took hours: the
/// property test above drew it once).
#[test]
fn a_huge_broadcast_input_is_refused_by_every_backend() {
    let huge = Tensor::ones(&[1, 3]).expand(&[1 << 40, 3]).unwrap();
    let sum = |x: Tensor| x.sum(0, false);
    let interpreter = Inductor::with_config(Config { target: TargetKind::Interpreter, ..Config::default() });
    let backends: [Box<dyn Backend>; 4] =
        [Box::new(Eager), Box::new(AotEager), Box::new(Inductor::default()), Box::new(interpreter)];
    for backend in backends {
        let name = backend.name().to_string();
        let started = std::time::Instant::now();
        let error = dynamo::compile(sum).backend(backend).call(&huge).expect_err(&name).to_string();
        assert!(error.contains("more than this machine's"), "{name}: {error}");
        assert!(started.elapsed().as_secs() < 20, "{name} took {:?} to refuse", started.elapsed());
    }
}
