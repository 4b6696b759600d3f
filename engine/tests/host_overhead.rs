//! `host_overhead`: the host time set is paid where PyTorch's interpreter would pay it, per eager
//! op and per compiled graph call, and a compiled call pays no eager op's cost. Times here are
//! lower bounds only (a spin lasts at least as long as asked), so a loaded machine cannot fail
//! them.

use std::time::{Duration, Instant};

use engine::backends::Inductor;
use engine::host_overhead::{self, HostOverhead, Setting};
use engine::profiler::{self, EventKind};
use engine::{Result, Tensor, dynamo};

fn took(f: impl FnOnce() -> Result<Tensor>) -> Result<Duration> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
}

#[test]
fn each_eager_op_and_each_graph_call_pays_what_is_set() -> Result<()> {
    let x = Tensor::randn(&[16], 0);
    let compiled = dynamo::compile(|x: Tensor| x.mul(2.0)?.add(1.0)?.relu()).backend(Inductor::default());
    compiled.call(&x)?;

    host_overhead::set(Setting::Fixed(HostOverhead { eager_op: Duration::from_millis(4), ..HostOverhead::NONE }));
    assert!(took(|| x.mul(2.0)?.add(1.0))? >= Duration::from_millis(8), "two eager ops pay 4 ms each");
    // The compiled call launches one fused kernel and no eager op.
    let (_, profile) = profiler::profile(|| compiled.call(&x))?;
    assert!(profile.events().iter().all(|e| e.kind != EventKind::Eager), "{:?}", profile.events());

    host_overhead::set(Setting::Fixed(HostOverhead { graph_call: Duration::from_millis(6), ..HostOverhead::NONE }));
    assert!(took(|| compiled.call(&x))? >= Duration::from_millis(6), "a compiled call pays its graph's call");
    let broken = dynamo::compile(|x: Tensor| {
        let y = x.mul(2.0)?;
        dynamo::graph_break()?;
        y.add(1.0)
    })
    .backend(Inductor::default());
    broken.call(&x)?;
    assert!(took(|| broken.call(&x))? >= Duration::from_millis(12), "two graphs, two calls");

    host_overhead::set(Setting::Off);
    assert_eq!(host_overhead::get(), Setting::Off);
    Ok(())
}
