//! Checks of `can_fuse`: known cases, reasons for refusals, and the decision plugged into the
//! real scheduler: outputs must match eager execution with no more kernels than the engine's.

use std::cell::RefCell;

use engine::backends::Inductor;
use engine::inductor::scheduler::{self, Access, Decision, FusionCandidate, FusionKind, GroupRead, LoopKind};
use engine::{Result, Tensor};
use grader_harness::{CheckResult, Context, Failure, ensure, record, wires};

use super::support::matches_eager;
use crate::subject::{can_fuse, catalogue};

fn candidate(group: LoopKind, own: LoopKind, access: Option<Access>) -> FusionCandidate {
    FusionCandidate {
        group,
        group_ops: vec!["add".into(), "exp".into()],
        node: "mul_1".into(),
        op: if own == LoopKind::Extern { "matmul".into() } else { "mul".into() },
        own,
        reads: access.into_iter().map(|access| GroupRead { buffer: "buf3".into(), access }).collect(),
    }
}

/// Hand-made candidates and the engine's decision for each (`None`: refuse), over `rows x cols`
/// tensors whose sizes are drawn from the seed (`rows != cols`).
fn known_cases(ctx: &Context) -> Vec<(String, FusionCandidate, Option<FusionKind>)> {
    let r = 2 + (ctx.seed % 7) as usize;
    let c = r + 1 + ((ctx.seed / 7) % 5) as usize;
    let pw = |s: &[usize]| LoopKind::Pointwise { shape: s.to_vec() };
    let red = |s: &[usize], dim| LoopKind::Reduction { shape: s.to_vec(), dim };
    let node = |s: &[usize]| LoopKind::Pointwise { shape: s.to_vec() };
    let reduce = |s: &[usize], dim| LoopKind::Reduction { shape: s.to_vec(), dim };
    let same = Some(Access::SameElement);
    let row = Some(Access::RowValue);
    let other = Some(Access::Other);
    let cases = vec![
        (
            "pointwise after pointwise, same shape",
            candidate(pw(&[r, c]), node(&[r, c]), same),
            Some(FusionKind::Pointwise),
        ),
        ("pointwise after pointwise, other shape", candidate(pw(&[r, c]), node(&[c, r]), same), None),
        ("pointwise reading a transposed buffer", candidate(pw(&[r, r]), node(&[r, r]), other), None),
        (
            "reduction of the group's shape",
            candidate(pw(&[r, c]), reduce(&[r, c], 1), same),
            Some(FusionKind::ReductionPrologue),
        ),
        ("reduction of another shape", candidate(pw(&[r, c]), reduce(&[c, c], 1), same), None),
        ("reduction reading through a view", candidate(pw(&[r, c]), reduce(&[r, c], 0), other), None),
        (
            "element op in a reduction kernel",
            candidate(red(&[r, c], 1), node(&[r, c]), row),
            Some(FusionKind::RowEpilogue),
        ),
        (
            "row op (keepdim) in a reduction kernel",
            candidate(red(&[r, c], 1), node(&[r, 1]), row),
            Some(FusionKind::PerRow),
        ),
        (
            "row op (squeezed) in a reduction kernel",
            candidate(red(&[r, c], 0), node(&[c]), row),
            Some(FusionKind::PerRow),
        ),
        ("op over the wrong dim's rows", candidate(red(&[r, c], 1), node(&[c]), row), None),
        (
            "second reduction, same rows",
            candidate(red(&[r, c], 1), reduce(&[r, c], 1), same),
            Some(FusionKind::AnotherReduction),
        ),
        ("second reduction, other dim", candidate(red(&[r, c], 1), reduce(&[r, c], 0), same), None),
        ("element op reading through a view", candidate(red(&[r, c], 1), node(&[r, c]), other), None),
        ("matmul after pointwise", candidate(pw(&[r, c]), LoopKind::Extern, None), None),
        ("pointwise after matmul", candidate(LoopKind::Extern, node(&[r, c]), same), None),
    ];
    cases.into_iter().map(|(what, case, kind)| (format!("{what} (rows {r}, cols {c})"), case, kind)).collect()
}

/// The subject decides every hand-made case as Inductor does.
pub fn decides_known_cases(ctx: &Context) -> CheckResult {
    let cases = known_cases(ctx);
    for (what, c, expected) in &cases {
        let got = can_fuse(c);
        record(what.as_str(), decided(&got));
        let right = match (expected, &got) {
            (Some(kind), Decision::Fuse(k)) => kind == k,
            (None, Decision::Refuse(_)) => true,
            _ => false,
        };
        ensure(right, || {
            let wanted = match expected {
                Some(kind) => format!("Fuse({kind:?})"),
                None => "Refuse(..)".into(),
            };
            format!("{what}: expected {wanted}, got {got:?} for\n{c:#?}")
        })?;
    }
    Ok(format!("{} hand-made candidates decided as Inductor decides them", cases.len()))
}

/// Every refusal says why; a refusal caused by a read names the buffer.
pub fn refusals_give_reasons(ctx: &Context) -> CheckResult {
    let mut refusals = 0;
    for (what, c, expected) in known_cases(ctx) {
        if expected.is_some() {
            continue;
        }
        let Decision::Refuse(reason) = can_fuse(&c) else {
            return Err(Failure::fail(format!("{what}: must be refused, got {:?}", can_fuse(&c))));
        };
        let by_read = c.reads.iter().any(|r| r.access == Access::Other)
            && matches!(wires::exempt(|| scheduler::can_fuse(&c)), Decision::Refuse(ref r) if r.contains("buf3"));
        record(
            what.as_str(),
            format!("explained: {}, names buf3: {}", reason.trim().len() >= 10, reason.contains("buf3") || !by_read),
        );
        ensure(reason.trim().len() >= 10, || format!("{what}: the reason {reason:?} does not explain the refusal"))?;
        ensure(!by_read || reason.contains("buf3"), || {
            format!("{what}: the refusal is caused by the read of buf3, but your reason does not name it: {reason:?}")
        })?;
        refusals += 1;
    }
    Ok(format!("{refusals} refusals, each with a reason"))
}

/// A decision as the judge compares it: the kind of fusion, or a refusal (whatever its words).
fn decided(decision: &Decision) -> String {
    match decision {
        Decision::Fuse(kind) => format!("Fuse({kind:?})"),
        Decision::Refuse(_) => "Refuse".into(),
    }
}

thread_local! {
    static SEEN: RefCell<Vec<FusionCandidate>> = const { RefCell::new(Vec::new()) };
}

/// The subject's decision, recording each candidate it was asked about. It runs inside the
/// grader's compilation, past the wires (the scheduler checks every "fuse" against the engine's
/// own decision), so the subject's code arms them again.
fn recording(c: &FusionCandidate) -> Decision {
    SEEN.with(|seen| seen.borrow_mut().push(c.clone()));
    wires::learner(|| can_fuse(c))
}

/// More models than the catalogue: chains of every fusion kind.
fn extra_models(seed: u64) -> Vec<(&'static str, crate::subject::Model, Vec<Tensor>)> {
    fn chain(t: Vec<Tensor>) -> Result<Tensor> {
        t[0].mul(&t[1])?.add(1.0)?.tanh()?.sub(&t[0])?.relu()
    }
    fn norm_then_scale(t: Vec<Tensor>) -> Result<Tensor> {
        let centred = t[0].sub(&t[0].mean(-1, true)?)?;
        centred.div(&centred.mul(&centred)?.mean(-1, true)?.add(1e-5)?.sqrt()?)?.mul(&t[1])
    }
    fn matmul_softmax(t: Vec<Tensor>) -> Result<Tensor> {
        t[0].matmul(&t[1])?.mul(0.125)?.softmax(-1)?.matmul(&t[2])
    }
    let r = |shape: &[usize], k: u64| Tensor::randn(shape, seed.wrapping_mul(8).wrapping_add(k));
    vec![
        ("chain", chain as crate::subject::Model, vec![r(&[37, 11], 0), r(&[37, 11], 1)]),
        ("norm_then_scale", norm_then_scale, vec![r(&[9, 50], 0), r(&[50], 1)]),
        ("matmul_softmax", matmul_softmax, vec![r(&[6, 16], 0), r(&[16, 6], 1), r(&[6, 16], 2)]),
    ]
}

/// Plugged into the scheduler, the subject's decision compiles every model correctly, with no
/// more kernels than the engine's own decision, and agrees with it on every candidate.
pub fn fuses_as_much_as_inductor(ctx: &Context) -> CheckResult {
    let mut models = catalogue(ctx.seed);
    models.extend(extra_models(ctx.seed));
    let mut candidates = 0;
    for (name, model, inputs) in &models {
        SEEN.with(|seen| seen.borrow_mut().clear());
        let yours = wires::exempt(|| {
            matches_eager(&format!("model `{name}`"), Inductor::with_fusion_policy(recording), model, inputs)
        })?;
        record(format!("kernels of model `{name}`"), format!("{:?}", yours.kernel_names()));
        let reference = Inductor::default();
        let expected = wires::exempt(|| matches_eager(&format!("model `{name}`"), reference, model, inputs))?;
        ensure(yours.kernels.len() <= expected.kernels.len(), || {
            format!(
                "model `{name}`: your decision leaves {} kernels {:?}, Inductor's {} {:?}. Run with \
                 ENGINE_LOGS=fusion to see every decision.",
                yours.kernels.len(),
                yours.kernel_names(),
                expected.kernels.len(),
                expected.kernel_names()
            )
        })?;
        for c in SEEN.with(|seen| seen.take()) {
            let (mine, theirs) = (can_fuse(&c), wires::exempt(|| scheduler::can_fuse(&c)));
            record(format!("decision for {} in model `{name}`", c.node), decided(&mine));
            let agree = matches!((&mine, &theirs), (Decision::Refuse(_), Decision::Refuse(_))) || mine == theirs;
            ensure(agree, || {
                format!("model `{name}`: you decided {mine:?} where Inductor decides {theirs:?}, for\n{c:#?}")
            })?;
            candidates += 1;
        }
    }
    Ok(format!("{} models match eager with Inductor's kernel counts; {candidates} decisions agree", models.len()))
}
