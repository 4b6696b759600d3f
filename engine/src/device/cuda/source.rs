//! The eager kernels' CUDA C: a prelude generated from the op catalogue ([`crate::op`]), so each
//! op's scalar function is written once for CPU and GPU alike, followed by `kernels/eager.cu`.

use std::fmt::Write;
use std::sync::OnceLock;

use super::params::MAX_DIMS;
use crate::op::{BinaryOp, UnaryOp};

/// The full CUDA C source of the eager kernels, built once.
pub fn eager_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| format!("{}\n{}", prelude(), include_str!("kernels/eager.cu")))
}

fn prelude() -> String {
    let mut s = String::from("// Generated from the op catalogue (engine/src/op.rs).\n");
    writeln!(s, "#define MAX_DIMS {MAX_DIMS}").unwrap();
    for op in UnaryOp::ALL {
        let body = op.c_expr("x");
        writeln!(s, "__device__ __forceinline__ float op_{}(float x) {{ return {body}; }}", op.name()).unwrap();
    }
    for op in BinaryOp::ALL {
        let body = op.c_expr("a", "b");
        writeln!(s, "__device__ __forceinline__ float op_{}(float a, float b) {{ return {body}; }}", op.name())
            .unwrap();
    }
    let list = |names: Vec<&str>| names.iter().map(|n| format!("X({n})")).collect::<Vec<_>>().join(" ");
    writeln!(s, "#define FOR_EACH_UNARY(X) {}", list(UnaryOp::ALL.iter().map(|o| o.name()).collect())).unwrap();
    writeln!(s, "#define FOR_EACH_BINARY(X) {}", list(BinaryOp::ALL.iter().map(|o| o.name()).collect())).unwrap();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogue_op_gets_a_kernel() {
        let source = eager_source();
        for op in UnaryOp::ALL {
            assert!(source.contains(&format!("float op_{}(float x)", op.name())));
        }
        assert!(source.contains("X(relu)") && source.contains("X(maximum)"));
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
        let cubin = super::super::nvrtc::compile_cubin_in(&cache, eager_source(), "sm_90").unwrap();
        assert!(cubin.compiled && cubin.bytes.starts_with(b"\x7fELF"), "a CUBIN is an ELF file");
        let again = super::super::nvrtc::compile_cubin_in(&cache, eager_source(), "sm_90").unwrap();
        assert!(!again.compiled, "the second build comes from the disk cache");
        let _ = std::fs::remove_dir_all(dir);
    }
}
