//! The profiler: which launches a profile records (eager ops, compiled kernels, ranges), how
//! `key_averages()` groups and sorts them, and the shape of the Chrome trace it exports. On a GPU
//! the same profile must also carry device times from CUDA events.

use engine::profiler::{self, EventKind, Profiler, SortBy};
use engine::{Device, Result, Tensor, dynamo};
use serde_json::Value;

/// `relu(x + y) * 2`: three eager kernels, one fused compiled kernel.
fn add_relu_mul(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    x.add(y)?.relu()?.mul(2.0)
}

fn inputs(device: Device) -> (Tensor, Tensor) {
    (Tensor::randn(&[4, 8], 0).to(device).unwrap(), Tensor::randn(&[8], 1).to(device).unwrap())
}

#[test]
fn an_eager_profile_lists_each_op_with_its_calls() {
    let (x, y) = inputs(Device::Cpu);
    let ((), profile) = profiler::profile(|| {
        profiler::range("twice", || {
            add_relu_mul(&x, &y)?;
            add_relu_mul(&x, &y)
        })?;
        x.exp().map(drop)
    })
    .unwrap();
    let table = profile.key_averages();
    for (name, calls) in [("add", 2), ("relu", 2), ("mul", 2), ("exp", 1), ("twice", 1)] {
        let row = table.row(name).unwrap_or_else(|| panic!("no row `{name}` in\n{table}"));
        assert_eq!(row.calls, calls, "{name}");
        assert_eq!(row.kind, if name == "twice" { EventKind::Range } else { EventKind::Eager });
    }
    assert_eq!(table.rows().len(), 5, "{table}");
    // The range holds the six launches inside it, and its self time excludes theirs.
    let range = profile.events().iter().position(|e| e.name == "twice").unwrap();
    let nested: Vec<&str> =
        profile.events().iter().filter(|e| e.parent == Some(range)).map(|e| e.name.as_str()).collect();
    assert_eq!(nested, ["add", "relu", "mul", "add", "relu", "mul"]);
    let twice = &profile.events()[range];
    assert!(twice.self_host_time < twice.host_time);
    let printed = table.to_string();
    assert!(printed.contains("self host") && printed.contains("twice"), "{printed}");
}

#[test]
fn a_compiled_profile_lists_the_fused_kernel_and_no_eager_op() {
    let (x, y) = inputs(Device::Cpu);
    let compiled = dynamo::compile(|(x, y): (Tensor, Tensor)| add_relu_mul(&x, &y));
    compiled.call((&x, &y)).unwrap();
    let ((), profile) = profiler::profile(|| {
        compiled.call((&x, &y))?;
        compiled.call((&x, &y)).map(drop)
    })
    .unwrap();
    let table = profile.key_averages();
    let kernels: Vec<(&str, EventKind, usize)> =
        table.rows().iter().map(|r| (r.name.as_str(), r.kind, r.calls)).collect();
    assert_eq!(kernels, [("poi_fused_add_relu_mul_0", EventKind::Compiled, 2)], "{table}");
}

#[test]
fn compiled_matmuls_are_extern_kernels() {
    let (x, w) = (Tensor::randn(&[4, 8], 0), Tensor::randn(&[3, 8], 1));
    let compiled = dynamo::compile(|x: Tensor| x.linear(&w, None)?.relu());
    compiled.call(&x).unwrap();
    let ((), profile) = Profiler::new().record_shapes(true).run(|| compiled.call(&x).map(drop)).unwrap();
    let matmul = profile.events().iter().find(|e| e.kind == EventKind::Extern).expect("an extern matmul");
    assert_eq!(matmul.name, "matmul");
    assert_eq!(matmul.shapes.as_deref(), Some(&[vec![4, 8], vec![8, 3]][..]));
}

#[test]
fn shapes_are_recorded_on_request_and_group_rows() {
    let (x, y) = inputs(Device::Cpu);
    let big = Tensor::randn(&[2, 8], 2);
    let run = || -> Result<()> {
        x.add(&y)?;
        big.add(&y)?;
        Ok(())
    };
    let ((), plain) = profiler::profile(run).unwrap();
    assert!(plain.events().iter().all(|e| e.shapes.is_none()));
    let ((), shaped) = Profiler::new().record_shapes(true).run(|| profiler::range("both", run)).unwrap();
    assert_eq!(shaped.key_averages().row("add").unwrap().calls, 2);
    let grouped = shaped.key_averages_by_input_shape();
    assert_eq!(grouped.row("both").map(|r| r.shapes.clone()), Some(None), "a range has no input shapes");
    let mut shapes: Vec<Vec<Vec<usize>>> = grouped.rows().iter().filter_map(|r| r.shapes.clone()).collect();
    shapes.sort();
    assert_eq!(shapes, [vec![vec![2, 8], vec![8]], vec![vec![4, 8], vec![8]]]);
    assert!(grouped.to_string().contains("[[4, 8], [8]]"));
}

#[test]
fn tables_sort_by_any_column() {
    let x = Tensor::randn(&[64, 64], 0);
    let ((), profile) = profiler::profile(|| {
        for _ in 0..3 {
            x.relu()?;
        }
        x.matmul(&x).map(drop)
    })
    .unwrap();
    let by_calls = profile.key_averages().sort_by(SortBy::Calls);
    assert_eq!(by_calls.rows()[0].name, "relu");
    for column in [SortBy::HostTotal, SortBy::SelfHostAverage, SortBy::DeviceAverage] {
        let rows = profile.key_averages().sort_by(column);
        assert_eq!(rows.rows().len(), 2);
    }
    let by_host = profile.key_averages().sort_by(SortBy::HostTotal);
    assert!(by_host.rows()[0].host_total >= by_host.rows()[1].host_total);
}

#[test]
fn ties_are_broken_by_name_then_kind() {
    let (x, w) = (Tensor::randn(&[16, 16], 0), Tensor::randn(&[16, 16], 1));
    let f = |x: Tensor| x.matmul(&w)?.relu();
    let compiled = dynamo::compile(f);
    compiled.call(&x).unwrap();
    // One eager `matmul` and one library `matmul` from the compiled plan: the same name and calls.
    let ((), profile) = profiler::profile(|| {
        f(x.clone())?;
        compiled.call(&x).map(drop)
    })
    .unwrap();
    let rows = profile.key_averages().sort_by(SortBy::Calls);
    let matmuls: Vec<EventKind> = rows.rows().iter().filter(|r| r.name == "matmul").map(|r| r.kind).collect();
    assert_eq!(matmuls, [EventKind::Eager, EventKind::Extern]);
}

#[test]
fn the_chrome_trace_has_complete_events_on_separate_tracks() {
    let device = Device::cuda_if_available();
    let (x, y) = inputs(device);
    let ((), profile) = profiler::profile(|| profiler::range("step", || add_relu_mul(&x, &y).map(drop))).unwrap();
    let path = std::env::temp_dir().join(format!("engine-profiler-trace-{}.json", std::process::id()));
    profile.export_chrome_trace(&path).unwrap();
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let events = trace["traceEvents"].as_array().expect("traceEvents is an array");
    let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for e in &complete {
        assert!(e["name"].is_string() && e["ts"].is_f64() && e["dur"].as_f64().unwrap() >= 0.0, "{e}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
    }
    let on = |pid: u64| complete.iter().filter(|e| e["pid"] == pid).map(|e| e["name"].as_str().unwrap()).collect();
    let host: Vec<&str> = on(0);
    assert_eq!(host, ["step", "add", "relu", "mul"]);
    let named: Vec<&str> =
        events.iter().filter(|e| e["ph"] == "M").map(|e| e["args"]["name"].as_str().unwrap()).collect();
    match device {
        // The GPU's kernels on their own track, with device times from CUDA events.
        Device::Cuda(_) => {
            assert_eq!(on(1), ["add", "relu", "mul"]);
            assert_eq!(named, ["host", "cuda:0"]);
            assert!(profile.events().iter().filter(|e| e.kind == EventKind::Eager).all(|e| e.device_span.is_some()));
            assert!(profile.key_averages().to_string().contains("device total"));
        }
        Device::Cpu => {
            assert_eq!(named, ["host"]);
            assert!(profile.events().iter().all(|e| e.device_span.is_none()));
        }
    }
}

#[test]
fn one_profile_per_thread_and_a_dropped_guard_discards() {
    let guard = Profiler::new().start().unwrap();
    let second = Profiler::new().start();
    assert!(second.is_err_and(|e| e.to_string().contains("already running")));
    drop(guard);
    let x = Tensor::randn(&[4], 0);
    x.relu().unwrap();
    let guard = Profiler::new().start().unwrap();
    x.neg().unwrap();
    let profile = guard.stop().unwrap();
    let names: Vec<&str> = profile.events().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["neg"], "only launches made while recording");
    // Another thread's launches are not this thread's profile.
    let ((), profile) = profiler::profile(|| {
        std::thread::spawn(move || x.exp().map(drop)).join().unwrap()?;
        Ok(())
    })
    .unwrap();
    assert!(profile.events().is_empty());
}
