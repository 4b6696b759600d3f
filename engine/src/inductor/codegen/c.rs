//! The C printer, the analogue of TorchInductor's `codegen/cpp.py`: each kernel becomes a C
//! function `void name(float* const* args, int64_t xnumel)` with an OpenMP-parallel loop over `x`
//! that the compiler vectorises (`#pragma omp parallel for simd`).
//!
//! Reductions run each row's phases in order: every loop over `r` re-reads the row, which the
//! CPU's caches keep close, so `per_` and `red_` kernels print alike here.

use std::fmt::Write;

use super::{Dialect, RowLoops, helper_functions, row_loops, scalar_spelling};
use crate::device::cpu::vecmath;
use crate::inductor::kernel::{Kernel, KernelBody};

/// Below this many elements of work a kernel stays on one thread: waking the OpenMP team costs
/// more than it saves.
const PARALLEL_WORK: usize = 1 << 15;

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
/// One kernel as a C function.
pub fn kernel(k: &Kernel) -> String {
    let mut out = format!("void {}(float* const* args, int64_t xnumel) {{\n", k.name);
    for (i, arg) in k.args.iter().enumerate() {
        let constness = if arg.output { "" } else { "const " };
        writeln!(out, "    {constness}float* restrict {} = args[{i}];", arg.name).unwrap();
    }
    let spell = scalar_spelling(Dialect::C);
    match &k.body {
        KernelBody::Pointwise(stmts) => {
            writeln!(out, "    #pragma omp parallel for simd schedule(static) if(xnumel >= {PARALLEL_WORK})").unwrap();
            out.push_str("    for (int64_t x = 0; x < xnumel; x++) {\n");
            for s in stmts {
                writeln!(out, "        {}", spell.stmt(k, s, true)).unwrap();
            }
            out.push_str("    }\n");
        }
        KernelBody::Reduction { row_len, .. } => {
            let work = PARALLEL_WORK.div_ceil((*row_len).max(1));
            writeln!(out, "    #pragma omp parallel for schedule(static) if(xnumel >= {work})").unwrap();
            out.push_str("    for (int64_t x = 0; x < xnumel; x++) {\n");
            out.push_str(&row_loops(k, RowLoops::Sequential(Dialect::C), "        "));
            out.push_str("    }\n");
        }
    }
    out.push_str("}\n");
    out
}
// ANCHOR_END: c_kernel
