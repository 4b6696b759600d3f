//! The profiler, the analogue of `torch.profiler`: records every kernel the engine launches,
//! eager ops and compiled kernels alike, with its host time and, on a GPU, its device time from
//! CUDA events; named ranges like `record_function`; input shapes on request. A [`Profile`]
//! prints `key_averages()` tables and exports a Chrome trace that opens in Perfetto.
//!
//! ```
//! use engine::{profiler, Tensor};
//! let x = Tensor::randn(&[64, 64], 0);
//! let (_, profile) = profiler::profile(|| profiler::range("block", || x.matmul(&x)?.relu()))?;
//! let table = profile.key_averages();
//! assert_eq!(table.row("matmul").map(|r| r.calls), Some(1));
//! println!("{table}");
//! # Ok::<(), engine::Error>(())
//! ```
//!
//! A profile records the thread that started it. When none runs, a launch pays one branch.

mod averages;
mod record;
mod trace;

pub use averages::{AverageRow, KeyAverages, SortBy};
pub(crate) use record::launch;
pub use record::{Event, EventKind};

use std::marker::PhantomData;
use std::path::Path;
use std::time::Duration;

use crate::error::{Result, SourceLocation};

/// How to profile: the options of `torch.profiler.profile(...)` that apply here.
#[derive(Clone, Copy, Debug, Default)]
pub struct Profiler {
    record_shapes: bool,
}

impl Profiler {
    /// A profiler that records names and times only.
    pub fn new() -> Profiler {
        Profiler::default()
    }

    /// Also record each launch's input shapes (`record_shapes=True`), for
    /// [`Profile::key_averages_by_input_shape`]. Costs an allocation per launch while profiling.
    pub fn record_shapes(mut self, record: bool) -> Profiler {
        self.record_shapes = record;
        self
    }

    /// Starts recording this thread's launches until the guard is stopped (or dropped, which
    /// discards the profile). Fails if a profile already runs on this thread.
    #[track_caller]
    pub fn start(self) -> Result<ProfileGuard> {
        record::start(self.record_shapes, SourceLocation::caller())?;
        Ok(ProfileGuard { stopped: false, _thread: PhantomData })
    }

    /// Runs `f` under a profile and returns its result with the profile.
    #[track_caller]
    pub fn run<T>(self, f: impl FnOnce() -> Result<T>) -> Result<(T, Profile)> {
        let guard = self.start()?;
        let value = f()?;
        Ok((value, guard.stop()?))
    }
}

/// Runs `f` under a profile (names and times, no shapes) and returns its result with the
/// profile: `with torch.profiler.profile() as prof: f()`.
#[track_caller]
pub fn profile<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, Profile)> {
    Profiler::new().run(f)
}

/// Runs `f` as a named range of the running profile (`torch.profiler.record_function`); the
/// kernels it launches are nested under `name` in the trace, and the table gets a row for it.
/// Without a running profile it just runs `f`.
pub fn range<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let _range = record::open_range(name);
    f()
}

/// A running profile of this thread, from [`Profiler::start`]. Tied to its thread.
#[must_use = "the profile records until the guard is stopped; dropping it discards the profile"]
pub struct ProfileGuard {
    stopped: bool,
    /// Recording is per thread, so the guard must stay on it.
    _thread: PhantomData<*const ()>,
}

impl ProfileGuard {
    /// Stops recording and returns the profile (waits for the GPU to read device times).
    pub fn stop(mut self) -> Result<Profile> {
        self.stopped = true;
        let (events, length) = record::stop()?;
        Ok(Profile { events, length })
    }
}

impl Drop for ProfileGuard {
    fn drop(&mut self) {
        if !self.stopped {
            // Discarded: stop recording; the events and any error go with it.
            let _ = record::stop();
        }
    }
}

/// What a profile recorded: every span in the order it opened.
#[derive(Clone, Debug)]
pub struct Profile {
    events: Vec<Event>,
    length: Duration,
}

impl Profile {
    /// Every kernel launch and range, in the order they started.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// How long the profile ran on the host.
    pub fn length(&self) -> Duration {
        self.length
    }

    /// Events grouped by name and kind, with calls and time totals (`prof.key_averages()`),
    /// sorted by device time where there is any, else by self host time.
    pub fn key_averages(&self) -> KeyAverages {
        KeyAverages::new(&self.events, false)
    }

    /// The part of the profile inside the ranges named `range`: those ranges and every span
    /// nested in them, e.g. one version of a model when a profile times several.
    pub fn within(&self, range: &str) -> Profile {
        let mut kept: Vec<Option<usize>> = vec![None; self.events.len()];
        let mut events = Vec::new();
        for (i, event) in self.events.iter().enumerate() {
            let parent = event.parent.and_then(|p| kept[p]);
            if parent.is_some() || (event.kind == EventKind::Range && event.name == range) {
                kept[i] = Some(events.len());
                events.push(Event { parent, ..event.clone() });
            }
        }
        Profile { events, length: self.length }
    }

    /// [`Profile::key_averages`] with events grouped by input shape too
    /// (`key_averages(group_by_input_shape=True)`); the profile must have recorded shapes
    /// ([`Profiler::record_shapes`]).
    pub fn key_averages_by_input_shape(&self) -> KeyAverages {
        KeyAverages::new(&self.events, true)
    }

    /// Writes the profile as Chrome Trace Event JSON (`prof.export_chrome_trace(path)`): host
    /// spans on one track, each GPU's kernels on another; open it in <https://ui.perfetto.dev>.
    pub fn export_chrome_trace(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.chrome_trace())
            .map_err(|e| crate::Error::Io { path: path.to_path_buf(), message: e.to_string() })
    }

    /// The Chrome Trace Event JSON that [`Profile::export_chrome_trace`] writes.
    pub fn chrome_trace(&self) -> String {
        trace::chrome_trace(&self.events)
    }
}
