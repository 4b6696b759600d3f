//! The C printer, the analogue of TorchInductor's `codegen/cpp.py`: each kernel becomes a C
//! function `void name_range(float* const* args, int64_t x0, int64_t x1)` whose loop over `x`
//! the compiler vectorises (`#pragma omp simd`, the vector math in the prelude instead of libm),
//! and `void name(float* const* args, int64_t xnumel)`, the whole range: the entry point every
//! CPU kernel has, replacement printers' included.
//!
//! The runtime calls `name_range` on chunks of `x` from the engine's rayon pool, the pool matrix
//! products and eager kernels use, rather than from an OpenMP team: two pools of threads on the
//! same cores keep waking each other's sleepers and fighting for the cores between steps.
//!
//! Reductions run each row's phases in order: every loop over `r` re-reads the row, which the
//! CPU's caches keep close, so `per_` and `red_` kernels print alike here.

use std::fmt::Write;

use super::{Dialect, RowLoops, helper_functions, row_loops, scalar_spelling};
use crate::device::cpu::vecmath;
use crate::inductor::kernel::{Kernel, KernelBody};

/// The suffix of the entry point that computes `x` in `x0..x1` only.
pub const RANGE_SUFFIX: &str = "_range";

/// The header every C kernel file starts with: the NaN-propagating `maximum` and the vector math
/// (`vm_exp`, `vm_tanh`, ...) that kernels call instead of libm.
pub fn prelude() -> String {
    format!("#include <math.h>\n#include <stdint.h>\n\n{}{}", helper_functions("static inline"), vecmath::c_source())
}

/// A whole C source file: the prelude, then every kernel.
pub fn module(kernels: &[Kernel]) -> String {
    let mut out = prelude();
    for k in kernels {
        out.push('\n');
        out.push_str(&kernel(k));
    }
    out
}

// ANCHOR: c_kernel
/// One kernel as two C functions: over a range of `x`, and over all of it.
pub fn kernel(k: &Kernel) -> String {
    let mut out = format!("void {}{RANGE_SUFFIX}(float* const* args, int64_t x0, int64_t x1) {{\n", k.name);
    for (i, arg) in k.args.iter().enumerate() {
        let constness = if arg.output { "" } else { "const " };
        writeln!(out, "    {constness}float* restrict {} = args[{i}];", arg.name).unwrap();
    }
    let spell = scalar_spelling(Dialect::C);
    match &k.body {
        KernelBody::Pointwise(stmts) => {
            out.push_str("    #pragma omp simd\n");
            out.push_str("    for (int64_t x = x0; x < x1; x++) {\n");
            for s in stmts {
                writeln!(out, "        {}", spell.stmt(k, s, true)).unwrap();
            }
            out.push_str("    }\n");
        }
        KernelBody::Reduction { .. } => {
            out.push_str("    for (int64_t x = x0; x < x1; x++) {\n");
            out.push_str(&row_loops(k, RowLoops::Sequential(Dialect::C), "        "));
            out.push_str("    }\n");
        }
    }
    out.push_str("}\n");
    let name = &k.name;
    writeln!(out, "void {name}(float* const* args, int64_t xnumel) {{ {name}{RANGE_SUFFIX}(args, 0, xnumel); }}")
        .unwrap();
    out
}
// ANCHOR_END: c_kernel
