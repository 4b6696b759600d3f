//! Compile modes (`Mode::Default`, `ReduceOverhead`, `MaxAutotune`): each equal to eager within
//! rounding on random programs, on the CPU here and on a GPU where there is one (GPU tests print
//! `skipped: <reason>` and pass elsewhere); reduce-overhead's fallbacks said once, and its outputs
//! never overwritten by a later call.

mod common;

use common::gpu;
use common::programs::programs;
use engine::dynamo::{self, Mode};
use engine::logs::{self, Artifact};
use engine::{Device, Tensor, backends::Eager};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn close(got: &Tensor, expected: &Tensor) -> Result<(), String> {
    let (g, e) = (got.to_vec().map_err(|e| e.to_string())?, expected.to_vec().map_err(|e| e.to_string())?);
    if got.shape() != expected.shape() {
        return Err(format!("shape {:?}, expected {:?}", got.shape(), expected.shape()));
    }
    for (i, (x, y)) in g.iter().zip(&e).enumerate() {
        if !((x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-4 + 1e-3 * y.abs()) {
            return Err(format!("element {i}: compiled {x}, eager {y}"));
        }
    }
    Ok(())
}

/// Every mode, called three times per program (warm-up, recording, replay), equals eager.
fn modes_equal_eager(device: Device, cases: u32) {
    let mut runner = TestRunner::new(Config { cases, ..Config::default() });
    let result = runner.run(&(programs(10), any::<u64>(), 0..3usize), |(program, seed, m)| {
        let mode = Mode::ALL[m];
        let inputs: Vec<Tensor> = program.inputs(seed).iter().map(|t| t.to(device).unwrap()).collect();
        let expected = program.run(&inputs).unwrap();
        let compiled = dynamo::compile(|xs: Vec<Tensor>| program.run(&xs)).mode(mode);
        for call in 0..3 {
            for (g, e) in compiled.call(&inputs).unwrap().iter().zip(&expected) {
                prop_assert!(close(g, e).is_ok(), "{mode}, call {call}, {program:?}: {:?}", close(g, e));
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn every_mode_equals_eager_on_random_programs_on_cpu() {
    modes_equal_eager(Device::Cpu, 24);
}

#[test]
fn gpu_every_mode_equals_eager_on_random_programs() {
    let Some(device) = gpu() else { return };
    modes_equal_eager(device, 48);
}

#[test]
fn reduce_overhead_on_cpu_says_once_that_it_runs_the_default_plan() {
    let f = dynamo::compile(|x: Tensor| x.mul(2.0)?.relu()).mode(Mode::ReduceOverhead);
    let x = Tensor::randn(&[64], 0);
    let ((), text) = logs::capture(&[Artifact::Cudagraphs], || {
        for _ in 0..3 {
            f.call(&x).unwrap();
        }
    });
    assert_eq!(text.matches("skipping cudagraphs due to cpu device").count(), 1, "{text}");
}

#[test]
fn a_mode_needs_the_inductor_backend() {
    let f = dynamo::compile(|x: Tensor| x.relu()).backend(Eager).mode(Mode::MaxAutotune);
    let error = f.call(&Tensor::randn(&[4], 0)).unwrap_err().to_string();
    assert!(error.contains("mode `max-autotune` needs the inductor backend"), "{error}");
}

#[test]
fn modes_parse_from_pytorch_names() {
    for mode in Mode::ALL {
        assert_eq!(mode.name().parse::<Mode>(), Ok(mode));
    }
    assert!("fast".parse::<Mode>().unwrap_err().contains("reduce-overhead"));
}
