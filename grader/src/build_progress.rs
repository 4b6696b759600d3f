//! What a learner sees while cargo builds a phase's checks: cargo's own progress (`Building [==> ]
//! 120/250: engine, ...`), read from its stderr and shown as one line that says which phase is
//! building, how far along it is, and, when the build is a long one (a fresh checkout compiles the
//! engine and every crate it needs), about how long it takes on this machine.
//!
//! Cargo prints its progress bar only to a terminal; the grader captures cargo's output (to find
//! the runner and the compiler's first error), so it asks for the bar anyway
//! (`CARGO_TERM_PROGRESS_WHEN=always`) and draws its own line from it.

use std::io::{IsTerminal, Write};
use std::process::Command;
use std::time::{Duration, Instant};

/// Core-minutes a fresh build of the grader and one phase's checks takes, the engine and its
/// dependencies being most of it: `cargo grader check phase1` on an empty target directory took
/// 2 min 15 s on the 2-core development VM (4.1 minutes of CPU), on 2026-12-05 with line tables
/// only in the dev profile (2 min 41 s with full debug info; issue 30 had measured 8-9 minutes).
const FRESH_BUILD_CORE_MINUTES: f64 = 4.5;

/// A build with at least this many units still to compile is a long one, worth a time estimate.
const LONG_BUILD_UNITS: usize = 40;

/// How often a line is printed when stderr is not a terminal (a CI log, a pipe).
const LOG_EVERY: Duration = Duration::from_secs(20);

/// Sets the environment under which cargo prints its progress bar into a pipe.
pub fn ask_for_progress(cargo: &mut Command) {
    cargo.env("CARGO_TERM_PROGRESS_WHEN", "always").env("CARGO_TERM_PROGRESS_WIDTH", "200");
}

/// One progress report of cargo's: `done` of `total` units finished, `building` the ones under way.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Units finished.
    pub done: usize,
    /// Units in the build.
    pub total: usize,
    /// What cargo is compiling now, as it names it: `engine, grader-harness`.
    pub building: String,
}

/// Reads one of cargo's progress lines: `    Building [=====>   ] 120/250: engine, foo(build)`.
pub fn parse(line: &str) -> Option<Step> {
    let rest = line.trim_start().strip_prefix("Building")?;
    let (_, rest) = rest.split_once(']')?;
    let (counts, building) = rest.split_once(':').unwrap_or((rest, ""));
    let (done, total) = counts.trim().split_once('/')?;
    Some(Step { done: done.parse().ok()?, total: total.parse().ok()?, building: building.trim().to_string() })
}

/// The minutes a fresh build takes on a machine with `cores` cores, at least one.
pub fn expected_minutes(cores: usize) -> f64 {
    (FRESH_BUILD_CORE_MINUTES / cores.max(1) as f64).max(1.0)
}

/// Shows one build's progress on stderr.
pub struct Progress {
    what: String,
    terminal: bool,
    started: Instant,
    last_logged: Option<Instant>,
    announced: bool,
    drawn: bool,
}

impl Progress {
    /// Progress of the build of `what` (`the phase1 checks of your exercises`).
    pub fn new(what: impl Into<String>) -> Progress {
        Progress {
            what: what.into(),
            terminal: std::io::stderr().is_terminal(),
            started: Instant::now(),
            last_logged: None,
            announced: false,
            drawn: false,
        }
    }

    /// Takes one line of cargo's stderr (a line may hold several `\r`-separated bar updates).
    pub fn line(&mut self, line: &str) {
        if let Some(step) = line.rsplit('\r').find_map(parse) {
            self.step(&step);
        }
    }

    fn step(&mut self, step: &Step) {
        let mut err = std::io::stderr().lock();
        if !self.announced && step.total.saturating_sub(step.done) >= LONG_BUILD_UNITS {
            self.announced = true;
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            self.clear(&mut err);
            let _ = writeln!(
                err,
                "Building {}: {} crates to compile. A first build compiles the engine and everything it needs \
                 (about {:.0} minutes on this machine's {cores} cores); later checks rebuild only what changed.",
                self.what,
                step.total - step.done,
                expected_minutes(cores)
            );
        }
        let elapsed = self.started.elapsed().as_secs();
        let text = format!(
            "  building {}: {}/{} crates, {}:{:02} so far{}",
            self.what,
            step.done,
            step.total,
            elapsed / 60,
            elapsed % 60,
            if step.building.is_empty() { String::new() } else { format!(" ({})", step.building) }
        );
        if self.terminal {
            // One line, redrawn; cut to a plain terminal's width.
            let shown: String = text.chars().take(110).collect();
            let _ = write!(err, "\r{shown:<110}");
            self.drawn = true;
        } else if self.announced && self.last_logged.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
            self.last_logged = Some(Instant::now());
            let _ = writeln!(err, "{text}");
        }
        let _ = err.flush();
    }

    /// Erases the progress line, if one is drawn.
    fn clear(&mut self, err: &mut impl Write) {
        if self.drawn {
            let _ = write!(err, "\r{:<110}\r", "");
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let mut err = std::io::stderr().lock();
        self.clear(&mut err);
        if self.announced {
            let elapsed = self.started.elapsed().as_secs();
            let _ = writeln!(err, "Built {} in {}:{:02}.", self.what, elapsed / 60, elapsed % 60);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_progress_lines_parse() {
        let step = parse("    Building [=========>                  ] 7/19: proc-macro2, serde(build.rs)   ").unwrap();
        assert_eq!(step, Step { done: 7, total: 19, building: "proc-macro2, serde(build.rs)".into() });
        assert_eq!(parse("    Building [    ] 0/3").map(|s| (s.done, s.total)), Some((0, 3)));
        assert_eq!(parse("   Compiling engine v0.1.0 (/w/engine)"), None);
        assert_eq!(parse("    Finished `dev` profile"), None);
    }

    #[test]
    fn the_estimate_follows_the_cores() {
        assert!((expected_minutes(2) - 2.25).abs() < 0.01);
        assert_eq!(expected_minutes(64), 1.0);
    }

    #[test]
    fn the_set_up_page_gives_the_estimates_for_two_and_sixteen_cores() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../book/src/setup.md")).unwrap();
        let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
        let (two, sixteen) = (expected_minutes(2), expected_minutes(16));
        assert_eq!(sixteen, 1.0, "the page says `about one on 16`");
        let said = format!("about {} to {} minutes on 2 cores, about one on 16", two.floor(), two.ceil());
        assert!(page.contains(&said), "book/src/setup.md should say `{said}`");
    }
}
