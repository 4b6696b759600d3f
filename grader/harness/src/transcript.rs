//! What a check run records of the subject's answers, so that the verdict can be decided by a
//! process that runs no learner code.
//!
//! A check both judges in place (for a readable failure message) and records every answer it
//! judged: the learner's tensors, counts and texts. The learner's process cannot be trusted to say
//! "pass", so the grader hands its transcript to the *judge*: the same check, built against the
//! reference solution, run with the same seed. The judge records the reference's answers and
//! compares the two transcripts entry by entry, with the tolerances the judge itself chose. A
//! forged "pass" has to reproduce answers to inputs drawn from a seed the grader picked for this
//! run, which is the exercise itself.

use std::borrow::Cow;
use std::fmt::{self, Display};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use engine::Tensor;
use serde::{Deserialize, Serialize};

use crate::tolerance::Tolerance;

/// The most tensor elements one entry keeps; larger tensors keep an evenly strided sample plus
/// their sum, so transcripts stay small without letting a wrong region go unseen in aggregate.
const MAX_ELEMENTS: usize = 1 << 14;

/// One recorded answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// What the value is, as the check names it (`output 0 of case 3`).
    pub label: String,
    /// The value.
    pub value: Recorded,
}

/// A recorded value and how the judge compares it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recorded {
    /// Float values of a tensor, compared within the judge's tolerance.
    Floats {
        /// The tensor's shape.
        shape: Vec<usize>,
        /// Its values (a strided sample of large tensors, then their sum).
        values: Vec<f32>,
        /// Allowed `|diff|`: absolute part.
        abs: f32,
        /// Allowed `|diff|`: relative part.
        rel: f32,
    },
    /// Anything else, compared exactly as text: counts, names, reasons, printed graphs.
    Text(String),
    /// Something the subject made that the judge evaluates itself rather than compares: a
    /// kernel's source, compiled and timed by the judge (see [`judged_artifact`]).
    Artifact(String),
}

impl Recorded {
    /// The values of `tensor` with `tolerance`, or the tensor's read error as text.
    pub fn tensor(tensor: &Tensor, tolerance: Tolerance) -> Recorded {
        match tensor.to_vec() {
            Ok(all) => Recorded::Floats {
                shape: tensor.shape().to_vec(),
                values: sample(&all),
                abs: tolerance.abs,
                rel: tolerance.rel,
            },
            Err(error) => Recorded::Text(format!("unreadable tensor: {error}")),
        }
    }
}

impl Display for Recorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recorded::Text(text) => write!(f, "{text:?}"),
            Recorded::Artifact(text) => write!(f, "{} bytes of your code", text.len()),
            Recorded::Floats { shape, values, .. } => {
                let shown: Vec<String> = values.iter().take(6).map(|v| format!("{v:.6}")).collect();
                let more = if values.len() > 6 { ", ..." } else { "" };
                write!(f, "a tensor of shape {shape:?}: [{}{more}]", shown.join(", "))
            }
        }
    }
}

fn sample(all: &[f32]) -> Vec<f32> {
    if all.len() <= MAX_ELEMENTS {
        return all.to_vec();
    }
    let stride = all.len().div_ceil(MAX_ELEMENTS);
    let mut kept: Vec<f32> = all.iter().step_by(stride).copied().collect();
    kept.push(all.iter().map(|&v| f64::from(v)).sum::<f64>() as f32);
    kept
}

/// The entries recorded so far in this process (a runner runs one check per process).
static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// Records `value` under `label`, to be compared exactly (as its `Display` text).
pub fn record(label: impl Into<String>, value: impl Display) {
    push(label.into(), Recorded::Text(value.to_string()));
}

/// Records a tensor the subject computed, to be compared within `tolerance`.
pub fn record_tensor(label: impl Into<String>, tensor: &Tensor, tolerance: Tolerance) {
    push(label.into(), Recorded::tensor(tensor, tolerance));
}

/// Records something the subject made (a kernel's source) for the judge to evaluate itself:
/// the judge's run of the check reads it back with [`judged_artifact`].
pub fn record_artifact(label: impl Into<String>, text: impl Into<String>) {
    push(label.into(), Recorded::Artifact(text.into()));
}

/// A short fingerprint of `case` (FNV-1a of its `Debug` text, in hex), to label an artifact with
/// the case it answers: the judge reads an answer back only for the case it was made for.
pub fn fingerprint(case: &impl fmt::Debug) -> String {
    let shown = format!("{case:?}");
    let hash = shown.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3));
    format!("{hash:016x}")
}

/// The subject's transcript, in the judge's process.
static JUDGED: OnceLock<Vec<Entry>> = OnceLock::new();

/// Whether this judge's run of the check evaluated an artifact of the subject's.
static ARTIFACT_USED: AtomicBool = AtomicBool::new(false);

/// In the judge, the artifact the subject recorded under `label`: the check evaluates that
/// instead of the reference's own. `None` outside a judge, or when the subject recorded none.
pub fn judged_artifact(label: &str) -> Option<String> {
    let artifact = JUDGED.get()?.iter().find_map(|e| match &e.value {
        Recorded::Artifact(text) if e.label == label => Some(text.clone()),
        _ => None,
    })?;
    ARTIFACT_USED.store(true, Ordering::SeqCst);
    Some(artifact)
}

/// Whether this process judges another run's transcript: false in the run of the learner's code
/// (or of the solutions, checked as the subject). A check whose judge measures the subject's
/// artifact itself can skip measuring it in the subject's run, whose word on a pass is never taken.
pub fn is_judging() -> bool {
    JUDGED.get().is_some()
}

/// Makes this process a judge of `subject`'s transcript (see [`judged_artifact`]).
pub(crate) fn judge_of(subject: Vec<Entry>) {
    let _ = JUDGED.set(subject);
}

/// Whether [`judged_artifact`] handed the check one of the subject's artifacts.
pub(crate) fn artifact_used() -> bool {
    ARTIFACT_USED.load(Ordering::SeqCst)
}

/// Records numbers the subject computed, to be compared within `tolerance`.
pub fn record_floats(label: impl Into<String>, values: &[f32], tolerance: Tolerance) {
    let value =
        Recorded::Floats { shape: vec![values.len()], values: sample(values), abs: tolerance.abs, rel: tolerance.rel };
    push(label.into(), value);
}

fn push(label: String, value: Recorded) {
    ENTRIES.lock().unwrap_or_else(|e| e.into_inner()).push(Entry { label, value });
}

/// Everything recorded so far, leaving the record empty.
pub fn take() -> Vec<Entry> {
    std::mem::take(&mut *ENTRIES.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Compares the subject's transcript with the reference's, entry by entry. `Err` names the first
/// difference in words a learner can act on.
pub fn compare(reference: &[Entry], subject: &[Entry]) -> Result<(), String> {
    for (i, expected) in reference.iter().enumerate() {
        let Some(actual) = subject.get(i) else {
            return Err(format!(
                "your run recorded {} answers where the reference recorded {}: the first one missing is `{}`",
                subject.len(),
                reference.len(),
                expected.label
            ));
        };
        if actual.label != expected.label {
            return Err(format!(
                "answer {} is `{}` in your run but `{}` in the reference's: the check took another path",
                i + 1,
                actual.label,
                expected.label
            ));
        }
        if !agrees(&expected.value, &actual.value) {
            return Err(format!(
                "`{}` differs from the reference solution's answer; {}",
                expected.label,
                first_difference(&expected.value, &actual.value)
            ));
        }
    }
    if subject.len() > reference.len() {
        return Err(format!(
            "your run recorded {} answers where the reference recorded {}",
            subject.len(),
            reference.len()
        ));
    }
    Ok(())
}

/// Where `actual` first departs from `expected`, in a line: the first differing line of a text,
/// or the first value out of tolerance, with a few characters of context, never the whole
/// reference answer.
fn first_difference(expected: &Recorded, actual: &Recorded) -> String {
    const CONTEXT: usize = 40;
    match (expected, actual) {
        (Recorded::Text(e), Recorded::Text(a)) => {
            let (e, a) = (same_place(e), same_place(a));
            let at = e.chars().zip(a.chars()).take_while(|(x, y)| x == y).count();
            let line = e.chars().take(at).filter(|&c| c == '\n').count() + 1;
            let excerpt = |text: &str| -> String {
                let from = at.saturating_sub(CONTEXT / 2);
                let part: String = text.chars().skip(from).take(CONTEXT).collect();
                format!(
                    "{}{part:?}{}",
                    if from > 0 { "..." } else { "" },
                    if text.chars().count() > from + CONTEXT { "..." } else { "" }
                )
            };
            format!(
                "they first differ at character {} (line {line}):\n  yours:     {}\n  reference: {}",
                at + 1,
                excerpt(&a),
                excerpt(&e)
            )
        }
        (
            Recorded::Floats { shape, values, abs, rel },
            Recorded::Floats { shape: actual_shape, values: actual_values, .. },
        ) => {
            if shape != actual_shape || values.len() != actual_values.len() {
                return format!("yours has shape {actual_shape:?}, the reference's {shape:?}");
            }
            let tolerance = Tolerance { abs: 2.0 * abs, rel: 2.0 * rel };
            match values.iter().zip(actual_values).position(|(&e, &a)| !tolerance.accepts(a, e)) {
                Some(i) => format!(
                    "value {i} (of {}) is {} where the reference has {} (allowed |diff| <= {:e} + {:e}·|reference|)",
                    values.len(),
                    actual_values[i],
                    values[i],
                    tolerance.abs,
                    tolerance.rel
                ),
                None => "they differ".into(),
            }
        }
        (expected, actual) => format!("yours is {actual}, where the reference recorded {}", expected.kind()),
    }
}

impl Recorded {
    /// What kind of value this is, in words.
    fn kind(&self) -> &'static str {
        match self {
            Recorded::Floats { .. } => "numbers",
            Recorded::Text(_) => "a text",
            Recorded::Artifact(_) => "code of yours",
        }
    }
}

/// Whether `actual` agrees with the reference's `expected`. Both sides were checked against the
/// same expected values within the tolerance, so they may differ from each other by twice it.
fn agrees(expected: &Recorded, actual: &Recorded) -> bool {
    match (expected, actual) {
        (Recorded::Text(e), Recorded::Text(a)) => same_place(e) == same_place(a),
        // The judge evaluated the subject's artifact itself, in its own run of the check.
        (Recorded::Artifact(_), Recorded::Artifact(_)) => true,
        (
            Recorded::Floats { shape, values, abs, rel },
            Recorded::Floats { shape: actual_shape, values: actual_values, .. },
        ) => {
            let tolerance = Tolerance { abs: 2.0 * abs, rel: 2.0 * rel };
            shape == actual_shape
                && values.len() == actual_values.len()
                && values.iter().zip(actual_values).all(|(&e, &a)| tolerance.accepts(a, e))
        }
        _ => false,
    }
}

/// `text` with paths into the reference crates read as paths into the learner's: the two crates
/// have the same files, so a source location (`solutions/phase1-backends/src/model.rs:30`) names
/// the same line either way.
fn same_place(text: &str) -> Cow<'_, str> {
    if text.contains("solutions/") { text.replace("solutions/", "exercises/").into() } else { text.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(values: &[f32]) -> Entry {
        Entry {
            label: "y".into(),
            value: Recorded::Floats { shape: vec![values.len()], values: values.to_vec(), abs: 1e-5, rel: 1e-4 },
        }
    }

    #[test]
    fn equal_transcripts_agree_and_close_floats_too() {
        let text = Entry { label: "count".into(), value: Recorded::Text("3".into()) };
        compare(&[text.clone(), floats(&[1.0, 2.0])], &[text, floats(&[1.000_01, 2.0])]).unwrap();
    }

    #[test]
    fn a_different_value_a_missing_entry_and_an_extra_one_are_named() {
        let text = |v: &str| Entry { label: "count".into(), value: Recorded::Text(v.into()) };
        let wrong = compare(&[text("3")], &[text("4")]).unwrap_err();
        assert!(wrong.contains("`count` differs") && wrong.contains("\"4\"") && wrong.contains("\"3\""), "{wrong}");
        // A long answer is not shown whole: only around its first difference.
        let long = |tail: &str| text(&format!("{}{tail}{}", "a".repeat(500), "b".repeat(500)));
        let wrong = compare(&[long("X")], &[long("Y")]).unwrap_err();
        assert!(wrong.contains("character 501") && wrong.len() < 300, "{wrong}");
        let wrong = compare(&[floats(&[1.0, 2.0, 3.0])], &[floats(&[1.0, 2.5, 3.0])]).unwrap_err();
        assert!(wrong.contains("value 1 (of 3) is 2.5 where the reference has 2"), "{wrong}");
        assert!(compare(&[text("3")], &[]).unwrap_err().contains("the first one missing is `count`"));
        assert!(compare(&[text("3")], &[text("3"), text("3")]).unwrap_err().contains("recorded 2 answers"));
        assert!(compare(&[floats(&[1.0])], &[floats(&[1.1])]).is_err());
        assert!(compare(&[floats(&[f32::NAN])], &[floats(&[f32::NAN])]).is_ok());
        assert!(compare(&[floats(&[1.0])], &[text("1")]).is_err());
        let at = |place: &str| Entry { label: "graph".into(), value: Recorded::Text(format!("%relu  # {place}")) };
        compare(&[at("solutions/p/src/model.rs:3")], &[at("exercises/p/src/model.rs:3")]).unwrap();
        assert!(compare(&[at("solutions/p/src/model.rs:3")], &[at("exercises/p/src/model.rs:4")]).is_err());
    }

    #[test]
    fn large_tensors_keep_a_sample_and_their_sum() {
        let all: Vec<f32> = (0..100_000).map(|i| i as f32).collect();
        let kept = sample(&all);
        assert!(kept.len() <= MAX_ELEMENTS + 1);
        assert_eq!(*kept.last().unwrap(), all.iter().map(|&v| f64::from(v)).sum::<f64>() as f32);
    }
}
