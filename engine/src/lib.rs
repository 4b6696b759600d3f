//! A small but real torch.compile, for learning how PyTorch 2's compiler works.
//!
//! | PyTorch 2 | here |
//! | --- | --- |
//! | eager ATen kernels | [`Tensor`] methods, [`device`] kernels (CPU in Rust; CUDA C through NVRTC and cuBLAS: [`device::cuda`]) |
//! | `torch.cuda.is_available()`, `tensor.to("cuda")` | [`device::cuda::probe()`], [`Device::cuda_if_available`], [`Tensor::to`] |
//! | `torch.fx` | [`fx`]: graphs, printing, interpreter, tracing |
//! | `torch.export`, `ExportedProgram` | [`fx::export`]: one graph with its constants, saved as JSON and loaded with every op checked |
//! | TorchDynamo | [`dynamo`]: [`dynamo::compile`] captures closures into graphs |
//! | `torch.autograd`: `backward()`, `.grad`, `no_grad`, `derivatives.yaml` | [`autograd`] |
//! | AOTAutograd: decompositions, the joint graph, the min-cut partitioner | [`aot`] |
//! | TorchInductor | [`inductor`]: lowering, fusion, C and CUDA C code generation, the `call` plan |
//! | `torch._inductor.codecache` | [`codecache`]: the system C compiler as a JIT, NVRTC output, the disk cache |
//! | `torch.compile(backend=...)` | [`backends`]: [`backends::Eager`], [`backends::AotEager`], [`backends::Inductor`], your own [`backends::Backend`] |
//! | `torch.optim.SGD`, `torch.optim.AdamW` | [`optim`] |
//! | `TORCH_LOGS` | [`logs`]: `ENGINE_LOGS=graph,graph_breaks,recompiles,guards,fusion,output_code,cudagraphs,autotuning,fx_graph_cache,aot_graphs,compile_time` |
//! | `triton.testing.do_bench` | [`mod@bench`]: warm-up, CUDA-event (or monotonic-clock) samples, medians and spread |
//! | `torch.profiler` | [`profiler`]: every launch with host and device time, `key_averages()` tables, Chrome traces |
//! | `at::parallel_for`, `torch.set_num_threads` | [`parallel`]: the thread pool every CPU kernel splits its work over |
//! | `dynamo_timed`, `CompilationMetrics` | [`compile_time`]: where each compile's time goes, stage by stage |
//! | `TORCH_TRACE`, `trace_structured` | [`trace_structured`]: `ENGINE_TRACE=DIR`, a JSON record of every compile, for `compile-report` |
//!
//! ## Layers
//!
//! Read the engine bottom-up: each layer imports only itself and the layers above it in this
//! list (the test `tests/layers.rs` fails on an import of a higher layer, and on any import loop).
//!
//! 1. base types: [`scalar`], [`dtype`], [`layout`], [`Device`] (the type), [`error`], [`logs`],
//!    [`compile_time`], [`trace_structured`], [`codecache`], [`parallel`], [`compile_mode`], [`host_overhead`];
//! 2. the op catalogue, [`op`], custom ops included ([`op::CustomOp`], as `torch.library`);
//! 3. tensors and eager kernels: [`tensor`] (its op methods, [`autograd`] (the tape and the
//!    derivative formulas, written with the op methods), and the dispatcher's hook for the layers
//!    above, `tensor::dispatch`), the device kernels (`device::provider`, the trait each device's
//!    plain and tuned kernels implement; `device::cpu`, [`device::cuda`]),
//!    [`mod@bench`], [`profiler`] (which the launch paths of this layer and of inductor report to);
//! 4. [`fx`], graphs, tracing and the interpreter;
//! 5. [`aot`], decompositions, the joint forward and backward graph and its partition;
//! 6. [`inductor`], code generation;
//! 7. [`backends`], the `Backend` contract and `eager`, `aot_eager`, `inductor`;
//! 8. [`dynamo`], capture, guards, the cache, `compile` (whose default backend is Inductor);
//! 9. [`optim`], the optimizers (on top, so that a training step can be compiled whole).
//!
//! Data flows dynamo → aot → inductor, but dynamo sits on top because it drives the others (it
//! calls a backend); fx reaches the tensor layer's dispatcher by registering itself there.
//!
//! Across the layers, the fast paths (each device's tuned kernels, `device::{cpu,cuda}::tuned`)
//! and Inductor's mode features ([`inductor::modes`]) are named only where they plug in: the
//! provider registries, the targets' runtimes, and `compile_fx` for the FX graph cache. The
//! pipeline a learner reads never names them (`tests/layers.rs` checks that too).
//!
//! ```
//! use engine::{backends::AotEager, dynamo, Tensor};
//! let w = Tensor::randn(&[4, 3], 0).with_name("w");
//! let model = dynamo::compile(|x: Tensor| x.linear(&w, None)?.softmax(-1)).backend(AotEager);
//! let y = model.call(&Tensor::randn(&[2, 3], 1))?;
//! assert_eq!(y.shape(), &[2, 4]);
//! # Ok::<(), engine::Error>(())
//! ```

pub mod aot;
pub mod backends;
pub mod bench;
pub mod codecache;
pub mod compile_mode;
pub mod compile_time;
pub mod device;
pub mod dtype;
pub mod dynamo;
mod eager;
pub mod error;
pub mod fx;
pub mod host_overhead;
pub mod inductor;
pub mod layout;
pub mod logs;
pub mod op;
pub mod optim;
pub mod parallel;
pub mod profiler;
pub mod scalar;
pub mod tensor;
pub mod trace_structured;
pub mod wires;

pub use device::Device;
pub use dtype::DType;
pub use error::{Error, Result, SourceLocation};
pub use tensor::AttnMask;
pub use tensor::autograd;
pub use tensor::{Operand, Tensor, TensorMeta};
