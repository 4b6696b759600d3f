//! The intra-op thread pool: ATen's `at::parallel_for`, `at::get_num_threads` and
//! `at::set_num_threads` (`aten/src/ATen/Parallel.h`), which every CPU kernel of the engine, eager
//! or compiled, splits its work through.
//!
//! A kernel calls [`parallel_for`] with a number of tasks; the calling thread runs some of them
//! and the pool's workers the rest, and the call returns when all have run. Three choices make a
//! small kernel cheap to split, the way OpenMP's runtime (which PyTorch's CPU kernels use) does:
//!
//! - **Workers wait awake for a while.** After a job a worker spins, watching for the next one,
//!   for [`SPIN`], before it sleeps. Waking a sleeping thread costs tens of microseconds on a
//!   virtual machine (the kernel must wake a virtual CPU), about what a batch-1 linear layer
//!   takes; a model's kernels follow each other far closer than that.
//! - **The caller works too**, and waits for no worker that has not started: a late sleeper
//!   finds the job closed and goes back to sleep.
//! - **Each worker has a home range of tasks**, the same on every call of the same size: a
//!   thread that reads a slice of a weight on one call reads the same slice on the next, from
//!   its own cache. A worker that finishes its range takes tasks from the others' ranges, so one
//!   slow thread (a busy core) does not hold up the rest.
//!
//! A call from inside a task, or from a second thread while the pool is busy, runs its tasks on
//! the calling thread, as ATen's `parallel_for` does inside a parallel region.

use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use crate::logs;

/// How long an idle worker watches for the next job before it sleeps. OpenMP runtimes wait
/// longer (libgomp spins for a few hundred thousand iterations, Intel's for 200 ms); a fraction
/// of a millisecond covers the gaps between one model's kernels and between back-to-back calls.
pub const SPIN: Duration = Duration::from_micros(500);

/// Set in [`Shared::state`] while no worker may join the current job.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// The threads that run tasks, the caller included: `ENGINE_NUM_THREADS`, else every core
/// (as `torch.get_num_threads`).
pub fn num_threads() -> usize {
    pool().threads.load(Ordering::Relaxed)
}

/// Use `threads` threads (the caller included, at least 1) for the jobs that start from now on,
/// as `torch.set_num_threads`. The pool starts the workers it lacks; extra ones stay idle.
pub fn set_num_threads(threads: usize) {
    let pool = pool();
    let threads = threads.max(1);
    let _running = pool.running.lock().unwrap_or_else(|e| e.into_inner());
    let workers = pool.spawn_workers(threads - 1);
    pool.threads.store(threads.min(workers + 1), Ordering::Relaxed);
}

/// Whether the current thread is running a task of [`parallel_for`] (where a nested call runs
/// its tasks in place).
pub fn in_parallel_region() -> bool {
    IN_TASK.with(Cell::get)
}

/// Runs `body(task)` for every task in `0..tasks`, spread over the pool, and returns when all
/// have run. Tasks may run in any order and at the same time, so they must not depend on each
/// other. A panic in a task is raised again here, once no task is running any more.
pub fn parallel_for(tasks: usize, body: impl Fn(usize) + Sync) {
    let threads = num_threads().min(tasks);
    if threads <= 1 || in_parallel_region() {
        return in_place(tasks, body);
    }
    let pool = pool();
    let running = match pool.running.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        // Another thread's job holds the workers: run this one here rather than wait.
        Err(TryLockError::WouldBlock) => return in_place(tasks, body),
    };
    let job = Job::new(&body, tasks, threads);
    pool.run(&job);
    drop(running);
    if let Some(payload) = job.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
        std::panic::resume_unwind(payload);
    }
}

/// Every task on the calling thread, which counts as inside a parallel region meanwhile.
fn in_place(tasks: usize, body: impl Fn(usize)) {
    let _region = Region::enter();
    (0..tasks).for_each(body);
}

/// Marks the current thread as inside a parallel region until dropped (a panic included).
struct Region(bool);

impl Region {
    fn enter() -> Region {
        Region(IN_TASK.with(|t| t.replace(true)))
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        IN_TASK.with(|t| t.set(self.0));
    }
}

/// `body(index, chunk)` for each `chunk_len`-element chunk of `data` (the last may be shorter),
/// through [`parallel_for`].
pub fn for_each_chunk_mut<T: Send>(data: &mut [T], chunk_len: usize, body: impl Fn(usize, &mut [T]) + Sync) {
    let chunk_len = chunk_len.max(1);
    let (base, len) = (Disjoint::new(data.as_mut_ptr()), data.len());
    parallel_for(len.div_ceil(chunk_len), |task| {
        let start = task * chunk_len;
        let end = (start + chunk_len).min(len);
        // SAFETY: tasks cover disjoint ranges of `data`, which stays borrowed until every task
        // has returned.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), end - start) };
        body(task, chunk)
    });
}

/// A pointer that the tasks of one [`parallel_for`] share, each writing through it to a part of
/// the memory that no other task touches (disjoint rows, columns or chunks of one output), or
/// that all of them only read. Creating one is safe; every access through [`Disjoint::get`] is
/// `unsafe` and must keep to that rule, while the memory outlives the call.
pub struct Disjoint<T>(*mut T);

impl<T> Disjoint<T> {
    /// Shares `ptr` with the tasks of one call.
    pub fn new(ptr: *mut T) -> Disjoint<T> {
        Disjoint(ptr)
    }

    /// The pointer (a method, so that closures capture the `Sync` wrapper, not the field).
    pub fn get(&self) -> *mut T {
        self.0
    }
}

impl<T> Clone for Disjoint<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Disjoint<T> {}
// SAFETY: sharing the pointer is harmless by itself; every dereference is `unsafe`, and its
// caller keeps the tasks' parts disjoint and the values safe to use from the task's thread (the
// type's contract).
unsafe impl<T> Send for Disjoint<T> {}
unsafe impl<T> Sync for Disjoint<T> {}

thread_local! {
    /// Set while this thread runs a task.
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

/// One call of [`parallel_for`], on the caller's stack while the call lasts.
struct Job<'a> {
    body: &'a (dyn Fn(usize) + Sync),
    tasks: usize,
    /// Participants with a home range: the caller (0) and workers `1..threads`.
    threads: usize,
    /// The next unclaimed task of each participant's home range.
    cursors: Vec<Padded>,
    /// The first panic of a task, raised again by the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// Participant `p`'s home tasks out of `tasks` shared by `threads`: an equal share, the same on
/// every call of this size.
fn home(tasks: usize, threads: usize, p: usize) -> std::ops::Range<usize> {
    tasks * p / threads..tasks * (p + 1) / threads
}

/// A counter on a cache line of its own, so that threads claiming from different ranges do not
/// contend for one line.
#[repr(align(128))]
struct Padded(AtomicUsize);

impl<'a> Job<'a> {
    fn new(body: &'a (dyn Fn(usize) + Sync), tasks: usize, threads: usize) -> Job<'a> {
        let cursors = (0..threads).map(|p| Padded(AtomicUsize::new(home(tasks, threads, p).start))).collect();
        Job { body, tasks, threads, cursors, panic: Mutex::new(None) }
    }

    /// Participant `p`'s home tasks.
    fn home(&self, p: usize) -> std::ops::Range<usize> {
        home(self.tasks, self.threads, p)
    }

    /// Runs tasks as participant `p` until none is left: its own range first, then the others',
    /// each claimed through its range's cursor. A worker past the job's thread count (after
    /// `set_num_threads` lowered it) takes no part.
    fn work(&self, p: usize) {
        if p >= self.threads {
            return;
        }
        for owner in (p..self.threads).chain(0..p) {
            let end = self.home(owner).end;
            loop {
                let task = self.cursors[owner].0.fetch_add(1, Ordering::Relaxed);
                if task >= end {
                    break;
                }
                self.run_task(task);
            }
        }
    }

    fn run_task(&self, task: usize) {
        let region = Region::enter();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.body)(task)));
        drop(region);
        if let Err(payload) = result {
            self.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(payload);
        }
    }
}

/// The pool: its workers and what they share.
struct Pool {
    shared: Arc<Shared>,
    /// Held by the thread whose job the workers run.
    running: Mutex<()>,
    /// Threads a job uses, the caller included.
    threads: AtomicUsize,
    /// Workers started so far.
    workers: Mutex<usize>,
}

/// What the workers watch.
struct Shared {
    /// The current job, type-erased; valid while a worker counts itself in `state`.
    job: AtomicPtr<Job<'static>>,
    /// Bumped when a job is published.
    epoch: AtomicU64,
    /// Workers inside the current job, plus [`CLOSED`] once the caller has closed it.
    state: AtomicUsize,
    /// Workers asleep, and what wakes them.
    sleepers: Mutex<usize>,
    wake: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = threads_from(std::env::var("ENGINE_NUM_THREADS").ok().as_deref(), cores);
        let shared = Arc::new(Shared {
            job: AtomicPtr::new(std::ptr::null_mut()),
            epoch: AtomicU64::new(0),
            state: AtomicUsize::new(CLOSED),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
        });
        let pool = Pool { shared, running: Mutex::new(()), threads: AtomicUsize::new(1), workers: Mutex::new(0) };
        pool.threads.store(pool.spawn_workers(threads - 1) + 1, Ordering::Relaxed);
        pool
    })
}

/// The pool's size for the setting `value` of `ENGINE_NUM_THREADS` (if set) on a machine of
/// `cores` cores: every core unless it names a positive number, with a warning when it is set to
/// anything else.
fn threads_from(value: Option<&str>, cores: usize) -> usize {
    let Some(value) = value else { return cores };
    value.trim().parse::<usize>().ok().filter(|&n| n > 0).unwrap_or_else(|| {
        logs::warn(|| {
            format!("ENGINE_NUM_THREADS={value:?} is not a whole number of threads; using all {cores} cores")
        });
        cores
    })
}

impl Pool {
    /// Starts workers until there are `count`, and returns how many there are: fewer if the
    /// system refuses a thread (the pool then runs with those, and says so once). Worker `i`
    /// (from 1) has home range `i`.
    fn spawn_workers(&self, count: usize) -> usize {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        while *workers < count {
            let (shared, index) = (self.shared.clone(), *workers + 1);
            let started =
                std::thread::Builder::new().name(format!("engine-worker-{index}")).spawn(move || shared.serve(index));
            if let Err(e) = started {
                logs::warn(|| format!("the system refused a thread for the engine's pool ({e}); using {index}"));
                break;
            }
            *workers = index;
        }
        *workers
    }

    /// Publishes `job`, works on it as participant 0, then closes it and waits for the workers
    /// that joined.
    fn run(&self, job: &Job) {
        let shared = &self.shared;
        // SAFETY (of the erasure): a worker dereferences the pointer only after counting itself
        // into `state` while the job is open, and this function returns only once the job is
        // closed and that count is back to zero.
        let erased = job as *const Job as *mut Job<'static>;
        shared.job.store(erased, Ordering::Relaxed);
        shared.state.fetch_and(!CLOSED, Ordering::Release);
        shared.epoch.fetch_add(1, Ordering::SeqCst);
        if *shared.sleepers.lock().unwrap_or_else(|e| e.into_inner()) > 0 {
            shared.wake.notify_all();
        }
        job.work(0);
        shared.state.fetch_or(CLOSED, Ordering::AcqRel);
        let mut spins = 0u32;
        while shared.state.load(Ordering::Acquire) & !CLOSED != 0 {
            spins += 1;
            if spins < 1 << 16 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Shared {
    /// A worker's life: wait for a job, join it if it is still open, work, repeat.
    fn serve(&self, index: usize) {
        let mut seen = self.epoch.load(Ordering::Acquire);
        loop {
            seen = self.next_epoch(seen);
            if self.state.fetch_add(1, Ordering::Acquire) & CLOSED == 0 {
                // SAFETY: the job is open and this worker is counted in `state`, so the caller
                // has not returned (Pool::run).
                let job = unsafe { &*self.job.load(Ordering::Relaxed) };
                job.work(index);
            }
            self.state.fetch_sub(1, Ordering::Release);
        }
    }

    /// Waits until a job newer than `seen` is published: spinning for [`SPIN`], yielding the
    /// core to other threads after the first few microseconds, then asleep.
    fn next_epoch(&self, seen: u64) -> u64 {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let epoch = self.epoch.load(Ordering::Acquire);
            if epoch != seen {
                return epoch;
            }
            spins += 1;
            if spins < 1 << 10 {
                std::hint::spin_loop();
            } else if start.elapsed() < SPIN {
                std::thread::yield_now();
            } else {
                break;
            }
        }
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        *sleepers += 1;
        while self.epoch.load(Ordering::SeqCst) == seen {
            sleepers = self.wake.wait(sleepers).unwrap_or_else(|e| e.into_inner());
        }
        *sleepers -= 1;
        self.epoch.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn every_task_runs_exactly_once() {
        for tasks in [0, 1, 2, 3, 7, 64, 1000] {
            let counts: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
            parallel_for(tasks, |t| {
                counts[t].fetch_add(1, Ordering::Relaxed);
            });
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "{tasks} tasks");
        }
    }

    #[test]
    fn set_num_threads_changes_the_threads_later_jobs_use() {
        let before = num_threads();
        set_num_threads(1);
        assert_eq!(num_threads(), 1);
        let caller = std::thread::current().id();
        parallel_for(8, |_| assert_eq!(std::thread::current().id(), caller, "one thread: the caller's"));
        set_num_threads(before);
        assert_eq!(num_threads(), before);
    }

    #[test]
    fn engine_num_threads_sets_the_size_and_a_bad_value_is_a_warning() {
        let quiet = |value| logs::capture(&[logs::Artifact::Warnings], || threads_from(value, 16));
        assert_eq!(quiet(None), (16, String::new()));
        assert_eq!(quiet(Some(" 4 ")), (4, String::new()));
        // The message the troubleshooting page quotes.
        let warning =
            "[engine:warnings] ENGINE_NUM_THREADS=\"0\" is not a whole number of threads; using all 16 cores\n";
        assert_eq!(quiet(Some("0")), (16, warning.to_string()));
        assert_eq!(quiet(Some("four")).0, 16);
    }

    #[test]
    fn chunks_cover_the_slice_once() {
        let mut data = vec![0usize; 1001];
        for_each_chunk_mut(&mut data, 64, |i, chunk| chunk.iter_mut().for_each(|x| *x += i + 1));
        for (at, &x) in data.iter().enumerate() {
            assert_eq!(x, at / 64 + 1);
        }
    }

    #[test]
    fn nested_calls_run_in_place() {
        let total = AtomicUsize::new(0);
        parallel_for(8, |_| {
            assert!(in_parallel_region());
            parallel_for(8, |_| {
                total.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(total.load(Ordering::Relaxed), 64);
        assert!(!in_parallel_region());
    }

    #[test]
    fn a_task_panic_reaches_the_caller() {
        let result = std::panic::catch_unwind(|| parallel_for(32, |t| assert!(t != 5, "task 5 fails")));
        let payload = result.expect_err("the panic is raised again");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"task 5 fails"));
        assert!(!in_parallel_region());
        // The pool still works afterwards.
        let after = AtomicUsize::new(0);
        parallel_for(16, |_| {
            after.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(after.load(Ordering::Relaxed), 16);
    }

    #[test]
    fn many_threads_calling_at_once_all_finish() {
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for round in 0..200 {
                        let sum = AtomicUsize::new(0);
                        parallel_for(round % 17, |t| {
                            sum.fetch_add(t, Ordering::Relaxed);
                        });
                        let n = round % 17;
                        assert_eq!(sum.load(Ordering::Relaxed), n * n.saturating_sub(1) / 2);
                    }
                });
            }
        });
    }
}
