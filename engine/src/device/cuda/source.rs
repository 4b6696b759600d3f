//! The eager kernels' CUDA C: `kernels/eager.cu`, compiled once per kernel family after a prelude
//! generated from the op catalogue ([`crate::op`]), so that each op's scalar function is written
//! once for the CPU, the GPU and generated code alike; and `kernels/attention.cu`, the
//! flash-attention family, `kernels/cat.cu`, `cat` in one launch, and compiled code's matrix
//! products, `kernels/skinny_gemm.cu` (few rows) and `kernels/tf32x3_gemm.cu` (tensor cores),
//! which share `kernels/linear_params.cuh`. The
//! tensor-core GEMM and attention share `kernels/tf32x3.cuh`, float32 products as three TF32 ones.
//!
//! A family is what one module holds: the dense and strided kernels of one pointwise op
//! (`unary_exp`, `binary_add`, `where`, `copy`), or `reduce`, `softmax`, `layer_norm`. Modules are
//! compiled on first use, like Triton's JIT, so a program pays only for the kernels it launches.

use std::fmt::Write;

use super::error::CudaError;
use super::params::MAX_DIMS;
use crate::op::CustomOp;
use crate::op::{BinaryOp, UnaryOp};

/// The kernel families that are not one pointwise op.
const OTHER_FAMILIES: [&str; 5] = ["where", "copy", "reduce", "softmax", "layer_norm"];

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

/// Every eager kernel family, for tests and tools that must cover them all.
pub fn eager_families() -> Vec<String> {
    let unary = UnaryOp::ALL.iter().map(|op| format!("unary_{}", op.name()));
    let binary = BinaryOp::ALL.iter().map(|op| format!("binary_{}", op.name()));
    let others = OTHER_FAMILIES
        .iter()
        .chain([&ATTENTION, &ATTENTION_BACKWARD, &CAT, &SKINNY_GEMM, &TF32X3_GEMM])
        .map(|f| f.to_string());
    unary.chain(binary).chain(others).collect()
}

/// The CUDA C source of one kernel family, or `None` for an unknown name. Its first line names
/// the family (the compile log and the compile trace show it).
pub fn eager_source(family: &str) -> Option<String> {
    let tf32x3 = include_str!("kernels/tf32x3.cuh");
    let linear_params = include_str!("kernels/linear_params.cuh");
    let files: Option<&[&str]> = match family {
        CAT => Some(&[include_str!("kernels/cat.cu")]),
        ATTENTION_BACKWARD => Some(&[include_str!("kernels/attention_backward.cu")]),
        ATTENTION => Some(&[tf32x3, include_str!("kernels/attention.cu")]),
        SKINNY_GEMM => Some(&[linear_params, include_str!("kernels/skinny_gemm.cu")]),
        TF32X3_GEMM => Some(&[linear_params, tf32x3, include_str!("kernels/tf32x3_gemm.cu")]),
        _ => None,
    };
    if let Some(files) = files {
        return Some(format!("// Eager kernel family `{family}`.\n{}", files.concat()));
    }
    let selection = if let Some(op) = UnaryOp::ALL.iter().find(|op| family == format!("unary_{}", op.name())) {
        pointwise(family, &op.c_expr("x"))
    } else if let Some(op) = BinaryOp::ALL.iter().find(|op| family == format!("binary_{}", op.name())) {
        pointwise(family, &op.c_expr("x", "y"))
    } else {
        match family {
            "where" => pointwise(family, "(x != 0.0f ? y : z)"),
            "copy" => pointwise(family, "x"),
            "reduce" => "#define REDUCTIONS\n".to_string(),
            "softmax" => "#define SOFTMAX\n".to_string(),
            "layer_norm" => "#define LAYER_NORM\n".to_string(),
            _ => return None,
        }
    };
    let mut source =
        format!("// Eager kernel family `{family}`, generated from the op catalogue (engine/src/op/mod.rs).\n");
    writeln!(source, "#define MAX_DIMS {MAX_DIMS}\n{selection}").unwrap();
    source.push_str(include_str!("kernels/eager.cu"));
    Some(source)
}

/// The CUDA C of a custom op's kernels, `custom_dense` and `custom_strided`: its element function,
/// then the pointwise kernels calling it (so custom ops get broadcasting, strided inputs and
/// 16-byte loads like the catalogue's ops).
pub(crate) fn custom_source(op: &CustomOp) -> Result<String, CudaError> {
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
        "// Custom op `{}`.\n#define MAX_DIMS {MAX_DIMS}\n{element}\n{}{}",
        op.name(),
        pointwise("custom", &call),
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
            let source = eager_source(&format!("unary_{}", op.name())).unwrap();
            assert!(source.contains(&op.c_expr("x")));
        }
        assert_eq!(families.len(), UnaryOp::ALL.len() + BinaryOp::ALL.len() + OTHER_FAMILIES.len() + 5);
        assert!(eager_source("no_such_family").is_none());
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
        for family in eager_families() {
            let source = eager_source(&family).unwrap();
            let cubin = super::super::nvrtc::compile_cubin_in(&cache, &source, "sm_90").unwrap();
            assert!(cubin.compiled && cubin.bytes.starts_with(b"\x7fELF"), "{family}: a CUBIN is an ELF file");
        }
        let again = super::super::nvrtc::compile_cubin_in(&cache, &eager_source("reduce").unwrap(), "sm_90").unwrap();
        assert!(!again.compiled, "the second build comes from the disk cache");
        let blend = CustomOp::elementwise("test::blend", 2)
            .c_source("float blend(float a, float b) { return a > b ? a : 0.5f * b; }")
            .cuda_source("__device__ float blend(float a, float b) { return a > b ? a : 0.5f * b; }")
            .register()
            .unwrap();
        let cubin = super::super::nvrtc::compile_cubin_in(&cache, &custom_source(&blend).unwrap(), "sm_90").unwrap();
        assert!(cubin.bytes.starts_with(b"\x7fELF"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn custom_ops_without_a_cuda_source_or_with_four_inputs_say_why() {
        let c_only = CustomOp::elementwise("test::twice", 1).c_source("float twice(float x) { return 2.0f * x; }");
        let message = custom_source(&c_only.register().unwrap()).unwrap_err().message;
        assert!(message.contains("has no CUDA source") && message.contains("__device__ float twice"), "{message}");
        let four = CustomOp::elementwise("test::sum4", 4)
            .c_source("float sum4(float a, float b, float c, float d) { return a + b + c + d; }")
            .cuda_source("__device__ float sum4(float a, float b, float c, float d) { return a + b + c + d; }");
        let message = custom_source(&four.register().unwrap()).unwrap_err().message;
        assert!(message.contains("at most 3"), "{message}");
    }
}
