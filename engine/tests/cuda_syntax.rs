//! Generated CUDA C through a C++ compiler's syntax check, against stand-in declarations of the
//! CUDA built-ins it uses, so that CI machines without a GPU still catch a broken CUDA printer.
//! The GPU tests (`gpu_inductor.rs`) compile the same code with NVRTC and run it.

mod common;

use std::process::Command;

use common::programs::{programs, programs_in};
use engine::inductor::{Config, codegen, generate};
use engine::{DType, Device, Tensor, dynamo};
use proptest::prelude::*;

/// Just enough of CUDA for `g++ -fsyntax-only`: qualifiers, the thread-index registers,
/// `float4`, and the intrinsics the printers call.
const CUDA_STAND_INS: &str = r#"
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
#define __launch_bounds__(n)
struct uint3 { unsigned x, y, z; };
extern uint3 threadIdx, blockIdx, blockDim, gridDim;
struct float4 { float x, y, z, w; };
float4 make_float4(float, float, float, float);
float __shfl_xor_sync(unsigned, float, int);
float __int_as_float(int);
void __syncthreads();
float rsqrtf(float);
#define asm(...)
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
uint2 make_uint2(unsigned, unsigned);
uint4 make_uint4(unsigned, unsigned, unsigned, unsigned);
float __uint_as_float(unsigned);
unsigned __float_as_uint(float);
template <typename T> T __ldg(const T*);
int max(int, int);
"#;

/// Fails with the compiler's message unless `module` is valid C++ under the stand-ins.
fn syntax_check(module: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("cuda-syntax-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{:x}.cu.cpp", module.len() ^ module.bytes().map(u64::from).sum::<u64>() as usize));
    std::fs::write(&path, format!("{CUDA_STAND_INS}\n{module}")).map_err(|e| e.to_string())?;
    let output = Command::new("c++").args(["-fsyntax-only", "-std=c++17", "-Werror=return-type"]).arg(&path).output();
    let output = output.map_err(|e| format!("could not run c++: {e}"))?;
    if output.status.success() { Ok(()) } else { Err(format!("{}\n{module}", String::from_utf8_lossy(&output.stderr))) }
}

fn has_cxx() -> bool {
    Command::new("c++").arg("--version").output().is_ok_and(|o| o.status.success())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn generated_cuda_is_valid_cuda_cpp(program in programs(12), seed in any::<u64>()) {
        if !has_cxx() {
            return Ok(());
        }
        let inputs = program.inputs(seed);
        let report = dynamo::explain(|xs: Vec<Tensor>| program.run(&xs)).call(&inputs).unwrap();
        for graph in &report.graphs {
            let code = generate(graph, Device::Cuda(0), &Config::default()).unwrap();
            let module = code.module_source(&codegen::cuda::prelude());
            prop_assert!(syntax_check(&module).is_ok(), "{}", syntax_check(&module).unwrap_err());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Half-precision programs through the syntax check, and through NVRTC (for Hopper) where the
    /// library is installed: NVRTC needs no GPU, so this checks the casts, the `bf16`/`f16`
    /// vector loads and the inline PTX of the prelude on machines without one.
    #[test]
    fn generated_half_precision_cuda_compiles(
        (dtype, program) in prop_oneof![Just(DType::BF16), Just(DType::F16)].prop_flat_map(|d| (Just(d), programs_in(d, 8))),
        seed in any::<u64>(),
    ) {
        let inputs = program.inputs(seed);
        let report = dynamo::explain(|xs: Vec<Tensor>| program.run(&xs)).call(&inputs).unwrap();
        for graph in &report.graphs {
            let code = generate(graph, Device::Cuda(0), &Config::default()).unwrap();
            let module = code.module_source(&codegen::cuda::prelude());
            if has_cxx() {
                prop_assert!(syntax_check(&module).is_ok(), "{}", syntax_check(&module).unwrap_err());
            }
            if engine::device::cuda::probe().nvrtc.is_ok() {
                let compiled = engine::device::cuda::nvrtc::compile_cubin(&module, "sm_90");
                prop_assert!(compiled.is_ok(), "{dtype}: {}\n{module}", compiled.unwrap_err());
            }
        }
    }
}

#[test]
fn the_check_rejects_broken_code() {
    if has_cxx() {
        assert!(
            syntax_check("extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = undefined_thing; }").is_err()
        );
    }
}

#[test]
fn wide_rows_vector_paths_and_looped_rows_are_valid() {
    if !has_cxx() {
        return;
    }
    type Model = fn(Vec<Tensor>) -> engine::Result<Tensor>;
    let cases: Vec<(Model, Vec<Vec<usize>>)> = vec![
        (|t| t[0].softmax(-1), vec![vec![8, 4096]]),
        (|t| t[0].softmax(-1), vec![vec![2, 20000]]),
        (|t| t[0].layer_norm(&t[1], &t[2], 1e-5), vec![vec![8, 1024], vec![1024], vec![1024]]),
        (|t| t[0].layer_norm(&t[1], &t[2], 1e-5), vec![vec![8, 1000], vec![1000], vec![1000]]),
        (|t| t[0].add(&t[1])?.relu()?.mul(2.0), vec![vec![1 << 16], vec![1 << 16]]),
        (|t| t[0].add(&t[1])?.sigmoid(), vec![vec![64, 96], vec![96]]),
        (|t| t[0].exp()?.sum(0, false), vec![vec![300, 7]]),
    ];
    for (f, shapes) in cases {
        let inputs: Vec<Tensor> = shapes.iter().enumerate().map(|(i, s)| Tensor::randn(s, i as u64)).collect();
        let graph = dynamo::explain(f).call(&inputs).unwrap().graphs.remove(0);
        let code = generate(&graph, Device::Cuda(0), &Config::default()).unwrap();
        if let Err(why) = syntax_check(&code.module_source(&codegen::cuda::prelude())) {
            panic!("{why}");
        }
    }
}

#[test]
fn split_reductions_are_valid() {
    // The reductions an H100 splits (the target assumes its 132 multiprocessors with no GPU here).
    if !has_cxx() {
        return;
    }
    let cases = common::split_cases::split_reduction_cases();
    for (f, shapes, expected) in cases {
        let inputs: Vec<Tensor> = shapes.iter().enumerate().map(|(i, s)| Tensor::randn(s, i as u64)).collect();
        let graph = dynamo::explain(f).call(&inputs).unwrap().graphs.remove(0);
        let code = generate(&graph, Device::Cuda(0), &Config::default()).unwrap();
        let reductions = code.kernel_names().iter().filter(|n| n.starts_with("per_") || n.starts_with("red_")).count();
        assert_eq!(reductions, expected, "split:\n{code}");
        if let Err(why) = syntax_check(&code.module_source(&codegen::cuda::prelude())) {
            panic!("{why}");
        }
    }
}

#[test]
fn generated_backward_kernels_are_valid() {
    // The forward and backward graphs AOT makes of the workbook's models, printed as CUDA C.
    use workbook_models::phase5::{Block, BlockShape, MLP_FEATURES, Mlp};
    if !has_cxx() {
        return;
    }
    let mlp = Mlp::new(0, Device::Cpu).unwrap();
    let block = Block::new(BlockShape { batch: 2, seq: 16, d_model: 32, heads: 4 }, 1, Device::Cpu).unwrap();
    let cases: Vec<(engine::fx::Graph, usize)> = vec![
        (
            dynamo::explain(|x: Tensor| mlp.forward(&x))
                .call(&Tensor::randn(&[8, MLP_FEATURES], 2))
                .unwrap()
                .graphs
                .remove(0),
            4,
        ),
        (
            dynamo::explain(|x: Tensor| block.naive_forward(&x))
                .call(&Tensor::randn(&[2, 16, 32], 3))
                .unwrap()
                .graphs
                .remove(0),
            16,
        ),
    ];
    for (graph, params) in cases {
        // The input x needs no gradient; every parameter does.
        let requires: Vec<bool> =
            (0..graph.placeholders().len()).map(|i| i >= graph.placeholders().len() - params).collect();
        let partition = engine::aot::min_cut_partition(&graph, &requires).unwrap();
        for half in [&partition.forward, &partition.backward] {
            let code = generate(half, Device::Cuda(0), &Config::default()).unwrap();
            if let Err(why) = syntax_check(&code.module_source(&codegen::cuda::prelude())) {
                panic!("{why}");
            }
        }
    }
}

#[test]
fn a_whole_training_step_is_valid() {
    // Forward, loss, backward and SGD with momentum traced into one graph (compiled autograd):
    // its kernels, the foreach update writing the parameters in place among them.
    use std::sync::{Arc, Mutex};
    use workbook_models::phase5::{MLP_FEATURES, Mlp};
    if !has_cxx() {
        return;
    }
    #[derive(Clone, Default)]
    struct Keep(Arc<Mutex<Vec<engine::fx::Graph>>>);
    impl engine::backends::Backend for Keep {
        fn name(&self) -> &str {
            "keep"
        }
        fn compile(
            &self,
            graph: &engine::fx::Graph,
            _: &[Tensor],
        ) -> engine::Result<Box<dyn engine::backends::CompiledGraph>> {
            self.0.lock().unwrap().push(graph.clone());
            Ok(Box::new(engine::fx::Interpreter::new(graph.clone())))
        }
    }
    use engine::optim::{Optimizer, Sgd};
    let mlp = Mlp::new(0, Device::Cpu).unwrap().requires_grad_();
    let sgd = Sgd::new(&mlp.parameters(), 0.01).momentum(0.9);
    let keep = Keep::default();
    let step = dynamo::compile(|(x, y): (Tensor, Tensor)| {
        let loss = mlp.forward(&x)?.mse_loss(&y)?;
        loss.backward()?;
        sgd.step()?;
        sgd.zero_grad();
        Ok(loss)
    })
    .backend(keep.clone())
    .compiled_autograd(true)
    .fullgraph(true);
    step.call((&Tensor::randn(&[8, MLP_FEATURES], 1), &Tensor::randn(&[8, MLP_FEATURES], 2))).unwrap();
    let graph = keep.0.lock().unwrap().pop().unwrap();
    // As the GPU runs it at this batch, and with its loss's mean and bias gradients split.
    let split = Config { split_reductions: engine::inductor::SplitReductions::Always, ..Config::default() };
    for config in [Config::default(), split] {
        let code = generate(&graph, Device::Cuda(0), &config).unwrap();
        assert!(code.kernel_names().iter().any(|n| n.starts_with("for_fused")), "{code}");
        if let Err(why) = syntax_check(&code.module_source(&codegen::cuda::prelude())) {
            panic!("{why}");
        }
    }
}

#[test]
fn fp8_kernels_compile_for_gpus_with_and_without_fp8_conversions() {
    // Quantizing stores (pointwise with tails, a persistent row) and an 8-bit load, printed as
    // CUDA C: four 8-bit floats move as one 32-bit word, and each store rounds once. NVRTC then
    // compiles the module for Hopper (`cvt ... e4m3x2`) and for Ampere (the software rounding).
    type Model = fn(Vec<Tensor>) -> engine::Result<Tensor>;
    let cases: Vec<(Model, Vec<usize>, DType)> = vec![
        (|t| t[0].div(0.25)?.minimum(448.0)?.maximum(-448.0)?.to_dtype(DType::F8E4M3), vec![1003], DType::F32),
        (|t| t[0].gelu()?.div(0.5)?.to_dtype(DType::F8E5M2), vec![64, 2048], DType::BF16),
        (|t| t[0].softmax(-1)?.mul(448.0)?.to_dtype(DType::F8E4M3), vec![8, 1024], DType::F32),
        (|t| t[0].to_dtype(DType::F32)?.mul(2.0), vec![4, 1000], DType::F8E4M3),
    ];
    for (f, shape, dtype) in cases {
        let input = Tensor::randn(&shape, 1).to_dtype(dtype).unwrap();
        let graph = dynamo::explain(f).call(&[input]).unwrap().graphs.remove(0);
        let code = generate(&graph, Device::Cuda(0), &Config::default()).unwrap();
        let module = code.module_source(&codegen::cuda::prelude());
        let kernels: String = code.kernels.iter().map(|k| k.source.as_str()).collect();
        assert!(kernels.contains("vstore4(out_ptr0") || kernels.contains("vload4(in_ptr0"), "{code}");
        assert!(!kernels.contains("_to_float(float_to_"), "{code}");
        if has_cxx() {
            syntax_check(&module).unwrap();
        }
        if engine::device::cuda::probe().nvrtc.is_ok() {
            for arch in ["sm_90", "sm_80"] {
                if let Err(why) = engine::device::cuda::nvrtc::compile_cubin(&module, arch) {
                    panic!("{arch}: {why}\n{module}");
                }
            }
        }
    }
}

#[test]
fn kernels_over_two_billion_elements_index_in_64_bits_and_compile() {
    // Inputs of 2^31 elements, declared from metadata alone (no memory): every printer's loops
    // in `long long`, the path no kernel of the tests above takes, since their buffers are small
    // enough for `int` indices. NVRTC compiles the module where it is installed.
    use engine::TensorMeta;
    use engine::fx::proxy::Tracer;
    type Model = fn(&[Tensor]) -> engine::Result<Tensor>;
    let cases: Vec<(Model, Vec<Vec<usize>>, DType)> = vec![
        (|t| t[0].add(&t[1])?.gelu(), vec![vec![1 << 20, 2048], vec![2048]], DType::F32),
        (|t| t[0].add(&t[1])?.gelu(), vec![vec![1 << 20, 2048], vec![2048]], DType::BF16),
        (|t| t[0].softmax(-1), vec![vec![1 << 22, 512]], DType::F32),
        (|t| t[0].softmax(-1), vec![vec![1 << 21, 1024]], DType::F32),
        (|t| t[0].softmax(-1), vec![vec![1 << 17, 16384]], DType::F32),
        (|t| t[0].sum(0, false), vec![vec![1 << 20, 2048]], DType::F32),
    ];
    for (f, shapes, dtype) in cases {
        let tracer = Tracer::new();
        let inputs: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| {
                let meta = TensorMeta { shape: shape.clone(), dtype, device: Device::Cuda(0) };
                tracer.placeholder(&format!("x{i}"), meta, engine::layout::contiguous_strides(shape))
            })
            .collect();
        let graph = tracer.finish(&[f(&inputs).unwrap()]).unwrap().graph;
        let code = generate(&graph, Device::Cuda(0), &Config::default()).unwrap();
        let module = code.module_source(&codegen::cuda::prelude());
        assert!(code.kernels.iter().any(|k| k.source.contains("for (long long x")), "{code}");
        if has_cxx() {
            syntax_check(&module).unwrap();
        }
        if engine::device::cuda::probe().nvrtc.is_ok()
            && let Err(why) = engine::device::cuda::nvrtc::compile_cubin(&module, "sm_90")
        {
            panic!("{why}\n{module}");
        }
    }
}
