//! Exercises `pointwise_c` and `pointwise_cuda`: print a fused pointwise kernel, the kind that
//! turns a chain of elementwise ops into one pass over memory.

use engine::inductor::codegen::{Dialect, constant, op_expr};
use engine::inductor::kernel::{Kernel, KernelBody, Stmt, Value};

// ANCHOR: pointwise_c
/// **Exercise `pointwise_c`.** Print `kernel` (a pointwise kernel: its body is
/// [`KernelBody::Pointwise`]) as a C function
///
/// ```c
/// void NAME(float* const* args, int64_t xnumel)
/// ```
///
/// that unpacks `args` into one pointer per [`Kernel::args`] entry (named after it, in order:
/// `in_ptr0`, ..., `out_ptr0`, ...), then runs the statements for every `x` in `0..xnumel`.
/// Each [`Stmt`] becomes one line: a load `float tmpN = in_ptr0[INDEX];`, a computation
/// `float tmpN = EXPR;`, or a store `out_ptr0[INDEX] = VALUE;`. [`FlatIndex::to_c`] prints an
/// index, [`op_expr`] an op applied to printed operands, [`constant`] a float constant.
/// `<math.h>` and `<stdint.h>` are included for you. Parallelise the loop with OpenMP if you
/// like (`#pragma omp parallel for`).
///
/// [`FlatIndex::to_c`]: engine::inductor::index::FlatIndex::to_c
///
/// Book: `book/src/phase4/exercises.md`, section "pointwise_c".
/// Check: `cargo grader check phase4`.
pub fn pointwise_c(kernel: &Kernel) -> String {
    // ANCHOR: solution
    let KernelBody::Pointwise(stmts) = &kernel.body else {
        panic!("pointwise_c prints pointwise kernels; {} is a reduction", kernel.name)
    };
    let mut out = c_header(kernel);
    for stmt in stmts {
        out.push_str(&format!("        {}\n", line(kernel, stmt, Dialect::C)));
    }
    out.push_str("    }\n}\n");
    out
    // ANCHOR_END: solution
}
// ANCHOR_END: pointwise_c

// ANCHOR: pointwise_cuda
/// **Exercise `pointwise_cuda`.** Print the same kernel as CUDA C:
///
/// ```c
/// extern "C" __global__ void NAME(const float* in_ptr0, ..., float* out_ptr0, ..., long long xnumel)
/// ```
///
/// with one pointer parameter per [`Kernel::args`] entry, in order (`const` for inputs), and
/// the statements run for every `x` in `0..xnumel`. The kernel is launched with 256 threads per
/// block and at most a few blocks per multiprocessor, so one thread must handle several `x`:
/// start at `blockIdx.x * blockDim.x + threadIdx.x` and step by `blockDim.x * gridDim.x` (a
/// grid-stride loop). Compute `x` in `long long`. The statement lines are the same as in C with
/// [`Dialect::Cuda`].
///
/// Book: `book/src/phase4/exercises.md`, section "pointwise_cuda".
/// Check: `cargo grader check phase4` (on a GPU; elsewhere the check is skipped).
pub fn pointwise_cuda(kernel: &Kernel) -> String {
    // ANCHOR: solution
    let KernelBody::Pointwise(stmts) = &kernel.body else {
        panic!("pointwise_cuda prints pointwise kernels; {} is a reduction", kernel.name)
    };
    let mut params: Vec<String> = kernel
        .args
        .iter()
        .map(|arg| if arg.output { format!("float* {}", arg.name) } else { format!("const float* {}", arg.name) })
        .collect();
    params.push("long long xnumel".into());
    let mut out = format!("extern \"C\" __global__ void {}({}) {{\n", kernel.name, params.join(", "));
    out.push_str("    const long long stride = (long long)blockDim.x * gridDim.x;\n");
    out.push_str(
        "    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < xnumel; x += stride) {\n",
    );
    for stmt in stmts {
        out.push_str(&format!("        {}\n", line(kernel, stmt, Dialect::Cuda)));
    }
    out.push_str("    }\n}\n");
    out
    // ANCHOR_END: solution
}
// ANCHOR_END: pointwise_cuda

// ANCHOR: solution-only
/// A C kernel's signature, its argument pointers and the start of its parallel loop over `x`.
pub(crate) fn c_header(kernel: &Kernel) -> String {
    let mut out = format!("void {}(float* const* args, int64_t xnumel) {{\n", kernel.name);
    for (i, arg) in kernel.args.iter().enumerate() {
        let pointer = if arg.output { "float*" } else { "const float*" };
        out.push_str(&format!("    {pointer} {} = args[{i}];\n", arg.name));
    }
    out.push_str("    #pragma omp parallel for\n");
    out.push_str("    for (int64_t x = 0; x < xnumel; x++) {\n");
    out
}

/// An operand as printed: `tmpN` or a constant.
pub(crate) fn value(v: &Value, dialect: Dialect) -> String {
    match v {
        Value::Tmp(t) => format!("tmp{t}"),
        Value::Constant(c) => constant(*c, dialect),
    }
}

/// One statement as a line of C (or CUDA C).
pub(crate) fn line(kernel: &Kernel, stmt: &Stmt, dialect: Dialect) -> String {
    let value = |v: &Value| value(v, dialect);
    match stmt {
        Stmt::Load { tmp, arg, index } => format!("float tmp{tmp} = {}[{}];", kernel.args[*arg].name, index.to_c()),
        Stmt::Compute { tmp, op, operands } => {
            let operands: Vec<String> = operands.iter().map(value).collect();
            format!("float tmp{tmp} = {};", op_expr(op, &operands, dialect))
        }
        Stmt::Store { arg, index, value: v } => format!("{}[{}] = {};", kernel.args[*arg].name, index.to_c(), value(v)),
    }
}
// ANCHOR_END: solution-only
