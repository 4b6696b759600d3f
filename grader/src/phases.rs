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
    fn unknown_names_list_the_valid_ones() {
        let error = select("phase9").unwrap_err().to_string();
        assert!(error.starts_with("unknown phase `phase9`; valid: phase1, ") && error.ends_with(", all"), "{error}");
        let error = exercise("nope").unwrap_err().to_string();
        assert!(error.starts_with("unknown exercise `nope`; valid: compare_backends, latency"), "{error}");
    }
}
