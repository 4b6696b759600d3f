//! Guards and recompiles: each failed guard is named in the `recompiles` log, a size that changes
//! becomes dynamic, and past the recompile limit a graph runs eagerly.

use std::cell::Cell;

use engine::logs::{self, Artifact};
use engine::{Tensor, dynamo};

struct Mlp {
    w1: Tensor,
    w2: Tensor,
}

impl Mlp {
    fn new() -> Mlp {
        Mlp {
            w1: Tensor::randn(&[16, 8], 0).with_name("fc1.weight"),
            w2: Tensor::randn(&[4, 16], 1).with_name("fc2.weight"),
        }
    }

    fn forward(&self, x: &Tensor) -> engine::Result<Tensor> {
        x.linear(&self.w1, None)?.relu()?.linear(&self.w2, None)?.softmax(-1)
    }
}

#[test]
fn a_batch_size_change_names_the_guard_then_the_size_is_dynamic() {
    let mlp = Mlp::new();
    let f = dynamo::compile(|x: Tensor| mlp.forward(&x)).name("mlp");
    let ((), text) = logs::capture(&[Artifact::Recompiles, Artifact::Guards], || {
        for batch in [8, 16, 32] {
            f.call(&Tensor::randn(&[batch, 8], 2)).unwrap();
        }
    });
    insta::assert_snapshot!("batch_size_recompile", text);
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.recompiles, stats.cache_hits), (2, 1, 1));
}

#[test]
fn a_changed_constant_or_path_is_named() {
    let scale = Cell::new(2.0f32);
    let gated = Cell::new(true);
    let f = dynamo::compile(|x: Tensor| {
        let h = x.mul(scale.get())?;
        if gated.get() { h.relu() } else { h.sigmoid() }
    })
    .name("scaled");
    let x = Tensor::randn(&[4], 0);
    let ((), text) = logs::capture(&[Artifact::Recompiles], || {
        f.call(&x).unwrap();
        scale.set(3.0);
        f.call(&x).unwrap();
        gated.set(false);
        f.call(&x).unwrap();
        f.call(&Tensor::randn(&[8], 1).slice(0, 0, 8, 2).unwrap()).unwrap();
    });
    insta::assert_snapshot!("constant_and_path_recompiles", text);
}

#[test]
fn past_the_recompile_limit_graphs_run_eagerly() {
    let scale = Cell::new(0.0f32);
    let f = dynamo::compile(|x: Tensor| x.mul(scale.get())?.exp()).recompile_limit(3);
    let x = Tensor::randn(&[4], 0);
    for step in 0..6 {
        scale.set(step as f32);
        let expected = x.mul(step as f32).unwrap().exp().unwrap().to_vec().unwrap();
        assert_eq!(f.call(&x).unwrap().to_vec().unwrap(), expected);
    }
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.eager_fallbacks), (3, 3));
}

#[test]
fn dynamic_false_compiles_one_graph_per_shape() {
    let mlp = Mlp::new();
    let f = dynamo::compile(|x: Tensor| mlp.forward(&x)).dynamic(false);
    for batch in [2, 3, 4, 2] {
        f.call(&Tensor::randn(&[batch, 8], 2)).unwrap();
    }
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.cache_hits), (3, 1));
}

#[test]
fn a_tensor_from_another_trace_is_refused_with_its_line() {
    let leaked = std::cell::RefCell::new(None);
    let first = dynamo::compile(|x: Tensor| {
        let h = x.exp()?;
        *leaked.borrow_mut() = Some(h.clone());
        Ok(h)
    });
    first.call(&Tensor::randn(&[2], 0)).unwrap();
    let stolen = leaked.borrow().clone().unwrap();
    let (second, line) = (dynamo::compile(|x: Tensor| x.add(&stolen)), line!());
    let err = second.call(&Tensor::randn(&[2], 0)).unwrap_err().to_string();
    assert!(err.contains("belongs to another compiled function's trace"), "{err}");
    assert!(err.contains(&format!("recompiles.rs:{line}")), "{err}");
    let (err, line) = (stolen.to_vec().unwrap_err().to_string(), line!());
    assert!(err.contains("escaped the compiled function that traced it"), "{err}");
    assert!(err.contains(&format!("recompiles.rs:{line}")), "{err}");
}

#[test]
fn mixing_devices_is_refused_with_its_line() {
    let tracer = engine::fx::proxy::Tracer::new();
    let meta = |device| engine::TensorMeta { shape: vec![2], dtype: engine::DType::F32, device };
    let cpu = tracer.placeholder("a", meta(engine::Device::Cpu), vec![1]);
    let gpu = tracer.placeholder("b", meta(engine::Device::Cuda(0)), vec![1]);
    let (err, line) = (cpu.add(&gpu).unwrap_err().to_string(), line!());
    assert!(err.starts_with("add: expected every tensor on one device, got cpu and cuda:0"), "{err}");
    assert!(err.contains(&format!("recompiles.rs:{line}")), "{err}");
}

#[test]
fn a_dtype_change_and_autocast_are_guards_that_name_themselves() {
    use engine::{DType, Device, autocast};
    let mlp = Mlp::new();
    let f = dynamo::compile(|x: Tensor| mlp.forward(&x)).name("mlp");
    let scaled = dynamo::compile(|x: Tensor| x.mul(2.0)?.softmax(-1)).name("scaled");
    let x = Tensor::randn(&[8, 8], 2);
    let ((), text) = logs::capture(&[Artifact::Recompiles], || {
        // The input's dtype is guarded: a bf16 input recompiles, and computes in bf16.
        scaled.call(&x).unwrap();
        assert_eq!(scaled.call(&x.to_dtype(DType::BF16).unwrap()).unwrap().dtype(), DType::BF16);
        f.call(&x).unwrap();
        // Autocast is global state the trace depends on: turning it on recompiles, and the
        // products then run in bf16 while the softmax stays in float32.
        let y = autocast(Device::Cpu, Some(DType::BF16), || f.call(&x)).unwrap();
        assert_eq!(y.dtype(), DType::F32, "softmax is on autocast's float32 list");
        // The same state again is a cache hit.
        autocast(Device::Cpu, Some(DType::BF16), || f.call(&x)).unwrap();
    });
    assert!(text.contains("input 0: dtype mismatch, expected f32, got bf16"), "{text}");
    assert!(text.contains("global state changed: autocast was off, now cpu:bf16"), "{text}");
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.cache_hits), (2, 1), "{text}");
}

/// The input's sizes in the newest graph's guards (`f32[s0, s0]`), read from a `guards` log.
fn guarded_input(log: &str) -> String {
    let line = log.lines().rev().find(|l| l.contains("input 0 `")).unwrap_or_else(|| panic!("no input guard:\n{log}"));
    let meta = line.split_once("): ").unwrap().1;
    meta.split_once(" on ").unwrap().0.to_string()
}

#[test]
fn every_size_that_changed_since_the_first_compile_becomes_dynamic() {
    // Both sizes change at once: Dynamo marks both (its frame state), not only the dim of the first
    // failed guard, and `x + x^T` then ties them into one symbol: one graph for every square size.
    let f = dynamo::compile(|x: Tensor| x.add(&x.transpose(-2, -1)?));
    let ((), log) = logs::capture(&[Artifact::Recompiles, Artifact::Guards], || {
        for n in [5, 6, 7, 3] {
            f.call(&Tensor::randn(&[n, n], 0)).unwrap();
        }
    });
    assert!(log.contains("input 0 dim 0 is dynamic from now on") && log.contains("input 0 dim 1 is dynamic"), "{log}");
    assert!(log.contains("unified s1 = s0"), "{log}");
    assert_eq!(guarded_input(&log), "f32[s0, s0]");
    let stats = f.stats();
    assert_eq!((stats.compiles, stats.cache_hits), (2, 2), "{log}");
}

#[test]
fn a_recompile_for_a_new_dtype_marks_the_sizes_that_changed() {
    use engine::DType;
    let f = dynamo::compile(|x: Tensor| x.relu()?.sum(-1, false));
    let ((), log) = logs::capture(&[Artifact::Recompiles, Artifact::Guards], || {
        f.call(&Tensor::randn(&[2, 5], 0)).unwrap();
        f.call(&Tensor::randn(&[3, 5], 0).to_dtype(DType::BF16).unwrap()).unwrap();
    });
    assert!(log.contains("input 0: dtype mismatch, expected f32, got bf16"), "{log}");
    assert!(log.contains("automatic dynamic shapes: input 0 dim 0 is dynamic from now on"), "{log}");
    assert_eq!(guarded_input(&log), "bf16[s0, 5]");
}

#[test]
fn a_marked_size_an_op_ties_to_a_constant_is_specialized() {
    // The last size went from 4 to 1 and back: it is marked, but broadcasting it against the
    // bias's 4 specializes it, and a size of 1 is never a symbol.
    let bias = Tensor::ones(&[4]);
    let f = dynamo::compile(|x: Tensor| x.add(&bias));
    let ((), log) = logs::capture(&[Artifact::Guards], || {
        for shape in [[3, 4], [5, 1], [6, 4]] {
            f.call(&Tensor::randn(&shape, 0)).unwrap();
        }
    });
    assert!(log.contains("specialized s1 = 4: add: broadcast against a static size"), "{log}");
    let graphs: Vec<&str> = log.lines().filter(|l| l.contains("input 0 `")).collect();
    assert!(graphs[1].contains("f32[s0, 1]") && graphs[2].contains("f32[s0, 4]"), "{log}");
}
