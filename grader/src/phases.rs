//! The phases the grader knows, in course order: one line per phase.

use anyhow::{Result, bail};
use grader_harness::{Exercise, Phase};

/// Every phase, in the order the course takes them. Add a phase here (see the crate docs).
pub const PHASES: &[&Phase] = &[
    &checks_phase1::PHASE,
    &checks_phase2::PHASE,
    &checks_phase3::PHASE,
    &checks_phase4::PHASE,
    &checks_phase5::PHASE,
];

/// The phases a learner names: one phase, or `all`. An unknown name is a one-line error listing
/// the valid ones.
pub fn select(name: &str) -> Result<Vec<&'static Phase>> {
    if name == "all" {
        return Ok(PHASES.to_vec());
    }
    match PHASES.iter().find(|p| p.name == name) {
        Some(phase) => Ok(vec![phase]),
        None => {
            let names: Vec<&str> = PHASES.iter().map(|p| p.name).collect();
            bail!("unknown phase `{name}`; valid: {}, all", names.join(", "))
        }
    }
}

/// The exercise called `name` and its phase, or a one-line error listing the valid names.
pub fn exercise(name: &str) -> Result<(&'static Phase, &'static Exercise)> {
    for phase in PHASES {
        if let Some(exercise) = phase.exercise(name) {
            return Ok((phase, exercise));
        }
    }
    let names: Vec<&str> = PHASES.iter().flat_map(|p| p.exercises.iter().map(|e| e.name)).collect();
    bail!("unknown exercise `{name}`; valid: {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn phase_and_exercise_names_are_unique() {
        let phases: HashSet<&str> = PHASES.iter().map(|p| p.name).collect();
        assert_eq!(phases.len(), PHASES.len());
        let exercises: Vec<&str> = PHASES.iter().flat_map(|p| p.exercises.iter().map(|e| e.name)).collect();
        assert_eq!(exercises.iter().collect::<HashSet<_>>().len(), exercises.len(), "{exercises:?}");
    }

    #[test]
    fn every_exercise_has_hints_and_checks() {
        for phase in PHASES {
            for e in phase.exercises {
                assert!(e.hints.len() >= 2, "{} needs staged hints", e.name);
                assert!(!e.checks.is_empty(), "{} has no checks", e.name);
            }
        }
    }

    /// An item an exercise forbids is stopped by a trip wire in the engine, whatever the route to
    /// it, only if the engine has a wire for it.
    #[test]
    fn every_forbidden_item_has_a_trip_wire() {
        for phase in PHASES {
            for forbidden in phase.exercises.iter().flat_map(|e| e.forbidden.iter()) {
                let wired = engine::wires::Wire::ALL.iter().any(|&w| grader_harness::wires::names(forbidden.path, w));
                assert!(wired, "{}: no trip wire in the engine for `{}`", phase.name, forbidden.path);
            }
        }
    }

    #[test]
    fn check_ids_are_unique_within_a_phase() {
        for phase in PHASES {
            let ids: Vec<&str> = phase.checks().map(|(_, c)| c.id).collect();
            assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "{}: {ids:?}", phase.name);
        }
    }

    /// The runners prove at compile time that a mutant names check functions; this proves they
    /// are checks of the mutant's own phase, and that its text is in its solution file, without
    /// running it (each mutant rebuilds its phase's runner).
    #[test]
    fn mutants_name_checks_and_files_of_their_phase() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workbook root");
        for phase in PHASES {
            let names: Vec<&str> = phase.mutants.iter().map(|m| m.name).collect();
            assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len(), "{}: {names:?}", phase.name);
            for mutant in phase.mutants {
                for id in mutant.fails.iter().chain(mutant.may_fail) {
                    assert!(
                        phase.checks().any(|(_, c)| c.id == *id),
                        "{}: mutant `{}` names `{id}`",
                        phase.name,
                        mutant.name
                    );
                }
                assert!(mutant.refused || !mutant.fails.is_empty(), "mutant `{}` fails no check", mutant.name);
                let solution = std::fs::read_to_string(root.join(phase.solutions_dir).join(mutant.file))
                    .unwrap_or_else(|e| panic!("mutant `{}`: {}: {e}", mutant.name, mutant.file));
                assert!(
                    solution.contains(mutant.find),
                    "mutant `{}`: its text is not in {} any more",
                    mutant.name,
                    mutant.file
                );
            }
        }
    }

    /// Each exercise's stub is generated from a solution file (`grader::stubs`).
    #[test]
    fn every_exercise_file_has_its_solution() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workbook root");
        for phase in PHASES {
            for exercise in phase.exercises {
                let solution = root.join(phase.solutions_dir).join(exercise.file);
                assert!(solution.is_file(), "{}: {} does not exist", exercise.name, solution.display());
            }
        }
    }

    /// A hint that names a source file (`` `name.rs` ``) names one the learner has: a file of the
    /// exercise crate, found by its path or its file name.
    #[test]
    fn files_named_in_hints_exist() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workbook root");
        for phase in PHASES {
            let crate_dir = root.join(phase.exercises_dir);
            let names: Vec<String> = walk_files(&crate_dir)
                .iter()
                .filter_map(|p| Some(p.strip_prefix(&crate_dir).ok()?.to_string_lossy().into_owned()))
                .collect();
            for exercise in phase.exercises {
                for hint in exercise.hints {
                    for named in hint.split('`').skip(1).step_by(2).filter(|w| w.ends_with(".rs") && !w.contains(' ')) {
                        assert!(
                            names.iter().any(|n| n == named || n.ends_with(&format!("/{named}"))),
                            "{}: a hint of `{}` names `{named}`, which is not a file of {}",
                            phase.name,
                            exercise.name,
                            phase.exercises_dir
                        );
                    }
                }
            }
        }
    }

    fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(walk_files(&path));
            } else {
                files.push(path);
            }
        }
        files
    }

    /// Each exercise's `section` is the anchor of a heading on its phase's book page, as mdBook
    /// makes it (`## compare_backends` is `#compare_backends`), so the links the grader prints land.
    #[test]
    fn every_section_is_a_heading_of_the_book_page() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workbook root");
        for phase in PHASES {
            let page = std::fs::read_to_string(root.join(phase.book_page)).expect("the phase's book page");
            let anchors: Vec<String> = page.lines().filter_map(heading_anchor).collect();
            for exercise in phase.exercises {
                assert!(
                    anchors.iter().any(|a| a == exercise.section),
                    "{}: no heading of {} has the anchor `{}` (it has {anchors:?})",
                    exercise.name,
                    phase.book_page,
                    exercise.section
                );
            }
        }
    }

    /// The anchor mdBook gives a Markdown heading line: an explicit `{#id}`, else the heading's
    /// text lowercased, spaces as `-`, and only letters, digits, `_` and `-` kept.
    fn heading_anchor(line: &str) -> Option<String> {
        let text = line.strip_prefix('#')?.trim_start_matches('#').trim();
        if let Some((_, id)) = text.strip_suffix('}').and_then(|t| t.rsplit_once("{#")) {
            return Some(id.to_string());
        }
        let kept = text.chars().filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        });
        Some(kept.collect())
    }

    #[test]
    fn headings_get_mdbook_anchors() {
        assert_eq!(heading_anchor("## compare_backends").as_deref(), Some("compare_backends"));
        assert_eq!(heading_anchor("### The `can_fuse` rule!").as_deref(), Some("the-can_fuse-rule"));
        assert_eq!(heading_anchor("## Timer {#timer}").as_deref(), Some("timer"));
        assert_eq!(heading_anchor("not a heading"), None);
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let error = select("phase9").unwrap_err().to_string();
        assert!(error.starts_with("unknown phase `phase9`; valid: phase1, ") && error.ends_with(", all"), "{error}");
        let error = exercise("nope").unwrap_err().to_string();
        assert!(error.starts_with("unknown exercise `nope`; valid: compare_backends, latency"), "{error}");
    }
}
