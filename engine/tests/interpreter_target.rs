//! Inductor's interpreter target where there is no C compiler at all: `CC` names a program that
//! does not exist, so the C target fails with a set-up error naming the fix, while the interpreter
//! compiles and runs the same graphs (static, dynamic, from the FX graph cache) with eager's
//! answers. One test, so that nothing in this process probes the C compiler before `CC` is set.

use engine::backends::Inductor;
use engine::inductor::modes::fx_graph_cache;
use engine::inductor::{Config, TargetKind};
use engine::{Error, Tensor, dynamo};

fn close(got: &[f32], expected: &[f32]) {
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!((g - e).abs() <= 1e-5 + 1e-4 * e.abs(), "element {i}: interpreted {g}, eager {e}");
    }
}

#[test]
fn compiled_graphs_run_on_the_interpreter_without_a_c_compiler() {
    // A disk cache of this process's own, so that the first compile is a miss and the second a hit.
    let cache = std::env::temp_dir().join(format!("engine-interpreter-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    // SAFETY: the only test of this binary, so no other thread reads the environment meanwhile.
    unsafe {
        std::env::set_var("CC", "/nonexistent/cc");
        std::env::set_var("ENGINE_CACHE_DIR", &cache);
    }
    let w = Tensor::randn(&[16, 8], 0).with_name("w");
    let b = Tensor::randn(&[16], 1).with_name("b");
    let model = |x: Tensor| x.linear(&w, Some(&b))?.gelu()?.softmax(-1)?.sum(0, false);
    let x = Tensor::randn(&[5, 8], 2);
    let expected = model(x.clone()).unwrap().to_vec().unwrap();

    let native = dynamo::compile(model).backend(Inductor::default()).fullgraph(true);
    let error = native.call(&x).unwrap_err();
    assert!(matches!(error, Error::Setup { .. }), "{error}");
    assert!(error.to_string().contains("TargetKind::Interpreter"), "{error}");

    let interpreter = Inductor::with_config(Config { target: TargetKind::Interpreter, ..Config::default() });
    let hits = fx_graph_cache::counters().hits;
    for _ in 0..2 {
        // The second compile is served by the FX graph cache: the module is parsed again.
        let compiled = dynamo::compile(model).backend(interpreter.clone());
        close(&compiled.call(&x).unwrap().to_vec().unwrap(), &expected);
    }
    assert_eq!(fx_graph_cache::counters().hits, hits + 1, "the second compile is a cache hit");
    let code = interpreter.output_codes()[0].to_string();
    assert!(code.contains("kernel(s) in kernel IR for cpu") && code.contains("for x in 0.."), "{code}");

    let dynamic = dynamo::compile(model).backend(interpreter).dynamic(true);
    for rows in [3, 7] {
        let x = Tensor::randn(&[rows, 8], rows as u64);
        close(&dynamic.call(&x).unwrap().to_vec().unwrap(), &model(x.clone()).unwrap().to_vec().unwrap());
    }

    let on_gpu = engine::inductor::generate(
        &engine::fx::trace(std::slice::from_ref(&x), |t| Ok(vec![t[0].relu()?])).unwrap().graph,
        engine::Device::Cuda(0),
        &Config { target: TargetKind::Interpreter, ..Config::default() },
    );
    assert!(on_gpu.unwrap_err().to_string().contains("the interpreter target runs on the CPU"));
    let _ = std::fs::remove_dir_all(&cache);
}
