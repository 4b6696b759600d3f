//! Compiled execution against eager execution on random programs: the `eager` backend must be
//! bit-identical (it runs the same kernels), `aot_eager` and `inductor` equal within float
//! tolerance (decompositions and fused kernels round differently). Inductor's properties hold on
//! each CPU codegen target: generated C, and the interpreter of the kernel IR.

mod common;

use common::half_dtypes;
use common::programs::{Program, programs, programs_in};
use engine::backends::{AotEager, Eager, Inductor};
use engine::inductor::{Config, TargetKind};
use engine::op::{Op, UnaryOp};
use engine::{SourceLocation, Tensor, dynamo};
use proptest::prelude::*;

fn eager(program: &Program, inputs: &[Tensor]) -> Vec<Vec<f32>> {
    program.run(inputs).unwrap().iter().map(|t| t.to_vec().unwrap()).collect()
}

/// The unary ops whose CPU kernels and generated C use the engine's vector math.
const VECTOR_MATH: [UnaryOp; 8] = [
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tanh,
    UnaryOp::Erf,
    UnaryOp::Sigmoid,
    UnaryOp::Gelu,
];

/// Inductor on each CPU target: generated C (the default), and the kernel-IR interpreter.
fn inductors() -> [Inductor; 2] {
    [Inductor::default(), Inductor::with_config(Config { target: TargetKind::Interpreter, ..Config::default() })]
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-5 + 1e-4 * y.abs())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn eager_backend_is_bit_identical(program in programs(12), seed in any::<u64>()) {
        let inputs = program.inputs(seed);
        let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).backend(Eager);
        let got: Vec<Vec<f32>> = compiled.call(&inputs).unwrap().iter().map(|t| t.to_vec().unwrap()).collect();
        prop_assert_eq!(got, eager(&program, &inputs));
    }

    #[test]
    fn aot_eager_matches_within_tolerance(program in programs(12), seed in any::<u64>()) {
        let inputs = program.inputs(seed);
        let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).backend(AotEager);
        let got = compiled.call(&inputs).unwrap();
        for (g, e) in got.iter().zip(eager(&program, &inputs)) {
            prop_assert!(close(&g.to_vec().unwrap(), &e), "{program:?}");
        }
    }

    #[test]
    fn inductor_matches_within_tolerance(program in programs(12), seed in any::<u64>()) {
        // Every case runs the C compiler; the tolerance allows for the C library's `expf` and
        // `erff` against Rust's, and for sums reassociated into vector lanes.
        let inputs = program.inputs(seed);
        for inductor in inductors() {
            let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).backend(inductor);
            let got = compiled.call(&inputs).unwrap();
            for (g, e) in got.iter().zip(eager(&program, &inputs)) {
                let (g, e) = (g.to_vec().unwrap(), e);
                let near = g.iter().zip(&e).all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-4 + 1e-3 * y.abs());
                prop_assert!(near, "{program:?}\ngot      {g:?}\nexpected {e:?}");
            }
        }
    }

    #[test]
    fn inductor_matches_in_half_precision(
        (dtype, program) in half_dtypes().prop_flat_map(|d| (Just(d), programs_in(d, 8))),
        seed in any::<u64>(),
    ) {
        // Eager rounds every op's result to the dtype; a fused kernel computes its whole chain in
        // float32 and rounds once, at the store (as Inductor does without
        // `emulate_precision_casts`). So the two differ by the roundings eager makes along the way:
        // a few units in the last place of the dtype per op, grown by the ops after them. The
        // tolerance is torch.testing's for the dtype, widened for a program of up to 8 ops.
        // Both targets: generated C, and the interpreter, whose loads widen and stores round as
        // the C does.
        let inputs = program.inputs(seed);
        let expected = eager(&program, &inputs);
        let tol = 16.0 * dtype.epsilon();
        for inductor in inductors() {
            let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).backend(inductor);
            let got = compiled.call(&inputs).unwrap();
            for (g, e) in got.iter().zip(&expected) {
                prop_assert_eq!(g.dtype(), dtype);
                let g = g.to_vec().unwrap();
                let near = g.iter().zip(e).all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + y.abs()));
                prop_assert!(near, "{dtype}: {program:?}\ngot      {g:?}\nexpected {e:?}");
            }
        }
    }

    #[test]
    fn vector_math_compiled_matches_eager(
        ops in proptest::collection::vec(proptest::sample::select(VECTOR_MATH.to_vec()), 1..6),
        n in prop_oneof![1usize..200, 40_000usize..70_000],
        seed in any::<u64>(),
    ) {
        // Generated C calls the same vector math as the eager kernels (`vm_sin` and `vecmath::sin`
        // agree bit for bit), so a pointwise chain may differ only where a composite (sigmoid,
        // GELU) is decomposed into a different order of operations. Past 2^15 elements the
        // runtime splits the kernel across the pool, which must not change a value either.
        let f = |x: Tensor| ops.iter().try_fold(x, |t, &op| Op::Unary(op).apply(&[(&t).into()], SourceLocation::caller())?.mul(0.9));
        // The interpreter computes those functions with the same vector math.
        let x = Tensor::randn(&[n], seed).mul(3.0).unwrap();
        let expected = f(x.clone()).unwrap().to_vec().unwrap();
        for inductor in inductors() {
            let got = dynamo::compile(f).backend(inductor).call(&x).unwrap().to_vec().unwrap();
            let near = got.iter().zip(&expected).all(|(g, e)| g == e || (g.is_nan() && e.is_nan()) || (g - e).abs() <= 1e-6 * e.abs().max(1.0));
            prop_assert!(near, "{ops:?}: {got:?} vs {expected:?}");
        }
    }

    #[test]
    fn broadcasts_split_inside_rows_match_eager(
        cols in prop_oneof![2usize..40, 40usize..5000],
        elements in 33_000usize..60_000,
        program in 0usize..3,
        seed in any::<u64>(),
    ) {
        // Past 2^15 elements the runtime splits `x` into tasks of 2^14, which start and end
        // inside rows unless the row length divides 2^14: a kernel that reads a bias at the
        // column and a scale at the row (tiled, and for the `tanh` chain in groups) must run only
        // its part of those rows.
        let rows = elements.div_ceil(cols);
        let f = move |t: Vec<Tensor>| -> engine::Result<Tensor> {
            let (x, bias, scale) = (&t[0], &t[1], &t[2]);
            match program {
                0 => x.add(bias)?.gelu(),
                1 => x.mul(scale)?.add(bias)?.tanh()?.tanh(),
                _ => x.sub(scale)?.mul(bias)?.relu(),
            }
        };
        let inputs = vec![
            Tensor::randn(&[rows, cols], seed),
            Tensor::randn(&[cols], seed + 1),
            Tensor::randn(&[rows, 1], seed + 2),
        ];
        let expected = f(inputs.clone()).unwrap().to_vec().unwrap();
        for inductor in inductors() {
            let got = dynamo::compile(f).backend(inductor).call(&inputs).unwrap().to_vec().unwrap();
            prop_assert!(close(&got, &expected), "program {program}, [{rows}, {cols}]");
        }
    }

    #[test]
    fn long_rows_reduce_in_groups_as_eager_does(
        rows in 1usize..5,
        // Past 16 K elements a row's `exp` no longer fits the row buffer and is computed again.
        row_len in prop_oneof![250usize..1100, 16_300usize..16_500],
        program in 0usize..4,
        nan_at in proptest::option::of(0usize..16_500),
        seed in any::<u64>(),
    ) {
        // Rows of 256 elements and more are reduced in four parts with partial results of their
        // own (and, when the length is no multiple of four, a loop over what is left); a NaN in
        // any part must reach the row's maximum. The softmax's `exp` is kept in a row buffer.
        let f = move |x: Tensor| -> engine::Result<Tensor> {
            match program {
                0 => x.softmax(-1),
                1 => x.log_softmax(-1),
                2 => x.sub(&x.amax(-1, true)?)?.exp()?.sum(-1, false),
                _ => x.sub(&x.mean(-1, true)?)?.tanh()?.tanh(),
            }
        };
        let mut values = Tensor::randn(&[rows, row_len], seed).mul(3.0).unwrap().to_vec().unwrap();
        if let Some(i) = nan_at.filter(|&i| i < values.len()) {
            values[i] = f32::NAN;
        }
        let x = Tensor::from_vec(values, &[rows, row_len]).unwrap();
        let expected = f(x.clone()).unwrap().to_vec().unwrap();
        for inductor in inductors() {
            let got = dynamo::compile(f).backend(inductor).call(&x).unwrap().to_vec().unwrap();
            prop_assert!(close(&got, &expected), "program {program}, [{rows}, {row_len}]");
        }
    }

    #[test]
    fn log1p_compiled_matches_eager(n in 1usize..300, seed in any::<u64>()) {
        // `log1p` fused into one generated C kernel with its neighbours, against its eager kernel.
        let f = |x: Tensor| x.abs()?.log1p()?.tanh();
        let x = Tensor::randn(&[n], seed);
        let expected = f(x.clone()).unwrap().to_vec().unwrap();
        for inductor in inductors() {
            let got = dynamo::compile(f).backend(inductor).call(&x).unwrap().to_vec().unwrap();
            prop_assert!(close(&got, &expected), "got {got:?}\nexpected {expected:?}");
        }
    }
}
