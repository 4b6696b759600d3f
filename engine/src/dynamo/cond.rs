//! `cond`, the analogue of `torch.cond`: data-dependent control flow that stays in the graph.
//! Both branches are traced into subgraphs and the graph holds one node that runs the right one,
//! so a branch on a tensor's value needs no graph break.

use crate::error::{Error, Result, SourceLocation};
use crate::fx::proxy::{self, Traced, Tracer, is_tracing};
use crate::logs::{self, Artifact};
use crate::op::Op;
use crate::tensor::{Operand, Tensor};

/// Returns `true_fn(operands)` when the one-element tensor `pred` is nonzero, `false_fn(operands)`
/// otherwise, like `torch.cond(pred, true_fn, false_fn, operands)`.
///
/// Eagerly it evaluates `pred` and calls one branch. Inside a compiled function it traces both
/// branches into subgraphs and records one `cond` node: no graph break. Both branches must return
/// one tensor of the same shape. A branch may use tensors it captures (weights, or values of the
/// enclosing function); they become extra operands of the node.
///
/// If a branch itself breaks the graph (it calls `item()`, say), the branches cannot be captured:
/// under `fullgraph(true)` that is an error naming the branch's line; otherwise `cond` falls back
/// to a graph break on `pred` and runs the branch it picks as ordinary code.
///
/// ```
/// use engine::{dynamo, Tensor};
/// let f = dynamo::compile(|x: Tensor| {
///     let positive = x.sum_all()?.gt(0.0)?;
///     dynamo::cond(&positive, |xs| xs[0].mul(2.0), |xs| xs[0].neg(), &[&x])
/// })
/// .fullgraph(true);
/// assert_eq!(f.call(&Tensor::from_vec(vec![1.0, 2.0], &[2])?)?.to_vec()?, vec![2.0, 4.0]);
/// assert_eq!(f.call(&Tensor::from_vec(vec![-1.0, -2.0], &[2])?)?.to_vec()?, vec![1.0, 2.0]);
/// # Ok::<(), engine::Error>(())
/// ```
#[track_caller]
pub fn cond<T, E>(pred: &Tensor, true_fn: T, false_fn: E, operands: &[&Tensor]) -> Result<Tensor>
where
    T: Fn(&[Tensor]) -> Result<Tensor>,
    E: Fn(&[Tensor]) -> Result<Tensor>,
{
    let location = SourceLocation::caller();
    if pred.numel() != 1 {
        return Err(Error::InvalidArgument {
            op: "cond",
            message: format!("the predicate must have exactly one element, got shape {:?}", pred.shape()),
            location,
        });
    }
    let operands: Vec<Tensor> = operands.iter().map(|&t| t.clone()).collect();
    if !is_tracing() {
        return if pred.item()? != 0.0 { true_fn(&operands) } else { false_fn(&operands) };
    }
    match capture(pred, &true_fn, &false_fn, &operands, location) {
        Err(Error::GraphBreak { reason, location: inner }) => {
            fall_back(pred, &true_fn, &false_fn, &operands, location, &reason, inner)
        }
        result => result,
    }
}

/// Traces both branches and records the `cond` node.
fn capture(
    pred: &Tensor,
    true_fn: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    false_fn: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    operands: &[Tensor],
    location: SourceLocation,
) -> Result<Tensor> {
    let n = operands.len();
    let mut true_branch = trace_branch(true_fn, operands, &[])?;
    let true_captures = bound(&true_branch, n);
    let false_branch = trace_branch(false_fn, operands, &true_captures)?;
    let false_captures = bound(&false_branch, n + true_captures.len());
    // Both subgraphs take every operand: append the false branch's own captures to the true one.
    for (k, tensor) in false_captures.iter().enumerate() {
        let meta = tensor.meta();
        let strides = crate::layout::contiguous_strides(&meta.shape);
        true_branch.graph.add_placeholder(&format!("arg{}", n + true_captures.len() + k), meta, strides);
    }
    let op = Op::Cond { true_graph: true_branch.graph.into(), false_graph: false_branch.graph.into() };
    let mut args = vec![Operand::Tensor(pred)];
    args.extend(operands.iter().chain(&true_captures).chain(&false_captures).map(Operand::Tensor));
    op.apply(&args, location)
}

/// Traces one branch on placeholders for the operands and for `captures` (the other branch's
/// captured tensors, so that both subgraphs take them in the same order).
fn trace_branch(f: &dyn Fn(&[Tensor]) -> Result<Tensor>, operands: &[Tensor], captures: &[Tensor]) -> Result<Traced> {
    let tracer = Tracer::branch();
    let inputs: Vec<Tensor> = operands.iter().map(|t| tracer.operand(t)).collect();
    for capture in captures {
        tracer.operand(capture);
    }
    let output = f(&inputs)?;
    tracer.finish(&[output])
}

/// The tensors bound to a branch's placeholders from index `from` on: what it captured.
fn bound(branch: &Traced, from: usize) -> Vec<Tensor> {
    branch.inputs[from..].iter().map(|t| t.clone().expect("branch inputs are bound")).collect()
}

/// A branch broke the graph: an error where breaks are not allowed, otherwise a break on `pred`
/// and the chosen branch run as ordinary (traced) code.
fn fall_back(
    pred: &Tensor,
    true_fn: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    false_fn: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    operands: &[Tensor],
    location: SourceLocation,
    reason: &str,
    inner: SourceLocation,
) -> Result<Tensor> {
    let why = format!("a branch of `cond` (at {}) breaks the graph: {reason}", location.short());
    if !proxy::breaks_allowed() {
        return Err(Error::GraphBreak { reason: why, location: inner });
    }
    logs::log(Artifact::GraphBreaks, || {
        format!("{why} (at {}); falling back to a graph break on the predicate", inner.short())
    });
    let value = proxy::concretize(pred, &format!("`cond` fell back to Rust control flow because {why}"), location)?;
    if value.item()? != 0.0 { true_fn(operands) } else { false_fn(operands) }
}
