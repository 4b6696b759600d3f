//! The interpreter's compiler: reads a module of kernel IR, as [`Kernel`](crate::inductor::kernel::Kernel)
//! displays it, back into statements to run. What runs is therefore exactly what the output code
//! shows. The text has one form per statement:
//!
//! ```text
//! kernel red_fused_exp_sub_sum_0(in_ptr0 = arg0, out_ptr0 = buf1)
//!   for x in 0..8 (rows of 16):
//!     for r in 0..16:
//!       tmp0 = in_ptr0[x * 16 + r]          a load
//!       tmp1 = exp(tmp0)                    a computation
//!       tmp2 = sum over r of tmp1           a reduction
//!     out_ptr0[x] = tmp2                    a store
//! ```
//!
//! A foreach kernel has one `for x in 0..N (loop i of n):` line per part, each followed by that
//! part's statements.

use std::collections::HashMap;

use super::eval::{Body, Interpreted};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::inductor::index::{FlatIndex, Term, Var};
use crate::inductor::ir::PointwiseOp;
use crate::inductor::kernel::{Combine, Phase, Reduce, Stmt, Value};
use crate::op::{BinaryOp, CustomOp, UnaryOp};

/// A parsed module: its kernels by name.
pub(super) struct Module {
    kernels: HashMap<String, Interpreted>,
}

impl Module {
    /// The kernel called `name`.
    pub(super) fn kernel(&self, name: &str) -> Result<Interpreted> {
        self.kernels.get(name).cloned().ok_or_else(|| invalid(name, "no kernel of this name in the module"))
    }
}

/// A syntax error in the module, naming the line.
fn invalid(line: &str, what: &str) -> Error {
    Error::Compile { tool: "the kernel-IR interpreter".into(), message: format!("{what}: `{}`", line.trim()) }
}

/// Parses every kernel of `source`; comment lines (the prelude, custom ops) are skipped, and a
/// custom op's call is resolved among `custom_ops` by its function's name.
pub(super) fn module(source: &str, custom_ops: &[CustomOp]) -> Result<Module> {
    let mut kernels = HashMap::new();
    let mut lines = source.lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//")).peekable();
    while let Some(header) = lines.next() {
        let mut body = Vec::new();
        while let Some(line) = lines.next_if(|l| !l.starts_with("kernel ")) {
            body.push(line);
        }
        let kernel = kernel(header, &body, custom_ops)?;
        kernels.insert(kernel.name.clone(), kernel);
    }
    Ok(Module { kernels })
}

/// One kernel: its header line and the lines after it.
fn kernel(header: &str, body: &[&str], custom_ops: &[CustomOp]) -> Result<Interpreted> {
    let signature = header.strip_prefix("kernel ").and_then(|h| h.strip_suffix(')'));
    let (name, args) =
        signature.and_then(|s| s.split_once('(')).ok_or_else(|| invalid(header, "expected `kernel NAME(ARGS)`"))?;
    // `in_ptr0 = arg0`, or `in_ptr0 = arg0: bf16` for a buffer that is not `f32`.
    let args: Vec<&str> = args.split(", ").filter(|a| !a.is_empty()).collect();
    let dtypes = args
        .iter()
        .map(|a| match a.rsplit_once(": ") {
            Some((_, dtype)) => dtype.parse::<DType>().map_err(|_| invalid(header, "an argument's dtype")),
            None => Ok(DType::F32),
        })
        .collect::<Result<Vec<_>>>()?;
    let args: Vec<&str> = args.iter().map(|a| a.split(" = ").next().unwrap_or(a)).collect();
    let parser = Parser { args: &args, custom_ops };
    let (loop_line, rest) = body.split_first().ok_or_else(|| invalid(header, "a kernel without a loop"))?;
    let extent =
        loop_line.trim().strip_prefix("for x in 0..").ok_or_else(|| invalid(loop_line, "expected `for x in 0..N`"))?;
    let body = match extent.split_once(" (rows of ") {
        None if extent.contains(" (loop ") => Body::Foreach(parser.parts(body)?),
        None => Body::Pointwise(rest.iter().map(|l| parser.stmt(l)).collect::<Result<_>>()?),
        Some((_, row)) => {
            let row_len = row
                .strip_suffix("):")
                .and_then(|r| r.parse().ok())
                .ok_or_else(|| invalid(loop_line, "a row length"))?;
            Body::Rows { row_len, phases: parser.phases(rest)? }
        }
    };
    let mut written = vec![false; args.len()];
    let mut mark = |stmts: &[Stmt]| {
        for stmt in stmts {
            if let Stmt::Store { arg, .. } = stmt {
                written[*arg] = true;
            }
        }
    };
    match &body {
        Body::Pointwise(stmts) => mark(stmts),
        Body::Foreach(parts) => parts.iter().for_each(|(_, stmts)| mark(stmts)),
        Body::Rows { phases, .. } => {
            for phase in phases {
                match phase {
                    Phase::Row(stmts) | Phase::Loop { stmts, .. } => mark(stmts),
                }
            }
        }
    }
    Ok(Interpreted { name: name.to_string(), written, dtypes, body })
}

/// What statements refer to: the kernel's argument names and the custom ops of the module.
struct Parser<'a> {
    args: &'a [&'a str],
    custom_ops: &'a [CustomOp],
}

impl Parser<'_> {
    /// The loops of a foreach kernel: each `for x in 0..N (loop i of n):` line starts one, whose
    /// statements follow it.
    fn parts(&self, lines: &[&str]) -> Result<Vec<(usize, Vec<Stmt>)>> {
        let mut parts: Vec<(usize, Vec<Stmt>)> = Vec::new();
        for line in lines {
            match (line.trim().strip_prefix("for x in 0.."), parts.last_mut()) {
                (Some(extent), _) => {
                    let n = extent.split_once(" (loop ").and_then(|(n, _)| n.parse().ok());
                    parts
                        .push((n.ok_or_else(|| invalid(line, "expected `for x in 0..N (loop I of M):`"))?, Vec::new()));
                }
                (None, Some((_, stmts))) => stmts.push(self.stmt(line)?),
                (None, None) => return Err(invalid(line, "a statement outside any loop")),
            }
        }
        Ok(parts)
    }

    /// The phases of a row: statements indented by four spaces are the row's, a `for r` line
    /// starts a loop whose statements and reductions are indented by six.
    fn phases(&self, lines: &[&str]) -> Result<Vec<Phase>> {
        let mut phases: Vec<Phase> = Vec::new();
        for line in lines {
            let indent = line.len() - line.trim_start().len();
            let text = line.trim();
            match (indent, phases.last_mut()) {
                (4, _) if text.starts_with("for r in 0..") => {
                    phases.push(Phase::Loop { stmts: Vec::new(), reductions: Vec::new() })
                }
                (4, Some(Phase::Row(stmts))) => stmts.push(self.stmt(text)?),
                (4, _) => phases.push(Phase::Row(vec![self.stmt(text)?])),
                (6, Some(Phase::Loop { stmts, reductions })) => match text.split_once(" over r of ") {
                    Some((target, value)) => reductions.push(self.reduction(target, value, line)?),
                    None => stmts.push(self.stmt(text)?),
                },
                _ => return Err(invalid(line, "a statement outside any row or loop")),
            }
        }
        Ok(phases)
    }

    /// `tmpN = sum` (or `max`) with the value after `over r of`.
    fn reduction(&self, target: &str, value: &str, line: &str) -> Result<Reduce> {
        let (tmp, combine) =
            target.split_once(" = ").ok_or_else(|| invalid(line, "expected `tmpN = sum over r of V`"))?;
        let combine = match combine {
            "sum" => Combine::Sum,
            "max" => Combine::Max,
            _ => return Err(invalid(line, "a reduction is `sum` or `max`")),
        };
        Ok(Reduce { tmp: self.tmp(tmp, line)?, combine, value: self.value(value, line)? })
    }

    /// A load (`tmpN = ARG[INDEX]`), a computation (`tmpN = OP(V, ...)`) or a store (`ARG[INDEX] = V`).
    fn stmt(&self, line: &str) -> Result<Stmt> {
        let text = line.trim();
        let (left, right) = text.split_once(" = ").ok_or_else(|| invalid(line, "expected an assignment"))?;
        if let Some((arg, index)) = self.element(left, line)? {
            return Ok(Stmt::Store { arg, index, value: self.value(right, line)? });
        }
        let tmp = self.tmp(left, line)?;
        if let Some((arg, index)) = self.element(right, line)? {
            return Ok(Stmt::Load { tmp, arg, index });
        }
        let (name, operands) = right
            .strip_suffix(')')
            .and_then(|r| r.split_once('('))
            .ok_or_else(|| invalid(line, "expected `OP(OPERANDS)`"))?;
        let operands: Vec<Value> = operands.split(", ").map(|v| self.value(v, line)).collect::<Result<_>>()?;
        Ok(Stmt::Compute { tmp, op: self.op(name, operands.len(), line)?, operands })
    }

    /// `ARG[INDEX]` as the argument's position and the index; `None` for text of another form.
    fn element(&self, text: &str, line: &str) -> Result<Option<(usize, FlatIndex)>> {
        let Some((name, index)) = text.strip_suffix(']').and_then(|t| t.split_once('[')) else { return Ok(None) };
        let arg = self
            .args
            .iter()
            .position(|a| *a == name)
            .ok_or_else(|| invalid(line, "an argument the kernel does not take"))?;
        Ok(Some((arg, index_of(index).ok_or_else(|| invalid(line, "an index expression"))?)))
    }

    fn tmp(&self, text: &str, line: &str) -> Result<usize> {
        text.strip_prefix("tmp")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| invalid(line, "expected a temporary `tmpN`"))
    }

    /// `tmpN`, or a float constant as `{:?}` prints it (`2.0`, `-inf`, `NaN`, `1e-5`).
    fn value(&self, text: &str, line: &str) -> Result<Value> {
        if text.starts_with("tmp") {
            return Ok(Value::Tmp(self.tmp(text, line)?));
        }
        text.parse().map(Value::Constant).map_err(|_| invalid(line, "expected a temporary or a constant"))
    }

    /// The scalar function called `name` with `arity` operands.
    fn op(&self, name: &str, arity: usize, line: &str) -> Result<PointwiseOp> {
        let op = match (name, arity) {
            ("copy", 1) => Some(PointwiseOp::Copy),
            ("where", 3) => Some(PointwiseOp::Where),
            (_, 1) if name.starts_with("to_") => {
                DType::ALL.into_iter().map(PointwiseOp::ToDtype).find(|op| op.name() == name)
            }
            (_, 1) => UnaryOp::ALL.into_iter().find(|u| u.name() == name).map(PointwiseOp::Unary),
            (_, 2) => BinaryOp::ALL.into_iter().find(|b| b.name() == name).map(PointwiseOp::Binary),
            _ => None,
        };
        let custom = || self.custom_ops.iter().find(|c| c.function() == name && c.arity() == arity).cloned();
        op.or_else(|| custom().map(PointwiseOp::Custom))
            .ok_or_else(|| invalid(line, "an unknown op, or one with other operands"))
    }
}

/// An index as [`FlatIndex::to_c`] prints it: an offset and terms over `x` and `r`, outermost
/// first (`128 + (x / 32) * 8 + r`).
fn index_of(text: &str) -> Option<FlatIndex> {
    let mut parts = text.split(" + ").peekable();
    let offset = parts.next_if(|p| p.parse::<usize>().is_ok()).map_or(Some(0), |p| p.parse().ok())?;
    let mut terms: Vec<Term> = parts.map(term).collect::<Option<_>>()?;
    terms.reverse();
    Some(FlatIndex { offset, terms })
}

/// One term, `((v / div) % modulo) * coeff` with each part left out where it is 1 or absent.
fn term(text: &str) -> Option<Term> {
    let unwrap =
        |s: &'_ str| -> String { s.strip_prefix('(').and_then(|s| s.strip_suffix(')')).unwrap_or(s).to_string() };
    let (inner, coeff) = match text.rsplit_once(" * ") {
        Some((left, c)) => (unwrap(left), c.parse().ok()?),
        None => (text.to_string(), 1),
    };
    let (inner, modulo) = match inner.rsplit_once(" % ") {
        Some((left, m)) => (unwrap(left), Some(m.parse().ok()?)),
        None => (inner.clone(), None),
    };
    let (var, div) = match inner.split_once(" / ") {
        Some((v, d)) => (v.to_string(), d.parse().ok()?),
        None => (inner, 1),
    };
    let var = match var.as_str() {
        "x" => Var::X,
        "r" => Var::R,
        _ => return None,
    };
    Some(Term { var, div, modulo, coeff })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fx::trace;
    use crate::inductor::kernel::KernelBody;
    use crate::inductor::{Config, kernels};
    use crate::tensor::Tensor;

    /// Each kernel's body, printed and parsed back, is the body it was printed from.
    fn round_trip(inputs: &[Tensor], f: impl Fn(&[Tensor]) -> crate::Result<Tensor>) {
        let traced = trace(inputs, |t| Ok(vec![f(t)?])).unwrap();
        for k in kernels(&traced.graph, &Config::default()).unwrap() {
            let parsed = module(&k.to_string(), &[]).unwrap().kernel(&k.name).unwrap();
            let expected = match &k.body {
                KernelBody::Pointwise(stmts) => Body::Pointwise(stmts.clone()),
                KernelBody::Foreach(parts) => {
                    Body::Foreach(parts.iter().map(|p| (p.xnumel, p.stmts.clone())).collect())
                }
                KernelBody::Reduction { row_len, phases, .. } => {
                    Body::Rows { row_len: *row_len, phases: phases.clone() }
                }
            };
            assert_eq!(parsed.body, expected, "{k}");
            let stores = |a: usize| k.args[a].output;
            assert_eq!(parsed.written, (0..k.args.len()).map(stores).collect::<Vec<_>>(), "{k}");
        }
    }

    #[test]
    fn printed_kernels_parse_back_to_their_ir() {
        let x = Tensor::randn(&[6, 10], 0);
        let b = Tensor::randn(&[10], 1);
        round_trip(&[x.clone(), b.clone()], |t| t[0].add(&t[1])?.gelu()?.mul(-2.5));
        round_trip(std::slice::from_ref(&x), |t| t[0].softmax(-1));
        round_trip(std::slice::from_ref(&x), |t| t[0].log_softmax(0));
        round_trip(&[x.clone(), b], |t| t[0].t()?.add(&t[0].sum(1, true)?.t()?)?.amax(0, false));
        round_trip(std::slice::from_ref(&x), |t| {
            t[0].slice(1, 2, 10, 3)?.relu()?.where_(&t[0].slice(1, 0, 3, 1)?, f32::NEG_INFINITY)
        });
    }

    #[test]
    fn indices_parse_in_every_printed_form() {
        for text in [
            "x",
            "0",
            "5",
            "x % 32",
            "x / 32",
            "(x / 4) % 8",
            "x * 16 + r",
            "r * 16 + x",
            "2 + (x / 4) * 10 + (x % 4) * 2",
            "((x / 4) % 8) * 3",
        ] {
            assert_eq!(index_of(text).map(|i| i.to_c()).as_deref(), Some(text));
        }
        assert!(index_of("y + 1").is_none());
    }

    #[test]
    fn malformed_text_is_an_error_naming_the_line() {
        let bad = "kernel poi_0(in_ptr0 = arg0, out_ptr0 = buf0)\n  for x in 0..4:\n    tmp0 = in_ptr9[x]\n";
        let error = module(bad, &[]).err().unwrap().to_string();
        assert!(error.contains("in_ptr9[x]") && error.contains("argument"), "{error}");
        let bad = "kernel poi_0(out_ptr0 = buf0)\n  for x in 0..4:\n    out_ptr0[x] = frobnicate(1.0)\n";
        assert!(module(bad, &[]).is_err());
    }
}
