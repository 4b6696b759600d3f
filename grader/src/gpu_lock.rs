//! One machine-wide lock per GPU, so that on a lab server shared by many learners a check that
//! times code on a GPU ([`CheckSpec::gpu_timing`]) times it alone: no other grader's work runs on
//! that GPU meanwhile. It is a readers-writer lock. Every check's runner that uses the GPU does so
//! under a *shared* hold, which the grader takes before starting it and keeps until it ends (a
//! check run without a GPU, [`CheckSpec::without_gpu`], takes none, and gets no GPU); a timed check
//! asks for the *exclusive* hold around the part it times ([`grader_harness::timing`]) through two
//! pipes the grader serves ([`LockServer`]), and goes back to a shared hold after it. So graders
//! compile, export and check correctness side by side, and wait for each other only while one of
//! them times, and a timed part never shares the GPU (or the CPU time of the other graders'
//! GPU processes) with anyone.
//!
//! Writers come first: a grader waiting to time holds a *gate* that stops new runners from
//! starting on that GPU, so a steady stream of correctness checks cannot keep it waiting for ever;
//! it waits only for the runners already started to end.
//!
//! PyTorch has no part for this: it is what a shared benchmarking box needs around
//! `triton.testing.do_bench`. The locks are `flock(2)` on two files per GPU (`<gpu>.lock` and
//! `<gpu>.gate`) in a directory every grader on the machine sees (`/tmp/grader-gpu-locks`, or
//! `$GRADER_LOCK_DIR`). The kernel drops an flock when its holder's process ends, however it
//! ends, so a killed grader never leaves a GPU locked. The exclusive holder writes who it is into
//! the lock file, so a grader that waits can say for whom.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result};
use grader_harness::timing::{ACQUIRE, GRANTED, RELEASE};
use grader_harness::{CheckSpec, Phase};
use serde::{Deserialize, Serialize};

/// The environment variable that moves the lock directory (for example onto a volume that
/// several containers share).
pub const LOCK_DIR_ENV: &str = "GRADER_LOCK_DIR";

/// Where the locks are when `$GRADER_LOCK_DIR` is not set: a fixed path rather than `$TMPDIR`,
/// which can differ between users of one machine.
pub const DEFAULT_LOCK_DIR: &str = "/tmp/grader-gpu-locks";

/// How often a waiting grader tries the lock again: often, since every hand-over of the GPU
/// between graders waits for the next try, and a try is one `flock` call.
const POLL: Duration = Duration::from_millis(10);

/// A wait worth a line on stderr.
const SAID_AFTER: Duration = Duration::from_millis(50);

/// The lock directory: `$GRADER_LOCK_DIR`, else [`DEFAULT_LOCK_DIR`].
pub fn lock_dir() -> PathBuf {
    std::env::var_os(LOCK_DIR_ENV).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_LOCK_DIR))
}

/// Who holds a lock: written into the lock file by its holder, read by the graders waiting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    /// The holder's process id (as its own PID namespace sees it, so with `host` for containers).
    pub pid: u32,
    /// Its user name, or `uid N` where the environment names none.
    pub user: String,
    /// The host name (a container's own, in Docker).
    pub host: String,
    /// What it runs: `phase4 pointwise_cuda_bandwidth`.
    pub task: String,
    /// When it took the lock, RFC 3339.
    pub since: String,
}

impl Holder {
    /// This process, about to run `task`.
    pub fn me(task: impl Into<String>) -> Holder {
        let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| {
            // SAFETY: getuid(2) cannot fail and takes no arguments.
            format!("uid {}", unsafe { libc::getuid() })
        });
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string());
        Holder {
            pid: std::process::id(),
            user,
            host: host.unwrap_or_else(|_| "unknown host".into()),
            task: task.into(),
            since: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} of {} on {}, running {} since {}", self.pid, self.user, self.host, self.task, self.since)
    }
}

/// The exclusive hold on a GPU: nobody else uses it; dropping it releases the GPU.
#[derive(Debug)]
pub struct GpuLock {
    /// The lock file, held exclusively (`None` only while being turned into a [`GpuShare`]).
    file: Option<File>,
    /// The gate, held exclusively (never read: let go when dropped), so that no runner starts on
    /// the GPU meanwhile.
    _gate: File,
    waited: Duration,
}

impl GpuLock {
    /// Takes the lock of GPU `gpu` in `dir`, creating both as needed, and records `me` as its
    /// holder. While another process holds it, calls `on_wait` with that holder (or `None` when
    /// it has not yet written its name) each time the holder changes, and tries again.
    pub fn acquire(dir: &Path, gpu: &str, me: &Holder, on_wait: impl FnMut(Option<&Holder>)) -> Result<GpuLock> {
        let lock = GpuLock::acquire_unless(dir, gpu, me, on_wait, &AtomicBool::new(false))?;
        Ok(lock.expect("never given up"))
    }

    /// [`GpuLock::acquire`], giving up (`None`) once `give_up` is set while it waits: first for
    /// the gate (another grader timing, or waiting to), then for the runners already started on
    /// the GPU to end.
    pub fn acquire_unless(
        dir: &Path,
        gpu: &str,
        me: &Holder,
        mut on_wait: impl FnMut(Option<&Holder>),
        give_up: &AtomicBool,
    ) -> Result<Option<GpuLock>> {
        let Some(Taken { gate, file, waited }) = take(dir, gpu, libc::LOCK_EX, &mut on_wait, give_up)? else {
            return Ok(None);
        };
        let lock = GpuLock { file: Some(file), _gate: gate, waited };
        lock.write_holder(me);
        Ok(Some(lock))
    }

    /// How long [`GpuLock::acquire`] waited for another holder.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Ends the exclusive hold and keeps a shared one: what a runner keeps once its timed part is
    /// over. No other grader can take the GPU in between: the gate is let go only once the hold
    /// is shared.
    pub fn share(mut self) -> Result<GpuShare> {
        let file = self.file.take().expect("held until now");
        let _ = file.set_len(0);
        flock(&file, libc::LOCK_SH).context("cannot turn the GPU lock into a shared hold")?;
        Ok(GpuShare { _file: file, waited: Duration::ZERO })
    }

    /// Best effort: a lock file opened read-only (another user's, not shared with us) still
    /// locks; the waiting graders then only cannot name us.
    fn write_holder(&self, me: &Holder) {
        if let (Some(file), Ok(json)) = (&self.file, serde_json::to_string(me)) {
            let _ = file.set_len(0).and_then(|()| file.write_all_at(json.as_bytes(), 0));
        }
    }
}

impl Drop for GpuLock {
    fn drop(&mut self) {
        // Forget our name while still holding the lock; closing the files then releases it.
        if let Some(file) = &self.file {
            let _ = file.set_len(0);
        }
    }
}

/// A shared hold on a GPU, kept by the grader while one of its runners uses the GPU without
/// timing: others may use it too, but nobody times on it. Dropping it lets go.
#[derive(Debug)]
pub struct GpuShare {
    /// The lock file, held shared (never read: let go when dropped).
    _file: File,
    waited: Duration,
}

impl GpuShare {
    /// Takes a shared hold on GPU `gpu` in `dir`, waiting (and calling `on_wait` as
    /// [`GpuLock::acquire_unless`] does) while another grader times on it or waits to; gives up
    /// (`None`) once `give_up` is set.
    pub fn take_unless(
        dir: &Path,
        gpu: &str,
        mut on_wait: impl FnMut(Option<&Holder>),
        give_up: &AtomicBool,
    ) -> Result<Option<GpuShare>> {
        let Some(Taken { gate, file, waited }) = take(dir, gpu, libc::LOCK_SH, &mut on_wait, give_up)? else {
            return Ok(None);
        };
        // Through the gate, held shared only for as long as it took to share the lock itself.
        drop(gate);
        Ok(Some(GpuShare { _file: file, waited }))
    }

    /// How long [`GpuShare::take_unless`] waited for graders timing on the GPU.
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

/// Which of a GPU's two lock files.
const LOCK: &str = "lock";
const GATE: &str = "gate";

/// A GPU's gate and lock file, both taken, and how long that took.
struct Taken {
    gate: File,
    file: File,
    waited: Duration,
}

/// Takes `op` (`LOCK_SH` or `LOCK_EX`) on GPU `gpu`'s gate, then on its lock file, polling; while
/// it waits, calls `on_wait` with the exclusive holder the lock file names each time it changes.
/// `None` when given up.
fn take(
    dir: &Path,
    gpu: &str,
    op: libc::c_int,
    on_wait: &mut impl FnMut(Option<&Holder>),
    give_up: &AtomicBool,
) -> Result<Option<Taken>> {
    let (gate, file) = (open_lock_file(dir, gpu, GATE)?, open_lock_file(dir, gpu, LOCK)?);
    let started = Instant::now();
    for (held, what) in [(&gate, GATE), (&file, LOCK)] {
        let mut last_seen = None;
        while !try_flock(held, op).with_context(|| format!("cannot lock {}", lock_path(dir, gpu, what).display()))? {
            if give_up.load(Ordering::SeqCst) {
                return Ok(None);
            }
            let holder = read_holder(&file);
            if last_seen.as_ref() != Some(&holder) {
                on_wait(holder.as_ref());
                last_seen = Some(holder);
            }
            std::thread::sleep(POLL);
        }
    }
    Ok(Some(Taken { gate, file, waited: started.elapsed() }))
}

/// `dir/<gpu>.<what>` ([`LOCK`] or [`GATE`]), with the GPU's name kept to characters safe in a
/// file name.
fn lock_path(dir: &Path, gpu: &str, what: &str) -> PathBuf {
    let name: String = gpu.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    dir.join(format!("{name}.{what}"))
}

/// Opens (creating) the lock file. The directory and files are made writable by every user, as
/// `/tmp` is, since learners on one server share the GPUs.
fn open_lock_file(dir: &Path, gpu: &str, what: &str) -> Result<File> {
    let unusable =
        || format!("cannot use {} as the GPU lock directory: set {LOCK_DIR_ENV} to a writable one", dir.display());
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).with_context(unusable)?;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
    }
    let path = lock_path(dir, gpu, what);
    // Never truncate: the file may hold the name of the grader that holds the lock now.
    let opened = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o666).open(&path);
    let file = match opened {
        Ok(file) => {
            // Our umask may have narrowed the mode; only the file's owner can widen it again.
            let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
            file
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => File::open(&path).with_context(unusable)?,
        Err(e) => return Err(e).with_context(unusable),
    };
    Ok(file)
}

/// `flock(op | LOCK_NB)`: true when taken, false when another process holds it.
fn try_flock(file: &File, op: libc::c_int) -> std::io::Result<bool> {
    loop {
        // SAFETY: flock(2) on a file descriptor this `File` owns and keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.kind() {
            ErrorKind::WouldBlock => return Ok(false),
            ErrorKind::Interrupted => continue,
            _ => return Err(error),
        }
    }
}

/// `flock(op)`, waiting as long as it takes.
fn flock(file: &File, op: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: as in `try_flock`.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

fn read_holder(file: &File) -> Option<Holder> {
    let mut buffer = vec![0u8; 4096];
    let n = file.read_at(&mut buffer, 0).ok()?;
    serde_json::from_slice(&buffer[..n]).ok()
}

/// A check's use of the GPU lock: the GPU its runner uses (`cuda:0`), named by the device's
/// UUID, so that graders in containers that number GPUs differently still share one lock per
/// physical GPU; and whether the check times code there (then its runner may ask for the
/// exclusive hold).
#[derive(Clone, Debug)]
pub struct Timing {
    /// What holds the lock, for the graders that wait: `phase4 pointwise_cuda_bandwidth`.
    task: String,
    /// The lock directory ([`lock_dir`]).
    dir: PathBuf,
    /// The GPU whose lock it is, when named rather than found by probing this machine.
    gpu: Option<String>,
    /// Whether the check times code on the GPU ([`CheckSpec::gpu_timing`]).
    times: bool,
}

impl Timing {
    /// The lock check `spec` of `phase` uses: every check's runner uses the GPU under a shared
    /// hold, and one that times code on it ([`CheckSpec::gpu_timing`]) may ask for the exclusive
    /// hold. `None` for a check run without a GPU ([`CheckSpec::without_gpu`]): its runners take
    /// no hold, and so get no GPU.
    pub fn for_check(phase: &Phase, spec: &CheckSpec) -> Option<Timing> {
        let task = format!("{} {}", phase.name, spec.id);
        (!spec.without_gpu).then(|| Timing { task, dir: lock_dir(), gpu: None, times: spec.gpu_timing })
    }

    /// The lock of the GPU called `gpu` in `dir`, whatever this machine has, for a check that
    /// times: what the tests of the lock contend for on a machine without a GPU.
    pub fn of_gpu(task: impl Into<String>, dir: &Path, gpu: &str) -> Timing {
        Timing { task: task.into(), dir: dir.to_path_buf(), gpu: Some(gpu.into()), times: true }
    }

    /// The same lock, for a check that does not time: its runner only ever shares the GPU.
    pub fn untimed(self) -> Timing {
        Timing { times: false, ..self }
    }

    /// Whether the check's runner may ask for the exclusive hold.
    pub fn times(&self) -> bool {
        self.times
    }

    /// The GPU this lock is for, and its name in messages; `None` when this machine has no usable
    /// GPU (a check then runs on the CPU and nothing is locked).
    fn gpu(&self) -> Option<(String, String)> {
        if let Some(gpu) = &self.gpu {
            return Some((gpu.clone(), gpu.clone()));
        }
        let probe = engine::device::cuda::probe();
        let device = probe.usable().ok().and_then(|()| probe.device(0))?;
        Some((device.uuid.clone().unwrap_or_else(|| format!("cuda{}", device.ordinal)), device.name.clone()))
    }

    /// Takes the exclusive hold, when this machine has a usable GPU (elsewhere `None`), saying on
    /// stderr that it waits and for whom while another grader times; gives up (`None`) once
    /// `give_up` is set.
    pub fn acquire(&self, give_up: &AtomicBool) -> Result<Option<GpuLock>> {
        let Some((gpu, name)) = self.gpu() else { return Ok(None) };
        let me = Holder::me(&self.task);
        let lock = GpuLock::acquire_unless(&self.dir, &gpu, &me, waiting(&gpu, &name), give_up)?;
        if let Some(lock) = &lock
            && lock.waited() >= SAID_AFTER
        {
            eprintln!("got GPU {gpu} after waiting {:.1}s; timing {}", lock.waited().as_secs_f64(), self.task);
        }
        Ok(lock)
    }

    /// Takes a shared hold for a runner about to start, when this machine has a usable GPU
    /// (elsewhere `None`), saying on stderr that it waits while another grader times.
    pub fn share(&self) -> Result<Option<GpuShare>> {
        let Some((gpu, name)) = self.gpu() else { return Ok(None) };
        let share = GpuShare::take_unless(&self.dir, &gpu, waiting(&gpu, &name), &AtomicBool::new(false))?;
        if let Some(share) = &share
            && share.waited() >= SAID_AFTER
        {
            eprintln!("got GPU {gpu} after waiting {:.1}s; running {}", share.waited().as_secs_f64(), self.task);
        }
        Ok(share)
    }
}

/// What a grader says on stderr while it waits for GPU `gpu` (`name`).
fn waiting<'a>(gpu: &'a str, name: &'a str) -> impl FnMut(Option<&Holder>) + 'a {
    move |holder| match holder {
        Some(holder) => eprintln!("waiting for GPU {gpu} ({name}): held by {holder}"),
        None => eprintln!("waiting for GPU {gpu} ({name}): held by another grader"),
    }
}

/// Set (to anything) in a grader's environment, this makes it say on stderr how long each timed
/// part held the GPU lock (`held GPU for 12.3s; timing phase5 modes_are_measured`): what
/// `docker/lab-load-test.sh` adds up to show which checks make a room wait.
pub const LOG_HOLDS: &str = "GRADER_LOCK_LOG";

/// What a grader holds of the GPU for one runner.
enum Hold {
    Nothing,
    /// Kept only to be let go when dropped.
    Shared {
        _share: GpuShare,
    },
    /// Since when.
    Exclusive(GpuLock, Instant),
}

/// Holds the GPU for one runner for as long as its process lives: shared from before it starts,
/// exclusive between each `acquire` it sends ([`grader_harness::timing`]) and the `release` that
/// follows, served on a thread of its own that answers `granted`; everything is let go when the
/// runner's end of the pipes closes (its process ended, however it ended) or at [`finish`].
///
/// [`finish`]: LockServer::finish
pub struct LockServer {
    thread: Option<std::thread::JoinHandle<()>>,
    give_up: Arc<AtomicBool>,
    waited: Arc<Mutex<Duration>>,
}

impl LockServer {
    /// Keeps `share` (taken before the runner started) for the runner's life, and serves the
    /// grader's ends of its pipes, `requests` (read) and `grants` (written), when it times.
    pub fn start(timing: Timing, share: Option<GpuShare>, pipes: Option<(File, File)>) -> LockServer {
        let give_up = Arc::new(AtomicBool::new(false));
        let waited = Arc::new(Mutex::new(Duration::ZERO));
        let (stop, total) = (give_up.clone(), waited.clone());
        let thread = std::thread::spawn(move || {
            let mut hold = share.map_or(Hold::Nothing, |share| Hold::Shared { _share: share });
            let Some((requests, mut grants)) = pipes else {
                // A runner that never times: hold the share until it ends.
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(POLL);
                }
                return;
            };
            let release = |hold: Hold| match hold {
                Hold::Exclusive(lock, since) => {
                    if std::env::var_os(LOG_HOLDS).is_some() {
                        eprintln!("held GPU for {:.1}s; timing {}", since.elapsed().as_secs_f64(), timing.task);
                    }
                    match lock.share() {
                        Ok(share) => Hold::Shared { _share: share },
                        Err(e) => {
                            eprintln!("warning: {e:#}; the rest of this check runs without a hold on the GPU");
                            Hold::Nothing
                        }
                    }
                }
                other => other,
            };
            for line in BufReader::new(requests).lines() {
                let Ok(line) = line else { break };
                match line.trim() {
                    ACQUIRE if !matches!(hold, Hold::Exclusive(..)) => {
                        // Our own shared hold would keep us waiting for ourselves.
                        drop(std::mem::replace(&mut hold, Hold::Nothing));
                        let started = Instant::now();
                        let taken = timing.acquire(&stop);
                        *total.lock().unwrap_or_else(|e| e.into_inner()) += started.elapsed();
                        match taken {
                            Ok(Some(lock)) => hold = Hold::Exclusive(lock, Instant::now()),
                            Ok(None) => {}
                            Err(e) => eprintln!("warning: cannot take the GPU lock ({e:#}); timing without it"),
                        }
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        // A runner gone meanwhile cannot read it: nothing to do then.
                        let _ = writeln!(grants, "{GRANTED}");
                    }
                    RELEASE => hold = release(hold),
                    _ => {}
                }
            }
            drop(release(hold));
        });
        LockServer { thread: Some(thread), give_up, waited }
    }
    /// How long the runner has waited for the lock so far (not counted against its time limit).
    pub fn waited(&self) -> Duration {
        *self.waited.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Once the runner's process is gone: stops waiting for the lock, and returns once it is
    /// released.
    pub fn finish(mut self) {
        self.give_up.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
