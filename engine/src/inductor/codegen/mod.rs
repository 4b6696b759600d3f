//! Code generation, the analogue of TorchInductor's `codegen/` (`cpp.py` for CPU, `triton.py` for
//! GPU): two printers over the one [`kernel`](super::kernel) IR, each behind the [`Renderer`]
//! trait. This module holds what they
//! share: how each op, constant and statement is spelled in C, which CUDA C extends.

pub mod c;
pub mod cuda;
mod renderer;

pub use renderer::{CRenderer, CudaRenderer, Rendered, Renderer, WithPrinters};

use std::fmt::Write;

use super::index::FlatIndex;
use super::ir::PointwiseOp;
use super::kernel::{Combine, Kernel, KernelBody, Phase, Stmt, Value};
use crate::device::cpu::vecmath;
use crate::dtype::DType;

/// Which language a printer writes; CUDA C is C with a few spellings changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// C11 for the system C compiler.
    C,
    /// CUDA C++ for NVRTC.
    Cuda,
}

/// A float constant that reads back to exactly the same bits.
pub fn constant(v: f32, dialect: Dialect) -> String {
    let bits = |b: u32| format!("__int_as_float(0x{b:08x})");
    match (dialect, v) {
        (Dialect::C, v) if v.is_nan() => "NAN".into(),
        (Dialect::C, v) if v.is_infinite() => if v > 0.0 { "INFINITY" } else { "-INFINITY" }.into(),
        (Dialect::Cuda, v) if !v.is_finite() => bits(v.to_bits()),
        // `{:?}` prints the shortest text that parses back to the same f32, with a `.0` on whole
        // numbers, so `f` can always be appended.
        (_, v) => format!("{v:?}f"),
    }
}

/// The C expression of `op` applied to the already-printed operands, so compiled and eager code
/// compute alike: in C, transcendental functions call the vector math the eager CPU kernels use
/// (which the C compiler can vectorize, where it cannot vectorize libm calls); otherwise the op
/// catalogue's own C spelling (the one the eager CUDA kernels use).
pub fn op_expr(op: &PointwiseOp, args: &[String], dialect: Dialect) -> String {
    match op {
        PointwiseOp::Copy => args[0].clone(),
        PointwiseOp::Where => format!("({} != 0.0f ? {} : {})", args[0], args[1], args[2]),
        // The op's own function, whose source the module includes.
        PointwiseOp::Custom(custom) => format!("{}({})", custom.function(), args.join(", ")),
        PointwiseOp::Unary(u) => match vecmath::c_function(*u).filter(|_| dialect == Dialect::C) {
            Some(function) => format!("{function}({})", args[0]),
            None => u.c_expr(&args[0]),
        },
        PointwiseOp::Binary(b) => b.c_expr(&args[0], &args[1]),
        // Rounded to the dtype and widened back: the value an eager `to_dtype` stores.
        PointwiseOp::ToDtype(DType::F32) => args[0].clone(),
        PointwiseOp::ToDtype(dtype) => widen(*dtype, &narrow(*dtype, &args[0])),
    }
}

/// The C name of a dtype's element type in generated code (`float`, `bf16`, `f16`, ...), which
/// both printers' preludes define.
pub fn c_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        other => other.name(),
    }
}

/// `value`, an element of `dtype`, widened to float: the cast every load of a half-precision
/// buffer starts with, as Inductor upcasts bf16 and f16 loads to float32.
pub fn widen(dtype: DType, value: &str) -> String {
    match dtype {
        DType::F32 => value.to_string(),
        other => format!("{}_to_float({value})", other.name()),
    }
}

/// `value`, a float, rounded to `dtype` (to nearest, ties to even): the cast every store into a
/// half-precision buffer ends with.
pub fn narrow(dtype: DType, value: &str) -> String {
    match dtype {
        DType::F32 => value.to_string(),
        other => format!("float_to_{}({value})", other.name()),
    }
}

/// The NaN-propagating `maximum` every kernel file defines for max reductions (C's `fmaxf` drops
/// NaNs; `torch.amax` keeps them). `qualifier` is `static inline` or `__device__ __forceinline__`.
pub fn helper_functions(qualifier: &str) -> String {
    format!("{qualifier} float maximum(float a, float b) {{ return (a > b || a != a) ? a : b; }}\n")
}

/// The value a reduction's accumulator starts from.
pub fn identity(combine: Combine, dialect: Dialect) -> String {
    match combine {
        Combine::Sum => "0.0f".into(),
        Combine::Max => constant(f32::NEG_INFINITY, dialect),
    }
}

/// `acc` combined with `v`.
pub fn combine_expr(combine: Combine, acc: &str, v: &str) -> String {
    match combine {
        Combine::Sum => format!("{acc} + {v}"),
        Combine::Max => format!("maximum({acc}, {v})"),
    }
}

/// How a printer names temporaries and indexes memory: scalar code uses `tmp3` and the index
/// as written; persistent CUDA code uses `tmp3[s]` and its own `r`.
pub struct Spelling<'a> {
    /// The language.
    pub dialect: Dialect,
    /// The name of temporary `n`.
    pub tmp: &'a dyn Fn(usize) -> String,
    /// An index as printed.
    pub index: &'a dyn Fn(&FlatIndex) -> String,
}

impl Spelling<'_> {
    /// An operand as printed.
    pub fn value(&self, v: &Value) -> String {
        match v {
            Value::Tmp(t) => (self.tmp)(*t),
            Value::Constant(c) => constant(*c, self.dialect),
        }
    }

    /// One statement as a line of C (`float tmp2 = tmp0 + tmp1;`); `declare` puts `float` in
    /// front of definitions. Loads of half-precision buffers widen to float and stores into
    /// them round (`float tmp0 = bf16_to_float(in_ptr0[x]);`): every temporary is a float.
    pub fn stmt(&self, kernel: &Kernel, stmt: &Stmt, declare: bool) -> String {
        crate::wires::trip(crate::wires::Wire::Spelling);
        let ty = if declare { "float " } else { "" };
        match stmt {
            Stmt::Load { tmp, arg, index } => {
                let arg = &kernel.args[*arg];
                let element = format!("{}[{}]", arg.name, (self.index)(index));
                format!("{ty}{} = {};", (self.tmp)(*tmp), widen(arg.dtype, &element))
            }
            Stmt::Compute { tmp, op, operands } => {
                let args: Vec<String> = operands.iter().map(|v| self.value(v)).collect();
                format!("{ty}{} = {};", (self.tmp)(*tmp), op_expr(op, &args, self.dialect))
            }
            Stmt::Store { arg, index, value } => {
                let arg = &kernel.args[*arg];
                format!("{}[{}] = {};", arg.name, (self.index)(index), narrow(arg.dtype, &self.value(value)))
            }
        }
    }
}

/// The plain spelling: `tmpN` and indices over `x` and `r`.
pub fn scalar_spelling(dialect: Dialect) -> Spelling<'static> {
    crate::wires::trip(crate::wires::Wire::ScalarSpelling);
    Spelling { dialect, tmp: &|t| format!("tmp{t}"), index: &|i| i.to_c() }
}

/// How a CUDA kernel's row loops over `r` are spread over threads (the C printer has its own
/// loops, [`c`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowLoops {
    /// One thread walks the whole row (kernels whose rows are strided).
    Sequential,
    /// The threads of a block stride through the row together and combine their partial
    /// results with block reductions; only thread 0 stores per-row values.
    BlockStrided,
}

/// The phases of one row as CUDA loops over `r` that re-read the row each time, at `indent`.
pub(crate) fn row_loops(k: &Kernel, style: RowLoops, indent: &str) -> String {
    let KernelBody::Reduction { row_len, phases, .. } = &k.body else {
        unreachable!("row loops belong to reduction kernels")
    };
    let spell = scalar_spelling(Dialect::Cuda);
    let ty = cuda::index_type(k);
    let header = match style {
        RowLoops::Sequential => format!("for ({ty} r = 0; r < {row_len}; r++) {{"),
        RowLoops::BlockStrided => format!("for ({ty} r = threadIdx.x; r < {row_len}; r += blockDim.x) {{"),
    };
    let mut out = String::new();
    for phase in phases {
        match phase {
            Phase::Row(stmts) => {
                for s in stmts {
                    let line = spell.stmt(k, s, true);
                    let guarded = matches!(s, Stmt::Store { .. }) && style == RowLoops::BlockStrided;
                    let line = if guarded { format!("if (threadIdx.x == 0) {line}") } else { line };
                    writeln!(out, "{indent}{line}").unwrap();
                }
            }
            Phase::Loop { stmts, reductions } => {
                for r in reductions {
                    writeln!(out, "{indent}float tmp{} = {};", r.tmp, identity(r.combine, Dialect::Cuda)).unwrap();
                }
                writeln!(out, "{indent}{header}").unwrap();
                for s in stmts {
                    writeln!(out, "{indent}    {}", spell.stmt(k, s, true)).unwrap();
                }
                for r in reductions {
                    let acc = format!("tmp{}", r.tmp);
                    writeln!(out, "{indent}    {acc} = {};", combine_expr(r.combine, &acc, &spell.value(&r.value)))
                        .unwrap();
                }
                writeln!(out, "{indent}}}").unwrap();
                if style == RowLoops::BlockStrided {
                    for r in reductions {
                        writeln!(out, "{indent}tmp{0} = {1}(tmp{0}, smem);", r.tmp, block_reduce(r.combine)).unwrap();
                    }
                }
            }
        }
    }
    out
}

/// The CUDA helper that combines one value per thread across a block.
pub(crate) fn block_reduce(combine: Combine) -> &'static str {
    match combine {
        Combine::Sum => "block_sum",
        Combine::Max => "block_max",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_round_trip() {
        assert_eq!(constant(2.0, Dialect::C), "2.0f");
        assert_eq!(constant(1e-5, Dialect::C), "1e-5f");
        assert_eq!(constant(0.70710677, Dialect::C), "0.70710677f");
        assert_eq!(constant(f32::NEG_INFINITY, Dialect::C), "-INFINITY");
        assert_eq!(constant(f32::NEG_INFINITY, Dialect::Cuda), "__int_as_float(0xff800000)");
    }
}
