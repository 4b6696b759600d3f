//! `grader watch`: check, then check again each time an exercise file changes, or when the
//! learner presses Enter (file events do not reach some containers and network file systems;
//! `--poll` compares files every second instead).

use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

use anyhow::Result;
use grader::phases::{self, PHASES};
use grader::state::State;
use grader::workbook::Workbook;
use grader_harness::Subject;
use notify::{PollWatcher, RecursiveMode, Watcher};

use crate::CheckOptions;
use crate::commands::check;

/// Why to wake up.
enum Wake {
    Recheck,
    Quit,
}

/// Checks in a loop until `q` or the end of input and file events.
pub fn run(root: Option<&Path>, phase: Option<&str>, options: &CheckOptions, poll: bool) -> Result<ExitCode> {
    let workbook = Workbook::find(root)?;
    let phase = phase.map(str::to_string).unwrap_or_else(|| first_unfinished(&State::of(&workbook)));
    let phases = phases::select(&phase)?;
    let (wake, woken) = mpsc::channel();
    let mut watcher = file_watcher(poll, wake.clone())?;
    for p in &phases {
        let dir = if options.solutions { p.solutions_dir } else { p.exercises_dir };
        watcher.watch(&workbook.path(dir), RecursiveMode::Recursive)?;
    }
    std::thread::spawn(move || read_keys(wake));
    let subject = if options.solutions { Subject::Solutions } else { Subject::Exercises };
    loop {
        check::run(Some(workbook.root()), &phase, options, &check::Output::default())?;
        println!("Watching {subject} of {phase}: save a file to re-check, or press Enter; `q` then Enter quits.");
        match woken.recv() {
            Ok(Wake::Recheck) => {
                // An editor's save is often several events: let them settle, then check once.
                std::thread::sleep(Duration::from_millis(300));
                while woken.try_recv().is_ok() {}
            }
            Ok(Wake::Quit) | Err(_) => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// The first phase whose last check did not pass, or the first phase.
fn first_unfinished(state: &State) -> String {
    let last = state.last_results();
    let unfinished = PHASES.iter().find(|p| last.phases.get(p.name).is_none_or(|(_, r)| !r.passed()));
    unfinished.unwrap_or(&PHASES[0]).name.to_string()
}

/// A watcher that wakes the loop when a source file is created, changed or removed.
fn file_watcher(poll: bool, wake: Sender<Wake>) -> Result<Box<dyn Watcher>> {
    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let source = event.paths.iter().any(|p| p.extension().is_some_and(|e| e == "rs" || e == "toml"));
        if source && (event.kind.is_modify() || event.kind.is_create() || event.kind.is_remove()) {
            let _ = wake.send(Wake::Recheck);
        }
    };
    Ok(if poll {
        let config = notify::Config::default().with_poll_interval(Duration::from_secs(1)).with_compare_contents(true);
        Box::new(PollWatcher::new(handler, config)?)
    } else {
        Box::new(notify::recommended_watcher(handler)?)
    })
}

/// Enter re-checks, `q` quits; at the end of input (no terminal) only file events remain.
fn read_keys(wake: Sender<Wake>) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return };
        let quit = matches!(line.trim(), "q" | "quit");
        if wake.send(if quit { Wake::Quit } else { Wake::Recheck }).is_err() || quit {
            return;
        }
    }
}
