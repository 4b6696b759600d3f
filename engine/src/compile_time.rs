//! Where a compile's time goes, stage by stage: the analogue of PyTorch's `dynamo_timed` regions,
//! `torch._dynamo.utils.compile_times()` and the per-compile `CompilationMetrics`.
//!
//! Every part of a first call that costs time runs inside [`timed`] with its [`Stage`]: tracing,
//! lowering, scheduling, code generation, each C compile and each NVRTC compile (with the kernel
//! or kernel family it built, and whether the disk cache already held it), cuBLASLt's heuristics,
//! autotuning, and loading (the shared library or CUDA module, the GPU library handles a program
//! needs). Dynamo runs each compile under [`record`], which collects the events of the calling
//! thread and of the threads that compile kernels in parallel for it ([`parallel_jobs`] carries
//! the recorder over); the sums per stage land in `CompileStats`, and `ENGINE_LOGS=compile_time`
//! prints every event.
//!
//! Outside a recording, [`timed`] reads no clock: eager code that happens to compile a kernel
//! family pays one thread-local check.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A stage of compiling, as the compile log and `CompileStats` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Tracing the function into a graph (Dynamo's bytecode analysis).
    Tracing,
    /// Decomposing, rewriting patterns and lowering to loop-level IR.
    Lowering,
    /// Fusion decisions and the kernel list.
    Scheduling,
    /// Printing kernels and the call plan.
    Codegen,
    /// The system C compiler building one shared library.
    CCompile,
    /// NVRTC building one CUBIN (a generated kernel or an extern kernel family).
    Nvrtc,
    /// cuBLASLt choosing algorithms for a GEMM.
    CublasLt,
    /// Timing candidate kernels or launches (max-autotune).
    Autotune,
    /// Loading compiled code and setting up what it calls: `dlopen`, `cuModuleLoadData`, library
    /// handles.
    Loading,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 9] = [
        Stage::Tracing,
        Stage::Lowering,
        Stage::Scheduling,
        Stage::Codegen,
        Stage::CCompile,
        Stage::Nvrtc,
        Stage::CublasLt,
        Stage::Autotune,
        Stage::Loading,
    ];

    /// The name in logs, traces and tables.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Tracing => "tracing",
            Stage::Lowering => "lowering",
            Stage::Scheduling => "scheduling",
            Stage::Codegen => "codegen",
            Stage::CCompile => "c compile",
            Stage::Nvrtc => "nvrtc",
            Stage::CublasLt => "cublaslt heuristics",
            Stage::Autotune => "autotune",
            Stage::Loading => "loading",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One timed piece of a compile.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Its stage.
    pub stage: Stage,
    /// What it worked on: a kernel, a kernel family, a library (empty when the stage says it all).
    pub what: String,
    /// How long it took.
    pub duration: Duration,
    /// For compiles: whether the disk cache already held the result (the compiler did not run).
    pub cached: bool,
}

/// Time per stage, summed over a compile's events (or over all compiles of a function). Stages
/// that ran on several threads at once sum their threads' times, so the stages can add up to
/// more than the wall-clock time of the compile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes {
    times: [Duration; Stage::ALL.len()],
    /// Compiler runs (C or NVRTC) that were not served by the disk cache.
    pub compiler_runs: usize,
    /// Compiles the disk cache served.
    pub cache_hits: usize,
}

impl StageTimes {
    /// `duration` spent in `stage`, and nothing else.
    pub fn one(stage: Stage, duration: Duration) -> StageTimes {
        let mut times = StageTimes::default();
        times.times[stage.index()] = duration;
        times
    }

    /// The time spent in `stage`.
    pub fn get(&self, stage: Stage) -> Duration {
        self.times[stage.index()]
    }

    /// Adds one event.
    pub fn add(&mut self, event: &Event) {
        self.times[event.stage.index()] += event.duration;
        if matches!(event.stage, Stage::CCompile | Stage::Nvrtc) {
            if event.cached {
                self.cache_hits += 1;
            } else {
                self.compiler_runs += 1;
            }
        }
    }

    /// Adds every stage of `other`.
    pub fn merge(&mut self, other: &StageTimes) {
        for (mine, theirs) in self.times.iter_mut().zip(other.times) {
            *mine += theirs;
        }
        self.compiler_runs += other.compiler_runs;
        self.cache_hits += other.cache_hits;
    }

    /// The sum over every stage.
    pub fn total(&self) -> Duration {
        self.times.iter().sum()
    }

    /// `(stage, time)` for every stage that took any time, in pipeline order.
    pub fn nonzero(&self) -> Vec<(Stage, Duration)> {
        Stage::ALL.iter().map(|&s| (s, self.get(s))).filter(|(_, t)| !t.is_zero()).collect()
    }
}

/// One line: `lowering 2.1 ms, c compile 96.0 ms, loading 0.4 ms`.
impl fmt::Display for StageTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> =
            self.nonzero().iter().map(|(s, t)| format!("{s} {:.1} ms", t.as_secs_f64() * 1e3)).collect();
        if parts.is_empty() { f.write_str("nothing timed") } else { f.write_str(&parts.join(", ")) }
    }
}

/// The events of one compile, in the order they finished.
#[derive(Clone, Debug, Default)]
pub struct CompileRecord {
    /// Every timed piece.
    pub events: Vec<Event>,
    /// The wall-clock time of the whole compile.
    pub wall: Duration,
}

impl CompileRecord {
    /// The events summed per stage.
    pub fn stages(&self) -> StageTimes {
        let mut times = StageTimes::default();
        for event in &self.events {
            times.add(event);
        }
        times
    }

    /// The compile log: the total, the stages, then one line per event of a compiler or a load.
    pub fn describe(&self) -> String {
        let mut lines = vec![format!("{:.1} ms in all: {}", self.wall.as_secs_f64() * 1e3, self.stages())];
        for e in &self.events {
            if matches!(e.stage, Stage::CCompile | Stage::Nvrtc | Stage::Loading | Stage::CublasLt | Stage::Autotune) {
                let cached = if e.cached { " (disk cache)" } else { "" };
                lines.push(format!(
                    "    {:<20} {:>9.1} ms  {}{cached}",
                    e.stage.name(),
                    e.duration.as_secs_f64() * 1e3,
                    e.what
                ));
            }
        }
        lines.join("\n")
    }
}

/// Where a recording's events go; shared by the threads compiling for it.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Event>>>);

impl Recorder {
    fn push(&self, event: Event) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Recorder>> = const { RefCell::new(None) };
    /// Compiles made while compiled code ran, not yet counted ([`deferred`]).
    static DEFERRED: RefCell<Vec<(String, CompileRecord)>> = const { RefCell::new(Vec::new()) };
    /// Time spent in timed pieces inside the one running on this thread.
    static NESTED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// The recorder of the compile running on this thread, if any.
pub fn current() -> Option<Recorder> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Runs `f` with `recorder` collecting this thread's events (a worker compiling for a compile that
/// runs on another thread).
pub fn with_recorder<T>(recorder: Option<Recorder>, f: impl FnOnce() -> T) -> T {
    let previous = CURRENT.with(|c| c.replace(recorder));
    let result = f();
    CURRENT.with(|c| *c.borrow_mut() = previous);
    result
}

/// Runs `f` as one compile: its events (on this thread, and on the workers of [`parallel_jobs`]
/// it starts) are collected and returned with its result. A recording inside another one adds
/// its events to the outer one as well.
pub fn record<T>(f: impl FnOnce() -> T) -> (T, CompileRecord) {
    let outer = current();
    let recorder = Recorder::default();
    let start = Instant::now();
    let result = with_recorder(Some(recorder.clone()), f);
    let wall = start.elapsed();
    let events = std::mem::take(&mut *recorder.0.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some(outer) = outer {
        for event in &events {
            outer.push(event.clone());
        }
    }
    (result, CompileRecord { events, wall })
}

/// Runs `f` as a piece of `stage` working on `what` (called only while recording), and records it
/// when a compile is being recorded on this thread. A piece timed inside another counts for its
/// own stage only: the outer one records its time less the inner one's.
pub fn timed<T>(stage: Stage, what: impl FnOnce() -> String, f: impl FnOnce() -> T) -> T {
    timed_cached(stage, what, f, |_| false)
}

/// [`timed`] for a compile that the disk cache may serve: `cached` says, from the result, whether
/// it did.
pub fn timed_cached<T>(
    stage: Stage,
    what: impl FnOnce() -> String,
    f: impl FnOnce() -> T,
    cached: impl FnOnce(&T) -> bool,
) -> T {
    let Some(recorder) = current() else { return f() };
    let outer_nested = NESTED.with(|n| n.replace(Duration::ZERO));
    let start = Instant::now();
    let result = f();
    let elapsed = start.elapsed();
    // Time of pieces timed inside this one counts for them, not twice.
    let inner = NESTED.with(|n| n.replace(outer_nested + elapsed));
    recorder.push(Event { stage, what: what(), duration: elapsed.saturating_sub(inner), cached: cached(&result) });
    result
}

/// Records a piece of `stage` timed by the caller (tracing, which dynamo times around the
/// closure).
pub fn add(stage: Stage, what: impl FnOnce() -> String, duration: Duration) {
    if let Some(recorder) = current() {
        recorder.push(Event { stage, what: what(), duration, cached: false });
    }
}

/// Hands over a compile that happened while a compiled graph ran (a dynamic graph's first call
/// with new sizes compiles its kernels for them then), for the compiled function that called it to
/// count ([`take_deferred`]) as its own.
pub fn deferred(what: String, record: CompileRecord) {
    DEFERRED.with(|d| d.borrow_mut().push((what, record)));
}

/// The compiles handed over on this thread since the last call, with what each was.
pub fn take_deferred() -> Vec<(String, CompileRecord)> {
    DEFERRED.with(|d| if d.borrow().is_empty() { Vec::new() } else { d.take() })
}

/// How many compiler jobs run at once: `ENGINE_COMPILE_THREADS`, else every core (Inductor's
/// `compile_threads`).
pub fn compile_threads() -> usize {
    std::env::var("ENGINE_COMPILE_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Runs `job` on every item, up to [`compile_threads`] at a time, and returns the results in the
/// items' order: independent compiles (C libraries, CUBINs, kernel families) in parallel, each
/// worker recording into the caller's compile. One item runs on the calling thread.
pub fn parallel_jobs<I: Send, R: Send>(items: Vec<I>, job: impl Fn(I) -> R + Sync) -> Vec<R> {
    let threads = compile_threads().min(items.len());
    if threads <= 1 {
        return items.into_iter().map(job).collect();
    }
    let recorder = current();
    let count = items.len();
    let items: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let results: Vec<Mutex<Option<R>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        with_recorder(recorder.clone(), || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let item = items[i].lock().unwrap_or_else(|e| e.into_inner()).take().expect("each item runs once");
                let result = job(item);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            }
        })
    };
    let before = NESTED.with(Cell::get);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    // The jobs' pieces are recorded by the threads that ran them: a piece timed around this call
    // does not count the wait for them.
    NESTED.with(|n| n.set(before + start.elapsed()));
    results.into_iter().map(|r| r.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every job ran")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_of_parallel_jobs_land_in_the_callers_record() {
        let (squares, record) = record(|| {
            timed(Stage::Lowering, || "graph".into(), || std::thread::sleep(Duration::from_millis(2)));
            parallel_jobs((0..6).collect(), |i: u64| {
                timed_cached(Stage::CCompile, || format!("unit {i}"), || i * i, |&r| r % 2 == 1)
            })
        });
        assert_eq!(squares, [0, 1, 4, 9, 16, 25]);
        let stages = record.stages();
        assert_eq!(record.events.len(), 7);
        assert!(stages.get(Stage::Lowering) >= Duration::from_millis(2));
        assert_eq!((stages.compiler_runs, stages.cache_hits), (3, 3));
        assert!(record.describe().contains("unit 5 (disk cache)"), "{}", record.describe());
    }

    #[test]
    fn a_piece_inside_another_counts_once() {
        let ((), record) = record(|| {
            timed(
                Stage::Autotune,
                || "gemm".into(),
                || {
                    timed(Stage::CublasLt, || "heuristics".into(), || std::thread::sleep(Duration::from_millis(20)));
                },
            )
        });
        let stages = record.stages();
        assert!(stages.get(Stage::CublasLt) >= Duration::from_millis(20));
        assert!(stages.get(Stage::Autotune) < Duration::from_millis(10), "{stages}");
    }

    #[test]
    fn nothing_is_recorded_outside_a_recording() {
        assert!(current().is_none());
        assert_eq!(timed(Stage::Nvrtc, || unreachable!("not asked outside a recording"), || 7), 7);
    }

    #[test]
    fn a_nested_recording_also_counts_in_the_outer_one() {
        let ((_, inner), outer) = record(|| record(|| add(Stage::Tracing, String::new, Duration::from_millis(1))));
        assert_eq!(inner.events.len(), 1);
        assert_eq!(outer.events.len(), 1);
    }
}
