//! Compiled execution against eager execution on random programs: the `eager` backend must be
//! bit-identical (it runs the same kernels), `aot_eager` and `inductor` equal within float
//! tolerance (decompositions and fused kernels round differently).

mod common;

use common::programs::{Program, programs};
use engine::backends::{AotEager, Eager, Inductor};
use engine::{Tensor, dynamo};
use proptest::prelude::*;

fn eager(program: &Program, inputs: &[Tensor]) -> Vec<Vec<f32>> {
    program.run(inputs).unwrap().iter().map(|t| t.to_vec().unwrap()).collect()
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.iter().zip(b).all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-5 + 1e-4 * y.abs())
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
        let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).backend(Inductor::default());
        let got = compiled.call(&inputs).unwrap();
        for (g, e) in got.iter().zip(eager(&program, &inputs)) {
            let (g, e) = (g.to_vec().unwrap(), e);
            let near = g.iter().zip(&e).all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-4 + 1e-3 * y.abs());
            prop_assert!(near, "{program:?}\ngot      {g:?}\nexpected {e:?}");
        }
    }

    #[test]
    fn log1p_compiled_matches_eager(n in 1usize..300, seed in any::<u64>()) {
        // `log1p` fused into one generated C kernel with its neighbours, against its eager kernel.
        let f = |x: Tensor| x.abs()?.log1p()?.tanh();
        let x = Tensor::randn(&[n], seed);
        let compiled = dynamo::compile(f).backend(Inductor::default());
        let got = compiled.call(&x).unwrap().to_vec().unwrap();
        let expected = f(x.clone()).unwrap().to_vec().unwrap();
        prop_assert!(close(&got, &expected), "got {got:?}\nexpected {expected:?}");
    }
}
