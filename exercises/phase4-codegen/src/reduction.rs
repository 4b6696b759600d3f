//! Exercise `reduction_c` (stretch): print a row-reduction kernel, the kind softmax and layer
//! norm become, as C.

use engine::inductor::codegen::{Dialect, constant, identity, op_expr};
use engine::inductor::kernel::{Combine, Kernel, KernelBody, Phase, Stmt, Value};

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
    todo!()
}
// ANCHOR_END: reduction_c
