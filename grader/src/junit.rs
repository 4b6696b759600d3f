//! `grader check ... --junit FILE`: the results as JUnit XML, the format CI systems (GitHub
//! Actions, GitLab, Jenkins) and autograders read. PyTorch's own CI publishes its test runs the
//! same way.
//!
//! One `<testsuite>` per phase, one `<testcase>` per check (`classname` = `phase.exercise`,
//! `name` = the check's id). A failed or not-started required check is a `<failure>`, a check
//! that could not run (a compile error) an `<error>`, a skipped check `<skipped>` with its reason.
//! Stretch exercises never fail a run, so a stretch check that did not pass is `<skipped>` too,
//! with its status and message.

use std::fmt::Write;

use grader_harness::Status;

use crate::report::{CheckReport, PhaseReport};
use crate::results::Stamp;

/// How a check appears in JUnit.
enum Verdict {
    Passed,
    /// A failure of this `type`: `fail` or `not_started`.
    Failure(&'static str),
    Error,
    Skipped,
}

fn verdict(check: &CheckReport) -> Verdict {
    match (check.status, check.stretch) {
        (Status::Pass, _) => Verdict::Passed,
        (_, true) | (Status::Skipped, _) => Verdict::Skipped,
        (Status::Fail, false) => Verdict::Failure("fail"),
        (Status::NotStarted, false) => Verdict::Failure("not_started"),
        (Status::Error, false) => Verdict::Error,
    }
}

/// The JUnit XML document for `reports`.
pub fn render(reports: &[PhaseReport], stamp: &Stamp) -> String {
    let count = |f: fn(&Verdict) -> bool| reports.iter().flat_map(|r| &r.checks).filter(|c| f(&verdict(c))).count();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"grader\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        count(|_| true),
        count(|v| matches!(v, Verdict::Failure(_))),
        count(|v| matches!(v, Verdict::Error)),
        count(|v| matches!(v, Verdict::Skipped)),
    );
    for report in reports {
        suite(&mut xml, report, stamp);
    }
    xml.push_str("</testsuites>\n");
    xml
}

fn suite(xml: &mut String, report: &PhaseReport, stamp: &Stamp) {
    let count = |f: fn(&Verdict) -> bool| report.checks.iter().filter(|c| f(&verdict(c))).count();
    let timestamp = stamp.checked_at.as_deref().map(|t| format!(" timestamp=\"{}\"", escape(t))).unwrap_or_default();
    let _ = writeln!(
        xml,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\"{timestamp}>",
        escape(&report.phase),
        report.checks.len(),
        count(|v| matches!(v, Verdict::Failure(_))),
        count(|v| matches!(v, Verdict::Error)),
        count(|v| matches!(v, Verdict::Skipped)),
    );
    xml.push_str("    <properties>\n");
    let properties = [
        ("subject", Some(report.subject.as_str().to_string())),
        ("seed", Some(report.seed.to_string())),
        ("learner", stamp.learner.clone()),
        ("grader_version", stamp.grader_version.clone()),
    ];
    for (name, value) in properties {
        if let Some(value) = value {
            let _ = writeln!(xml, "      <property name=\"{name}\" value=\"{}\"/>", escape(&value));
        }
    }
    xml.push_str("    </properties>\n");
    for check in &report.checks {
        case(xml, &report.phase, check);
    }
    xml.push_str("  </testsuite>\n");
}

fn case(xml: &mut String, phase: &str, check: &CheckReport) {
    let _ = write!(
        xml,
        "    <testcase classname=\"{}.{}\" name=\"{}\"",
        escape(phase),
        escape(&check.exercise),
        escape(&check.id)
    );
    if let Some(file) = check.location.as_deref().and_then(|l| l.rsplit_once(':')).map(|(file, _)| file) {
        let _ = write!(xml, " file=\"{}\"", escape(file));
    }
    let first_line = check.message.lines().next().unwrap_or("");
    let (tag, kind) = match verdict(check) {
        Verdict::Passed => {
            xml.push_str("/>\n");
            return;
        }
        Verdict::Failure(kind) => ("failure", format!(" type=\"{kind}\"")),
        Verdict::Error => ("error", " type=\"error\"".to_string()),
        Verdict::Skipped => ("skipped", String::new()),
    };
    let stretch = if check.stretch && check.status != Status::Skipped {
        format!("stretch exercise (optional), {}: ", check.status)
    } else {
        String::new()
    };
    let location = check.location.as_deref().map(|l| format!("\nat {l}")).unwrap_or_default();
    let _ = writeln!(
        xml,
        ">\n      <{tag}{kind} message=\"{}\">{}</{tag}>\n    </testcase>",
        escape(&format!("{stretch}{first_line}")),
        escape(&format!("{}{location}", check.message)),
    );
}

/// Text made safe for XML 1.0 attribute values and character data: the five special characters
/// escaped, and control characters XML forbids (ANSI colour codes, for example) dropped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use grader_harness::Subject;

    fn check(id: &str, status: Status, stretch: bool, message: &str) -> CheckReport {
        CheckReport {
            id: id.into(),
            exercise: "ex".into(),
            stretch,
            status,
            message: message.into(),
            location: Some("exercises/phase1-backends/src/a.rs:12".into()),
            answers: None,
        }
    }

    #[test]
    fn one_testcase_per_check_with_each_verdict() {
        let checks = vec![
            check("passes", Status::Pass, false, "ok"),
            check("fails", Status::Fail, false, "expected <2> & got \"3\"\nsecond line \u{1b}[31m"),
            check("todo", Status::NotStarted, false, "not started"),
            check("broken", Status::Error, false, "does not compile"),
            check("no_gpu", Status::Skipped, false, "needs a GPU"),
            check("optional", Status::Fail, true, "wrong"),
        ];
        let report = PhaseReport { phase: "phase1".into(), subject: Subject::Exercises, seed: 7, checks };
        let xml = render(&[report], &Stamp::now(Some("Ada <a@b>".into())));
        let document = roxmltree::Document::parse(&xml).expect("well-formed XML");
        let root = document.root_element();
        assert_eq!(root.tag_name().name(), "testsuites");
        assert_eq!(
            (root.attribute("tests"), root.attribute("failures"), root.attribute("errors"), root.attribute("skipped")),
            (Some("6"), Some("2"), Some("1"), Some("2"))
        );
        let cases: Vec<_> = document.descendants().filter(|n| n.has_tag_name("testcase")).collect();
        let names: Vec<_> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
        assert_eq!(names, ["passes", "fails", "todo", "broken", "no_gpu", "optional"]);
        let child = |i: usize| cases[i].children().find(|n| n.is_element()).map(|n| n.tag_name().name());
        assert_eq!(
            [child(0), child(1), child(2), child(3), child(4), child(5)],
            [None, Some("failure"), Some("failure"), Some("error"), Some("skipped"), Some("skipped")]
        );
        let failure = cases[1].children().find(|n| n.has_tag_name("failure")).unwrap();
        assert_eq!(failure.attribute("message"), Some("expected <2> & got \"3\""));
        assert!(failure.text().unwrap().contains("second line [31m\nat exercises/"), "{:?}", failure.text());
        let optional = cases[5].children().find(|n| n.has_tag_name("skipped")).unwrap();
        assert_eq!(optional.attribute("message"), Some("stretch exercise (optional), fail: wrong"));
        assert_eq!(cases[0].attribute("classname"), Some("phase1.ex"));
        assert_eq!(cases[0].attribute("file"), Some("exercises/phase1-backends/src/a.rs"));
        let learner = document.descendants().find(|n| n.attribute("name") == Some("learner")).unwrap();
        assert_eq!(learner.attribute("value"), Some("Ada <a@b>"));
    }
}
