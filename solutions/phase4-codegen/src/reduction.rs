//! Exercise `reduction_c` (stretch): print a row-reduction kernel, the kind softmax and layer
//! norm become, as C.

// ANCHOR: solution
// stub: use engine::inductor::codegen::{Dialect, constant, identity, op_expr};
// stub: use engine::inductor::kernel::{Combine, Kernel, KernelBody, Phase, Stmt, Value};
use engine::inductor::codegen::{Dialect, identity};
use engine::inductor::kernel::{Combine, Kernel, KernelBody, Phase};

use crate::pointwise::{c_header, line, value};
// ANCHOR_END: solution

// ANCHOR: reduction_c
/// **Exercise `reduction_c` (stretch).** Print `kernel` (a reduction kernel: its body is
/// [`KernelBody::Reduction`]) as a C function with the same signature as in `pointwise_c`,
/// where `x` now runs over rows (`0..xnumel`). For each row, print its phases in order:
///
/// - [`Phase::Row`]: the statements, once per row;
/// - [`Phase::Loop`]: for each [`Reduce`](engine::inductor::kernel::Reduce), declare its
///   accumulator `float tmpN = IDENTITY;` ([`identity`]); then a loop
///   `for (int64_t r = 0; r < ROW_LEN; r++)` running the statements and folding each value into
///   its accumulator: `tmpN = tmpN + tmpV;` for [`Combine::Sum`], `tmpN = maximum(tmpN, tmpV);`
///   for [`Combine::Max`] (`maximum` is defined for you and keeps NaNs, as `torch.amax` does).
///
/// After the loop each accumulator holds its row's result, which later phases read by name.
///
/// Book: `book/src/phase4/exercises.md`, section "reduction_c".
/// Check: `cargo grader check phase4`.
pub fn reduction_c(kernel: &Kernel) -> String {
    // ANCHOR: solution
    let KernelBody::Reduction { row_len, phases, .. } = &kernel.body else {
        panic!("reduction_c prints reduction kernels; {} is pointwise", kernel.name)
    };
    let mut out = c_header(kernel);
    for phase in phases {
        match phase {
            Phase::Row(stmts) => {
                for stmt in stmts {
                    out.push_str(&format!("        {}\n", line(kernel, stmt, Dialect::C)));
                }
            }
            Phase::Loop { stmts, reductions } => {
                for r in reductions {
                    out.push_str(&format!("        float tmp{} = {};\n", r.tmp, identity(r.combine, Dialect::C)));
                }
                out.push_str(&format!("        for (int64_t r = 0; r < {row_len}; r++) {{\n"));
                for stmt in stmts {
                    out.push_str(&format!("            {}\n", line(kernel, stmt, Dialect::C)));
                }
                for r in reductions {
                    let value = value(&r.value, Dialect::C);
                    out.push_str(&match r.combine {
                        Combine::Sum => format!("            tmp{0} = tmp{0} + {value};\n", r.tmp),
                        Combine::Max => format!("            tmp{0} = maximum(tmp{0}, {value});\n", r.tmp),
                    });
                }
                out.push_str("        }\n");
            }
        }
    }
    out.push_str("    }\n}\n");
    out
    // ANCHOR_END: solution
}
// ANCHOR_END: reduction_c
