//! The eager kernels' CUDA C: `kernels/eager.cu`, compiled once per kernel family after a prelude
//! generated from the op catalogue ([`crate::op`]), so that each op's scalar function is written
//! once for the CPU, the GPU and generated code alike; and `kernels/attention.cu`, the
//! flash-attention family, `kernels/cat.cu`, `cat` in one launch, and compiled code's matrix
//! products, `kernels/skinny_gemm.cu` (few rows) and `kernels/tf32x3_gemm.cu` (tensor cores),
//! which share `kernels/linear_params.cuh`. The
//! tensor-core GEMM and attention share `kernels/tf32x3.cuh`, float32 products as three TF32 ones.
//!
//! A family is what one module holds: the dense and strided kernels of one pointwise op
//! (`unary_exp`, `binary_add`, `where`, `copy`), or `reduce`, `softmax`, `layer_norm`, in one
//! [`Instance`]: `binary_add` reads any dtypes, `binary_add_bf16` only bf16. Modules are compiled
//! on first use, like Triton's JIT, so a program pays only for the kernels it launches.

use std::fmt::Write;

use super::error::CudaError;
use super::params::MAX_DIMS;
use crate::dtype::DType;
use crate::op::CustomOp;
use crate::op::{BinaryOp, UnaryOp};

/// How an eager kernel family's source begins (NVRTC builds these as the library's kernels).
pub(crate) const LIBRARY_MARK: &str = "// Eager kernel family";

/// The kernel families of `kernels/eager.cu` that are not one pointwise op.
const OTHER_FAMILIES: [&str; 5] = ["where", "copy", "reduce", "softmax", "layer_norm"];

/// Which instance of `kernels/eager.cu`'s kernel templates a launch runs: the one for a compute
/// dtype (f32, bf16, f16) when every operand has it, its loads and stores fixed at compile time,
/// else the one that reads each operand's dtype at run time. The choice ATen makes per call with
/// `AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16, ...)`, which switches on the dtype once, on
/// the host, and calls the kernel instantiated for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Instance(Option<DType>);

impl Instance {
    /// The instance that reads and writes operands of `dtypes`: the one for their dtype when they
    /// share a compute dtype, else the run-time one.
    pub(crate) fn of(dtypes: impl IntoIterator<Item = DType>) -> Instance {
        let mut dtypes = dtypes.into_iter();
        let first = dtypes.next().filter(|d| DType::COMPUTE.contains(d));
        Instance(first.filter(|&d| dtypes.all(|other| other == d)))
    }

    /// The instances of family template `template` (`binary_add`, `reduce`): the run-time one
    /// where its operands may mix dtypes, then one per compute dtype.
    fn of_family(template: &str) -> impl Iterator<Item = Instance> {
        let run_time = mixes_dtypes(template).then_some(Instance(None));
        run_time.into_iter().chain(DType::COMPUTE.map(|d| Instance(Some(d))))
    }

    /// `base` suffixed with this instance's dtype, `binary_add_bf16` (unchanged for the run-time
    /// instance): how both a family's module and its kernels are named.
    pub(crate) fn name(self, base: &str) -> String {
        match self.0 {
            Some(dtype) => format!("{base}_{}", dtype.name()),
            None => base.to_string(),
        }
    }

    /// The family and instance module `name` names (`binary_add_bf16`: `binary_add`, bf16).
    fn split(name: &str) -> (&str, Instance) {
        DType::COMPUTE
            .iter()
            .find_map(|&d| Some((name.strip_suffix(&format!("_{}", d.name()))?, Instance(Some(d)))))
            .unwrap_or((name, Instance(None)))
    }

    /// The prelude line selecting this instance in `kernels/eager.cu`.
    fn define(self) -> String {
        let (suffix, dtype) = match self.0 {
            Some(d) => (format!("_{}", d.name()), format!("DTYPE_{}", d.name().to_uppercase())),
            None => (String::new(), "DTYPE_ANY".to_string()),
        };
        format!("#define INSTANCE(X, ...) X(__VA_ARGS__, {suffix}, {dtype})\n")
    }
}

/// Whether the operands of family template `template` may have mixed dtypes, so that it needs
/// the run-time instance: a binary op's or a custom op's (`bf16 + f32`), `where`'s (its condition
/// takes no part in promotion), `copy`'s (it is `to_dtype`, and copies 8-bit floats) and layer
/// norm's (weight and bias of their own dtypes). A unary op, a reduction and softmax read and
/// write one compute dtype ([`crate::op::Op::infer_dtype`]); a reduction's float32 partial
/// results, its one other dtype, are written through a run-time dtype in every instance.
fn mixes_dtypes(template: &str) -> bool {
    template.starts_with("binary_") || matches!(template, "where" | "copy" | "layer_norm" | "custom")
}

/// The family of the flash-attention kernels (`kernels/attention.cu`).
pub(crate) const ATTENTION: &str = "attention";

/// The family of the attention backward kernels (`kernels/attention_backward.cu`).
pub(crate) const ATTENTION_BACKWARD: &str = "attention_backward";

/// The family of `cat`'s one-launch copy (`kernels/cat.cu`).
pub(crate) const CAT: &str = "cat";

/// The family of the few-row matrix products compiled code runs (`kernels/skinny_gemm.cu`).
pub(crate) const SKINNY_GEMM: &str = "skinny_gemm";

/// The family of the tensor-core float32 matrix products max-autotune may pick
/// (`kernels/tf32x3_gemm.cu`).
pub(crate) const TF32X3_GEMM: &str = "tf32x3_gemm";

/// Every eager kernel family, each of `kernels/eager.cu` in every [`Instance`], for tests and
/// tools that must cover them all.
pub fn eager_families() -> Vec<String> {
    let unary = UnaryOp::ALL.iter().map(|op| format!("unary_{}", op.name()));
    let binary = BinaryOp::ALL.iter().map(|op| format!("binary_{}", op.name()));
    let templates: Vec<String> = unary.chain(binary).chain(OTHER_FAMILIES.map(String::from)).collect();
    let instances =
        templates.iter().flat_map(|family| Instance::of_family(family).map(|instance| instance.name(family)));
    let others = [ATTENTION, ATTENTION_BACKWARD, CAT, SKINNY_GEMM, TF32X3_GEMM].map(String::from);
    instances.chain(others).collect()
}

/// The CUDA C source of one kernel family, or `None` for an unknown name. Its first line names
/// the family (the compile log and the compile trace show it).
pub fn eager_source(family: &str) -> Option<String> {
    let tf32x3 = include_str!("kernels/tf32x3.cuh");
    let linear_params = include_str!("kernels/linear_params.cuh");
    let files: Option<&[&str]> = match family {
        CAT => Some(&[include_str!("kernels/cat.cu")]),
        ATTENTION_BACKWARD => Some(&[include_str!("kernels/attention_backward.cu")]),
        ATTENTION => Some(&[DTYPES, tf32x3, include_str!("kernels/attention.cu")]),
        SKINNY_GEMM => Some(&[linear_params, include_str!("kernels/skinny_gemm.cu")]),
        TF32X3_GEMM => Some(&[linear_params, tf32x3, include_str!("kernels/tf32x3_gemm.cu")]),
        _ => None,
    };
    if let Some(files) = files {
        return Some(format!("{LIBRARY_MARK} `{family}`.\n{}", files.concat()));
    }
    let (template, instance) = Instance::split(family);
    if !Instance::of_family(template).any(|i| i == instance) {
        return None;
    }
    let selection = if let Some(op) = UnaryOp::ALL.iter().find(|op| template == format!("unary_{}", op.name())) {
        pointwise(template, &op.c_expr("x"))
    } else if let Some(op) = BinaryOp::ALL.iter().find(|op| template == format!("binary_{}", op.name())) {
        pointwise(template, &op.c_expr("x", "y"))
    } else {
        match template {
            "where" => pointwise(template, "(x != 0.0f ? y : z)"),
            "copy" => pointwise(template, "x"),
            "reduce" => "#define REDUCTIONS\n".to_string(),
            "softmax" => "#define SOFTMAX\n".to_string(),
            "layer_norm" => "#define LAYER_NORM\n".to_string(),
            _ => return None,
        }
    };
    let mut source = format!("{LIBRARY_MARK} `{family}`, generated from the op catalogue (engine/src/op/mod.rs).\n");
    writeln!(source, "#define MAX_DIMS {MAX_DIMS}\n{selection}{}", instance.define()).unwrap();
    source.push_str(DTYPES);
    source.push_str(include_str!("kernels/eager.cu"));
    Some(source)
}

/// The storage types and their conversions (`kernels/dtypes.cuh`), which the eager kernels and
/// Inductor's generated CUDA C start with.
pub const DTYPES: &str = include_str!("kernels/dtypes.cuh");

/// The CUDA C of a custom op's kernels in `instance`, `custom_dense` and `custom_strided` (suffixed
/// by the instance's dtype): its element function, then the pointwise kernels calling it (so
/// custom ops get broadcasting, strided inputs and 16-byte loads like the catalogue's ops).
pub(crate) fn custom_source(op: &CustomOp, instance: Instance) -> Result<String, CudaError> {
    let Some(element) = op.cuda_source() else {
        return Err(CudaError::new(format!(
            "custom op `{}` has no CUDA source: register it with `.cuda_source(\"__device__ float {}(...) {{ ... }}\")` \
             to run it on a GPU",
            op.name(),
            op.function()
        )));
    };
    let args = ["x", "y", "z"];
    if op.arity() > args.len() {
        return Err(CudaError::new(format!(
            "custom op `{}` takes {} inputs; on a GPU custom ops take at most {}",
            op.name(),
            op.arity(),
            args.len()
        )));
    }
    let call = format!("{}({})", op.function(), args[..op.arity()].join(", "));
    Ok(format!(
        "// Custom op `{}`.\n#define MAX_DIMS {MAX_DIMS}\n{element}\n{}{}{DTYPES}{}",
        op.name(),
        pointwise("custom", &call),
        instance.define(),
        include_str!("kernels/eager.cu")
    ))
}

/// Selects the dense and strided kernels named `<name>_dense` and `<name>_strided` computing
/// `expression` of the inputs `x`, `y`, `z`.
fn pointwise(name: &str, expression: &str) -> String {
    format!("#define POINTWISE(X) X({name}, {expression})\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogue_op_has_a_family() {
        let families = eager_families();
        for op in UnaryOp::ALL {
            let source = eager_source(&format!("unary_{}_f32", op.name())).unwrap();
            assert!(source.contains(&op.c_expr("x")));
        }
        let templates = UnaryOp::ALL.len() + BinaryOp::ALL.len() + OTHER_FAMILIES.len();
        let run_time = BinaryOp::ALL.len() + ["where", "copy", "layer_norm"].len();
        assert_eq!(families.len(), templates * DType::COMPUTE.len() + run_time + 5);
        assert!(families.contains(&"unary_exp_bf16".to_string()) && families.contains(&"binary_add".to_string()));
        assert!(eager_source("unary_exp").is_none(), "unary ops have no run-time instance");
        assert!(eager_source("no_such_family").is_none());
        assert!(eager_source("no_such_family_bf16").is_none());
    }

    #[test]
    fn operands_of_one_compute_dtype_get_its_instance_and_any_other_mix_the_run_time_one() {
        use DType::*;
        assert_eq!(Instance::of([BF16, BF16, BF16]), Instance(Some(BF16)));
        assert_eq!(Instance::of([F32]), Instance(Some(F32)));
        assert_eq!(Instance::of([BF16, F32]), Instance(None));
        assert_eq!(Instance::of([F32, F32, F16]), Instance(None));
        assert_eq!(Instance::of([F8E4M3, F8E4M3]), Instance(None), "the 8-bit floats have no instance");
        assert_eq!(Instance::of([]), Instance(None));
        assert_eq!(Instance::of([F16]).name("binary_add_dense"), "binary_add_dense_f16");
        assert_eq!(Instance::of([F16, BF16]).name("binary_add_dense"), "binary_add_dense");
    }

    /// The families without a run-time instance never meet mixed dtypes: a unary op, a reduction
    /// and softmax take one compute dtype and give it back, and refuse the 8-bit floats.
    #[test]
    fn families_without_a_run_time_instance_read_and_write_one_dtype() {
        use crate::op::{Op, ReduceOp};
        let location = crate::SourceLocation::caller();
        let mut ops: Vec<Op> = UnaryOp::ALL.iter().map(|&op| Op::Unary(op)).collect();
        ops.extend([ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max].map(|kind| Op::Reduce {
            kind,
            dim: 0,
            keepdim: false,
        }));
        ops.push(Op::Softmax { dim: 0 });
        ops.push(Op::LogSoftmax { dim: 0 });
        for op in ops {
            for dtype in DType::ALL {
                let out = op.infer_dtype(&[Some((dtype, 2))], location);
                match out {
                    Ok(out) => {
                        assert!(DType::COMPUTE.contains(&dtype) && out == dtype, "{op:?} of {dtype:?} gives {out:?}")
                    }
                    Err(_) => assert!(dtype.is_fp8(), "{op:?} refuses {dtype:?}"),
                }
            }
        }
    }

    /// A module's name gives back its family and instance, and the dtype an instance's prelude
    /// names is the one the kernels code as params.rs does.
    #[test]
    fn instance_names_round_trip_and_name_the_kernels_dtype_codes() {
        for instance in Instance::of_family("binary_add") {
            assert_eq!(Instance::split(&instance.name("binary_add")), ("binary_add", instance));
        }
        let dtypes = include_str!("kernels/dtypes.cuh");
        for d in DType::COMPUTE {
            let code = format!("#define DTYPE_{} {}", d.name().to_uppercase(), super::super::params::dtype_code(d));
            assert!(dtypes.contains(&code), "dtypes.cuh defines `{code}`, as params.rs codes it");
        }
    }

    /// NVRTC needs no GPU, so wherever the library is installed the kernels are compiled for
    /// Hopper here, catching CUDA C errors before a GPU machine is involved.
    #[test]
    fn eager_kernels_compile_for_hopper() {
        use std::io::Write;
        if let Err(reason) = &crate::device::cuda::probe().nvrtc {
            let _ = writeln!(std::io::stderr(), "skipped: {reason}");
            return;
        }
        let dir = std::env::temp_dir().join(format!("engine-nvrtc-test-{}", std::process::id()));
        let cache = crate::codecache::DiskCache::at(dir.clone());
        let families = eager_families();
        let compile =
            |family: &String| super::super::nvrtc::compile_cubin_in(&cache, &eager_source(family).unwrap(), "sm_90");
        let cubins = crate::compile_time::parallel_jobs(families.iter().collect(), compile);
        for (family, cubin) in families.iter().zip(cubins) {
            let cubin = cubin.unwrap();
            assert!(cubin.compiled && cubin.bytes.starts_with(b"\x7fELF"), "{family}: a CUBIN is an ELF file");
            // The kernels the launchers look up, by the names each instance gives them.
            let (template, instance) = Instance::split(family);
            let kernels = match template {
                "reduce" => vec!["reduce_sum".to_string(), "reduce_max".to_string()],
                "softmax" => vec!["softmax_rows".to_string(), "softmax_columns".to_string()],
                "layer_norm" => vec!["layer_norm_rows".to_string()],
                // Built for sm_90a (`nvrtc::target`), the attention family has its Hopper kernels.
                ATTENTION => {
                    ["flash_attention_bf16_hd64", "flash_attention_wgmma_bf16_hd64", "flash_attention_wgmma_f16_hd64"]
                        .map(String::from)
                        .to_vec()
                }
                ATTENTION_BACKWARD | CAT | SKINNY_GEMM | TF32X3_GEMM => vec![],
                pointwise => vec![format!("{pointwise}_dense"), format!("{pointwise}_strided")],
            };
            for kernel in kernels {
                let symbol = format!("{}\0", instance.name(&kernel));
                assert!(cubin.bytes.windows(symbol.len()).any(|w| w == symbol.as_bytes()), "{family} defines {symbol}");
            }
        }
        let again =
            super::super::nvrtc::compile_cubin_in(&cache, &eager_source("reduce_f32").unwrap(), "sm_90").unwrap();
        assert!(!again.compiled, "the second build comes from the disk cache");
        let blend = CustomOp::elementwise("test::blend", 2)
            .c_source("float blend(float a, float b) { return a > b ? a : 0.5f * b; }")
            .cuda_source("__device__ float blend(float a, float b) { return a > b ? a : 0.5f * b; }")
            .register()
            .unwrap();
        for instance in Instance::of_family("custom") {
            let source = custom_source(&blend, instance).unwrap();
            let cubin = super::super::nvrtc::compile_cubin_in(&cache, &source, "sm_90").unwrap();
            assert!(cubin.bytes.starts_with(b"\x7fELF"));
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn custom_ops_without_a_cuda_source_or_with_four_inputs_say_why() {
        let c_only = CustomOp::elementwise("test::twice", 1).c_source("float twice(float x) { return 2.0f * x; }");
        let message = custom_source(&c_only.register().unwrap(), Instance(None)).unwrap_err().message;
        assert!(message.contains("has no CUDA source") && message.contains("__device__ float twice"), "{message}");
        let four = CustomOp::elementwise("test::sum4", 4)
            .c_source("float sum4(float a, float b, float c, float d) { return a + b + c + d; }")
            .cuda_source("__device__ float sum4(float a, float b, float c, float d) { return a + b + c + d; }");
        let message = custom_source(&four.register().unwrap(), Instance(None)).unwrap_err().message;
        assert!(message.contains("at most 3"), "{message}");
    }
}
