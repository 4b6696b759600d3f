//! Inductor on the CPU: fusion decisions, kernel names, the call plan, generated code snapshots
//! (C and CUDA C, which needs no GPU to print), and compiled-equals-eager on random programs.

use std::sync::{Arc, Mutex};

use engine::backends::{Backend, CompiledGraph, Inductor};
use engine::fx::{Graph, Interpreter};
use engine::inductor::scheduler::can_fuse;
use engine::inductor::{Config, Mode};
use engine::{DType, Device, Result, Tensor, dynamo};

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
        ("vector_math_chain", models::vector_math_chain, vec![Tensor::randn(&[1000], 0)]),
        (
            "bias_tanh_chain",
            models::bias_tanh_chain,
            vec![Tensor::randn(&[3, 300], 0), Tensor::randn(&[300], 1), Tensor::randn(&[3, 1], 2)],
        ),
        // Half precision: loads widen to float and stores round, in the printed code.
        (
            "add_relu_mul_bf16",
            models::add_relu_mul,
            in_dtype(DType::BF16, vec![Tensor::randn(&[1000], 0), Tensor::randn(&[1000], 1)]),
        ),
        ("softmax_bf16", models::softmax, in_dtype(DType::BF16, vec![Tensor::randn(&[64, 4096], 0)])),
        (
            "layer_norm_f16",
            models::layer_norm,
            in_dtype(DType::F16, vec![Tensor::randn(&[32, 1024], 0), Tensor::ones(&[1024]), Tensor::zeros(&[1024])]),
        ),
        ("mlp_bf16", models::mlp, in_dtype(DType::BF16, mlp_inputs())),
    ]
}

/// The tensors converted to `dtype`, names kept.
fn in_dtype(dtype: DType, tensors: Vec<Tensor>) -> Vec<Tensor> {
    tensors
        .into_iter()
        .map(|t| {
            let converted = t.to_dtype(dtype).unwrap();
            match t.name() {
                Some(name) => converted.with_name(name),
                None => converted,
            }
        })
        .collect()
}

#[test]
fn the_loops_marked_for_vector_code_vectorize() {
    // GCC reports every loop it vectorizes (`-fopt-info-vec-optimized`, with the location of a
    // statement inside the loop); every loop under `#pragma omp simd` must be among them, but
    // those that ask for no vector code (`simdlen(1)`) and those that divide an index. A select GCC turns into a branch, or a
    // vector-math call it stops inlining, leaves a loop scalar and 5-10 times slower, with the
    // same results: only this catches it.
    let cc = engine::codecache::CCompiler::detect().unwrap();
    let dir = std::env::temp_dir().join(format!("engine-vectorized-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, model, inputs) in snapshot_cases() {
        let graph = capture(model, &inputs);
        let code = engine::inductor::generate(&graph, Device::Cpu, &Config::default()).unwrap();
        let source = code.module_source(&engine::inductor::codegen::c::prelude());
        let path = dir.join(format!("{name}.c"));
        std::fs::write(&path, &source).unwrap();
        let output = std::process::Command::new(cc.program())
            .args(cc.flags())
            .args(["-fopt-info-vec-optimized", "-o"])
            .arg(dir.join(format!("{name}.so")))
            .arg(&path)
            .output()
            .unwrap();
        if !output.status.success() {
            eprintln!("{} does not report vectorized loops (not GCC?): not checked", cc.program());
            return;
        }
        let report = String::from_utf8_lossy(&output.stderr);
        let vectorized: Vec<usize> = report
            .lines()
            .filter(|l| l.contains("loop vectorized"))
            .filter_map(|l| l.strip_prefix(&format!("{}:", path.display()))?.split(':').next()?.parse().ok())
            .collect();
        let lines: Vec<&str> = source.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("#pragma omp simd") || line.contains("simdlen(1)") {
                continue;
            }
            // The loop's body: from its `for` (the next line) to the brace closing it.
            let indent = lines[i + 1].len() - lines[i + 1].trim_start().len();
            let end = (i + 2..lines.len())
                .find(|&j| {
                    lines[j].len() > indent
                        && lines[j][..indent].trim().is_empty()
                        && lines[j][indent..].starts_with('}')
                })
                .unwrap();
            // An index divided by a size that is no power of two (a transposed read) is computed
            // lane by lane: GCC has no vector integer division. A known limit, not checked.
            let divided = lines[i + 1..end].iter().any(|l| {
                l.split('[').skip(1).any(|index| {
                    let index = index.split(']').next().unwrap_or("");
                    index.contains(" / ") || index.contains(" % ")
                })
            });
            if divided {
                continue;
            }
            // Source lines count from 1; GCC reports a loop at a statement inside it or, for some
            // loops (a reduction over f16 loads), at its pragma.
            let inside = (i + 1..=end + 1).any(|n| vectorized.contains(&n));
            assert!(inside, "{name}: the loop at line {} is not vectorized:\n{}\n{report}", i + 2, lines[i + 1]);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
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
fn split_reduction_snapshots() {
    // Reductions split in two (`inductor::split_reductions`): on the GPU the target splits these
    // by itself (for an H100's 132 multiprocessors where there is no GPU); the C is printed with
    // the split forced, as the CPU never splits by itself.
    let forced = Config { split_reductions: engine::inductor::SplitReductions::Always, ..Config::default() };
    let cases: [(&str, Model, Vec<Tensor>); 2] = [
        ("split_bias_grad", models::bias_grad, vec![Tensor::randn(&[4096, 512], 0), Tensor::randn(&[4096, 512], 1)]),
        ("split_mse_loss", models::mse_loss, vec![Tensor::randn(&[4096, 512], 2), Tensor::randn(&[4096, 512], 3)]),
    ];
    for (name, model, inputs) in cases {
        let graph = capture(model, &inputs);
        let c = engine::inductor::generate(&graph, Device::Cpu, &forced).unwrap();
        let cuda = engine::inductor::generate(&graph, Device::Cuda(0), &Config::default()).unwrap();
        insta::assert_snapshot!(format!("{name}_c"), c.to_string());
        insta::assert_snapshot!(format!("{name}_cuda"), cuda.to_string());
        // The kernel IR both printers start from: the partials' loops over `[parts, chunk]`.
        let ir: Vec<String> =
            engine::inductor::kernels(&graph, &forced).unwrap().iter().map(ToString::to_string).collect();
        insta::assert_snapshot!(format!("{name}_kernel_ir"), ir.join("\n"));
    }
}

#[test]
fn tiled_kernels_compute_ranges_that_start_and_end_inside_rows() {
    // The runtime calls a kernel's range entry on tasks of 2^14 elements, which start and end
    // inside rows of 3072 (say): the first and last rows of a range run only their part. Each
    // model here is one tiled kernel; its range entry is called on the pieces of several splits
    // of `x` (pieces of one element, empty ones, pieces across rows) and must compute what eager
    // does.
    type RangeFn = unsafe extern "C" fn(*const *mut f32, i64, i64);
    let gelu: Model = |t| t[0].add(&t[1])?.gelu();
    let tanh_chain: Model = |t| t[0].add(&t[1])?.tanh()?.tanh();
    let row_scale: Model = |t| t[0].mul(&t[2])?.add(&t[1]);
    let cases = [(gelu, 5, 37), (gelu, 3, 64), (tanh_chain, 4, 300), (tanh_chain, 3, 13), (row_scale, 6, 24)];
    let cc = engine::codecache::CCompiler::detect().unwrap();
    for (model, rows, cols) in cases {
        let inputs = vec![Tensor::randn(&[rows, cols], 1), Tensor::randn(&[cols], 2), Tensor::randn(&[rows, 1], 3)];
        let kernels = engine::inductor::kernels(&capture(model, &inputs), &Config::default()).unwrap();
        let [kernel] = kernels.as_slice() else { panic!("one kernel, got {}", kernels.len()) };
        let source = engine::inductor::codegen::c::kernel(kernel);
        assert!(source.contains(&format!("[row * {cols} + col]")), "not tiled:\n{source}");
        let library = cc.compile(&engine::inductor::codegen::c::module(&kernels)).unwrap();
        let name = format!("{}{}", kernel.name, engine::inductor::codegen::c::RANGE_SUFFIX);
        // SAFETY: every range entry point has this signature.
        let range = unsafe { library.get::<RangeFn>(&name) }.unwrap();
        let expected = model(inputs.clone()).unwrap().to_vec().unwrap();
        let n = rows * cols;
        let splits: [Vec<usize>; 4] = [
            vec![0, n],
            vec![0, 1, cols - 1, cols + 1, cols + 1, 2 * cols + 5, n - 1, n],
            (0..n).step_by(7).chain([n]).collect(),
            (0..n).step_by(cols + 3).chain([n]).collect(),
        ];
        let mut data: Vec<Vec<f32>> = inputs.iter().map(|t| t.to_vec().unwrap()).collect();
        for split in splits {
            for piece in split.windows(2) {
                let (x0, x1) = (piece[0], piece[1]);
                // Elements outside the piece must stay as they were: another task owns them.
                let mut out = vec![f32::NAN; n];
                let args: Vec<*mut f32> = kernel
                    .args
                    .iter()
                    .map(|arg| match arg.buffer {
                        engine::inductor::ir::BufferName::Input(i) => data[i].as_mut_ptr(),
                        engine::inductor::ir::BufferName::Node(_) => out.as_mut_ptr(),
                    })
                    .collect();
                // SAFETY: the buffers have the shapes the kernel was generated for, and the
                // piece lies in 0..n.
                unsafe { range(args.as_ptr(), x0 as i64, x1 as i64) };
                let what = format!("[{rows}, {cols}], x in {x0}..{x1}");
                close(&out[x0..x1], &expected[x0..x1]).unwrap_or_else(|e| panic!("{what}: {e}\n{source}"));
                let outside = out[..x0].iter().chain(&out[x1..]).all(|v| v.is_nan());
                assert!(outside, "{what}: wrote outside the range\n{source}");
            }
        }
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
    let lowered = engine::inductor::lowering::lower(&decomposed, &engine::fx::SymBindings::new()).unwrap();
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
    // `tanh`, not `relu`: a ReLU after a matmul folds into the GEMM, leaving no kernel between.
    let f = |x: &Tensor| x.matmul(&w)?.tanh()?.matmul(&w)?.tanh();
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

/// GCC 12 at -O3 once turned this program's short max-reduction rows into wrong numbers (the
/// row loop fully unrolled, the loop around it vectorised with masked loads).
#[test]
fn short_max_rows_with_a_select_survive_gcc() {
    let f = |t: Vec<Tensor>| -> Result<Vec<Tensor>> {
        let x = &t[0];
        let picked = x.gt(0.0)?.where_(&x.neg()?, &x.softmax(-1)?)?;
        Ok(vec![picked.sub(&picked.amax(1, true)?)?, x.neg()?.mean(0, false)?])
    };
    let inputs = vec![Tensor::uniform(&[3, 4], -2.0, 2.0, 89)];
    let got = dynamo::compile(f).backend(Inductor::default()).call(&inputs).unwrap();
    for (g, e) in got.iter().zip(f(inputs.clone()).unwrap()) {
        close(&g.to_vec().unwrap(), &e.to_vec().unwrap()).unwrap();
    }
}

#[test]
fn one_library_serves_every_batch_size_of_a_dynamic_graph() {
    let inductor = Inductor::default();
    let w = Tensor::randn(&[24], 5);
    let f = |x: Tensor| x.add(&w)?.relu()?.softmax(-1);
    let model = dynamo::compile(f).dynamic(true).backend(inductor.clone());
    for batch in [3, 8, 5, 130] {
        let x = Tensor::randn(&[batch, 24], batch as u64);
        close(&model.call(&x).unwrap().to_vec().unwrap(), &f(x.clone()).unwrap().to_vec().unwrap()).unwrap();
    }
    assert_eq!(model.stats().compiles, 1);
    assert_eq!(inductor.output_codes()[0].kernel_names(), ["per_fused_add_relu_amax_sub_exp_sum_div_0"]);
}

#[test]
fn a_dynamic_inner_size_is_baked_in_per_size() {
    // The column count is a stride inside the index, so each size gets its own source.
    let f = |x: Tensor| x.t()?.exp();
    let model = dynamo::compile(f).dynamic(true).backend(Inductor::default());
    for (rows, cols) in [(3, 4), (3, 7), (5, 9)] {
        let x = Tensor::randn(&[rows, cols], 1);
        close(&model.call(&x).unwrap().to_vec().unwrap(), &f(x.clone()).unwrap().to_vec().unwrap()).unwrap();
    }
}

#[test]
fn custom_ops_fuse_into_kernels() {
    let soft_clip = engine::dynamo::CustomOp::elementwise("inductor_test::soft_clip", 1)
        .c_source("float soft_clip(float x) { return x / (1.0f + fabsf(x)); }")
        .register()
        .unwrap();
    let inductor = Inductor::default();
    let f = |x: Tensor| soft_clip.call(&[&x.mul(3.0)?])?.add(&x);
    let model = dynamo::compile(f).backend(inductor.clone());
    let x = Tensor::randn(&[1000], 2);
    close(&model.call(&x).unwrap().to_vec().unwrap(), &f(x.clone()).unwrap().to_vec().unwrap()).unwrap();
    let code = &inductor.output_codes()[0];
    // The op's own underscore is dropped, so the name splits at `_` into exactly its parts.
    assert_eq!(code.kernel_names(), ["poi_fused_mul_softclip_add_0"]);
    assert!(code.kernels[0].source.contains("soft_clip(tmp"), "{code}");
    assert!(code.to_string().contains("float soft_clip(float x)"), "{code}");
}

#[test]
fn cond_runs_eagerly_between_kernels() {
    let inductor = Inductor::default();
    let f = |x: Tensor| {
        let h = x.mul(2.0)?;
        let positive = h.sum_all()?.gt(0.0)?;
        dynamo::cond(&positive, |hs| hs[0].exp(), |hs| hs[0].neg(), &[&h])?.add(1.0)
    };
    let model = dynamo::compile(f).backend(inductor.clone());
    for seed in 0..4 {
        let x = Tensor::randn(&[4, 5], seed);
        close(&model.call(&x).unwrap().to_vec().unwrap(), &f(x.clone()).unwrap().to_vec().unwrap()).unwrap();
    }
    let call = &inductor.output_codes()[0].call;
    assert!(call.contains("fallback::cond("), "{call}");
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

#[test]
fn a_bias_and_relu_fold_into_every_cpu_gemm_in_every_mode() {
    let check = |shape: &[usize], transposed: bool, mode: Mode| {
        let x = Tensor::randn(shape, 0);
        let w = Tensor::randn(&[24, 40], 1);
        let (b, w_rows) = (Tensor::randn(&[24], 2), w.t().unwrap().contiguous().unwrap());
        let f = |x: &Tensor| {
            let product = if transposed { x.linear(&w, None)? } else { x.matmul(&w_rows)? };
            product.add(&b)?.relu()
        };
        let inductor = Inductor::default();
        let model = dynamo::compile(|x: Tensor| f(&x)).backend(inductor.clone()).mode(mode);
        let got = model.call(&x).unwrap().to_vec().unwrap();
        close(&got, &f(&x).unwrap().to_vec().unwrap()).unwrap_or_else(|e| panic!("{shape:?} {mode:?}: {e}"));
        let code = inductor.output_codes()[0].to_string();
        let folded = code.contains("epilogue fused into the GEMM") && !code.contains("poi_");
        assert!(folded, "{shape:?} {mode:?}:\n{code}");
    };
    // One shape for each of the CPU's product kernels: a few rows (the matrix-vector loop, for a
    // weight not transposed), tens (dot tiles), hundreds split by rows (dot tiles), a batch of
    // rows folded into one product, and one past the tiles (the packing GEMM).
    let cases: [(&[usize], bool); 5] =
        [(&[3, 40], false), (&[37, 40], true), (&[300, 40], true), (&[4, 90, 40], true), (&[700, 40], true)];
    for (shape, transposed) in cases {
        check(shape, transposed, Mode::Default);
    }
    // The CPU folds in every mode (on a GPU only max-autotune does, where cuBLASLt can).
    for mode in [Mode::ReduceOverhead, Mode::MaxAutotune] {
        check(&[37, 40], true, mode);
    }
}

/// The engine's own C printer with a classic mistake: every loop runs one element too far.
fn one_past_the_end(kernel: &engine::inductor::kernel::Kernel) -> String {
    engine::inductor::codegen::c::kernel(kernel).replace("x < x1", "x <= x1")
}

/// Guarded buffers (`Config::guard_buffers`): the engine's own kernels run on guarded copies
/// exactly as they run without (every snapshot model, half precision among them), and a kernel
/// that writes one element past the end of its output is an error naming the kernel and the
/// element, in every dtype, where unguarded it would corrupt memory silently.
#[test]
fn guarded_buffers_catch_a_write_past_the_end() {
    let compiled = |guard_buffers: bool, model: Model, inputs: &[Tensor]| {
        let inductor = Inductor::with_config(Config { guard_buffers, ..Config::default() });
        dynamo::compile(|t: Vec<Tensor>| model(t)).backend(inductor).call(inputs).unwrap().to_vec().unwrap()
    };
    for (name, model, inputs) in snapshot_cases() {
        let (guarded, unguarded) = (compiled(true, model, &inputs), compiled(false, model, &inputs));
        let same = guarded.iter().zip(&unguarded).all(|(g, u)| g.to_bits() == u.to_bits());
        assert!(same && guarded.len() == unguarded.len(), "{name}: guarded runs differ from unguarded ones");
    }
    let printers = engine::inductor::Printers { pointwise_c: Some(one_past_the_end), ..Default::default() };
    let pointwise = |t: Vec<Tensor>| t[0].add(&t[1])?.relu()?.mul(2.0);
    for dtype in [DType::F32, DType::BF16] {
        let inputs = in_dtype(dtype, vec![Tensor::randn(&[7, 13], 0), Tensor::randn(&[7, 13], 1)]);
        let broken = Inductor::with_config(Config { printers, guard_buffers: true, ..Config::default() });
        let error = dynamo::compile(pointwise).backend(broken).call(&inputs).unwrap_err().to_string();
        assert!(
            error.contains("wrote outside a buffer, past its end") && error.contains("wrote element 91 "),
            "{dtype}: {error}"
        );
    }
}

#[test]
fn a_conversion_that_only_feeds_its_store_rounds_once() {
    // Rounding twice to one dtype is rounding once: a `to_dtype` whose value is only stored into
    // a buffer of that dtype is the store's own rounding, not a round trip through float before it.
    let x = Tensor::randn(&[1000], 0);
    let stored_only = dynamo::explain(|x: Tensor| x.mul(2.0)?.to_dtype(DType::BF16)).call(&x).unwrap().graphs;
    // Here the rounded value is also computed with, so it is rounded and widened in the kernel.
    let also_used = |x: Tensor| -> Result<(Tensor, Tensor)> {
        let y = x.mul(2.0)?.to_dtype(DType::F8E4M3)?;
        let z = y.to_dtype(DType::F32)?.add(&x)?;
        Ok((y, z))
    };
    let also_used = dynamo::explain(also_used).call(&x).unwrap().graphs;
    for device in [Device::Cpu, Device::Cuda(0)] {
        let code = engine::inductor::generate(&stored_only[0], device, &Config::default()).unwrap().to_string();
        assert!(code.contains("float_to_bf16(") && !code.contains("bf16_to_float(float_to_bf16("), "{code}");
        let code = engine::inductor::generate(&also_used[0], device, &Config::default()).unwrap();
        // One kernel stores the rounded value and the sum computed from it.
        assert_eq!(code.kernel_names(), ["poi_fused_mul_todtype_add_0"]);
        assert!(code.to_string().contains("f8e4m3_to_float(float_to_f8e4m3("), "{code}");
    }
}

#[test]
fn a_bf16_row_rounded_whole_matches_eager_rounding() {
    // A reduction's loop that stores a whole bf16 row computes it into floats and rounds the row
    // at once (`floats_to_bf16`: AVX-512 BF16's instruction where the C compiler targets it).
    // Its results must be eager's: ties to even, overflow to infinity, infinities, NaN. A row of
    // 40 ends in a part-vector. `y` sums to zero, so the stored value is `x` itself.
    let edges = [
        1.0,
        1.0 + 1.0 / 256.0,
        1.0 + 3.0 / 256.0,
        1.0 + 1.0 / 256.0 + 1.0 / 65536.0,
        -(1.0 + 3.0 / 256.0),
        f32::MAX,
        -f32::MAX,
        3.3895314e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        0.0,
        f32::MIN_POSITIVE,
        1.0e-39,
        -1.0e-45,
        70000.0,
        65504.0,
    ];
    let values: Vec<f32> =
        (0..4 * 40).map(|i| edges[(i * 7) % edges.len()] * if i % 3 == 0 { 1.0 } else { -1.0 }).collect();
    let x = Tensor::from_vec(values, &[4, 40]).unwrap();
    let y = Tensor::zeros(&[4, 40]);
    let f = |t: Vec<Tensor>| t[0].add(&t[1].sum(-1, true)?.mul(0.0)?)?.to_dtype(DType::BF16);
    let inputs = [x.clone(), y];
    let graphs = dynamo::explain(f).call(&inputs).unwrap().graphs;
    let code = engine::inductor::generate(&graphs[0], Device::Cpu, &Config::default()).unwrap().to_string();
    assert!(code.contains("floats_to_bf16(out_ptr0 + x * 40, out_ptr0_row, 40);"), "{code}");
    let eager = f(inputs.to_vec()).unwrap().to_vec().unwrap();
    let compiled = dynamo::compile(f).backend(Inductor::default()).call(&inputs).unwrap().to_vec().unwrap();
    for ((e, c), v) in eager.iter().zip(&compiled).zip(x.to_vec().unwrap()) {
        if v.is_nan() {
            assert!(c.is_nan(), "{v} rounded to {c}");
        } else if v != 0.0 && v.abs() < f32::MIN_POSITIVE {
            // Subnormals: AVX-512 BF16 flushes them to zero (as eager does on such a CPU, for
            // whole vectors); the portable rounding keeps them.
            assert!(c.to_bits() == e.to_bits() || *c == 0.0, "{v}: eager {e}, compiled {c}");
        } else {
            assert_eq!(c.to_bits(), e.to_bits(), "{v}: eager {e}, compiled {c}");
        }
    }
}
