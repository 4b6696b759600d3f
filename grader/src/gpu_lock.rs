//! One machine-wide lock per GPU, held by the grader while a check times code on that GPU
//! ([`CheckSpec::gpu_timing`]), so that on a lab server shared by many learners no two timings
//! share a device and skew each other's speed ratios. Correctness checks never take it, and a
//! timed check holds it only while it times: its runner asks for it around the timed part
//! ([`grader_harness::timing`]) through two pipes the grader serves ([`LockServer`]), so that
//! compiling, exporting and checking correctness happen while other graders time.
//!
//! PyTorch has no part for this: it is what a shared benchmarking box needs around
//! `triton.testing.do_bench`. The lock is `flock(2)` on a file per GPU in a directory every
//! grader on the machine sees (`/tmp/grader-gpu-locks`, or `$GRADER_LOCK_DIR`). The kernel drops
//! an flock when its holder's process ends, however it ends, so a killed grader never leaves a
//! GPU locked. The holder writes who it is into the file, so a grader that waits can say for whom.

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

/// How often a waiting grader tries the lock again.
const POLL: Duration = Duration::from_millis(50);

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

/// A held GPU lock; dropping it releases the GPU.
#[derive(Debug)]
pub struct GpuLock {
    file: File,
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

    /// [`GpuLock::acquire`], giving up (`None`) once `give_up` is set while it waits.
    pub fn acquire_unless(
        dir: &Path,
        gpu: &str,
        me: &Holder,
        mut on_wait: impl FnMut(Option<&Holder>),
        give_up: &AtomicBool,
    ) -> Result<Option<GpuLock>> {
        let file = open_lock_file(dir, gpu)?;
        let started = Instant::now();
        let mut last_seen = None;
        while !try_lock(&file).with_context(|| format!("cannot lock {}", lock_path(dir, gpu).display()))? {
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
        let lock = GpuLock { file, waited: started.elapsed() };
        lock.write_holder(me);
        Ok(Some(lock))
    }

    /// How long [`GpuLock::acquire`] waited for another holder.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Best effort: a lock file opened read-only (another user's, not shared with us) still
    /// locks; the waiting graders then only cannot name us.
    fn write_holder(&self, me: &Holder) {
        if let Ok(json) = serde_json::to_string(me) {
            let _ = self.file.set_len(0).and_then(|()| self.file.write_all_at(json.as_bytes(), 0));
        }
    }
}

impl Drop for GpuLock {
    fn drop(&mut self) {
        // Forget our name while still holding the lock; closing the file then releases it.
        let _ = self.file.set_len(0);
    }
}

/// `dir/<gpu>.lock`, with the GPU's name kept to characters safe in a file name.
fn lock_path(dir: &Path, gpu: &str) -> PathBuf {
    let name: String = gpu.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    dir.join(format!("{name}.lock"))
}

/// Opens (creating) the lock file. The directory and files are made writable by every user, as
/// `/tmp` is, since learners on one server share the GPUs.
fn open_lock_file(dir: &Path, gpu: &str) -> Result<File> {
    let unusable =
        || format!("cannot use {} as the GPU lock directory: set {LOCK_DIR_ENV} to a writable one", dir.display());
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).with_context(unusable)?;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
    }
    let path = lock_path(dir, gpu);
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

/// `flock(LOCK_EX | LOCK_NB)`: true when taken, false when another process holds it.
fn try_lock(file: &File) -> std::io::Result<bool> {
    loop {
        // SAFETY: flock(2) on a file descriptor this `File` owns and keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
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

fn read_holder(file: &File) -> Option<Holder> {
    let mut buffer = vec![0u8; 4096];
    let n = file.read_at(&mut buffer, 0).ok()?;
    serde_json::from_slice(&buffer[..n]).ok()
}

/// The GPU lock a timed check may ask for: that of the GPU its runner times on (`cuda:0`), named
/// by the device's UUID, so that graders in containers that number GPUs differently still share
/// one lock per physical GPU.
#[derive(Clone, Debug)]
pub struct Timing {
    /// What holds the lock, for the graders that wait: `phase4 pointwise_cuda_bandwidth`.
    task: String,
    /// The lock directory ([`lock_dir`]).
    dir: PathBuf,
    /// The GPU whose lock it is, when named rather than found by probing this machine.
    gpu: Option<String>,
}

impl Timing {
    /// The lock check `spec` of `phase` may ask for, if it times code on a GPU
    /// ([`CheckSpec::gpu_timing`]).
    pub fn for_check(phase: &Phase, spec: &CheckSpec) -> Option<Timing> {
        spec.gpu_timing.then(|| Timing { task: format!("{} {}", phase.name, spec.id), dir: lock_dir(), gpu: None })
    }

    /// The lock of the GPU called `gpu` in `dir`, whatever this machine has: what the tests of the
    /// lock contend for on a machine without a GPU.
    pub fn of_gpu(task: impl Into<String>, dir: &Path, gpu: &str) -> Timing {
        Timing { task: task.into(), dir: dir.to_path_buf(), gpu: Some(gpu.into()) }
    }

    /// Takes the lock, when this machine has a usable GPU (elsewhere a check times on the CPU and
    /// nothing is locked: `None`), saying on stderr that it waits and for whom while another
    /// grader holds it; gives up (`None`) once `give_up` is set.
    pub fn acquire(&self, give_up: &AtomicBool) -> Result<Option<GpuLock>> {
        if let Some(gpu) = &self.gpu {
            return self.acquire_named(gpu, gpu, give_up);
        }
        let probe = engine::device::cuda::probe();
        let Some(device) = probe.usable().ok().and_then(|()| probe.device(0)) else { return Ok(None) };
        let gpu = device.uuid.clone().unwrap_or_else(|| format!("cuda{}", device.ordinal));
        self.acquire_named(&gpu, &device.name, give_up)
    }

    /// [`Timing::acquire`] of the GPU called `gpu` (`name` in messages).
    fn acquire_named(&self, gpu: &str, name: &str, give_up: &AtomicBool) -> Result<Option<GpuLock>> {
        let me = Holder::me(&self.task);
        let lock = GpuLock::acquire_unless(
            &self.dir,
            gpu,
            &me,
            |holder| match holder {
                Some(holder) => eprintln!("waiting for GPU {gpu} ({name}): held by {holder}"),
                None => eprintln!("waiting for GPU {gpu} ({name}): held by another grader"),
            },
            give_up,
        )?;
        if let Some(lock) = &lock
            && lock.waited() >= POLL
        {
            eprintln!("got GPU {gpu} after waiting {:.1}s; timing {}", lock.waited().as_secs_f64(), self.task);
        }
        Ok(lock)
    }
}

/// Set (to anything) in a grader's environment, this makes it say on stderr how long each timed
/// part held the GPU lock (`held GPU for 12.3s; timing phase5 modes_are_measured`): what
/// `docker/lab-load-test.sh` adds up to show which checks make a room wait.
pub const LOG_HOLDS: &str = "GRADER_LOCK_LOG";

/// Serves one runner's requests for the GPU lock ([`grader_harness::timing`]) on a thread of its
/// own: takes the lock at each `acquire` and answers `granted`, drops it at `release` or when the
/// runner's end of the pipes closes (its process ended, however it ended).
pub struct LockServer {
    thread: Option<std::thread::JoinHandle<()>>,
    give_up: Arc<AtomicBool>,
    waited: Arc<Mutex<Duration>>,
}

impl LockServer {
    /// Serves `requests` (read) and `grants` (written), the grader's ends of the runner's pipes.
    pub fn start(timing: Timing, requests: File, mut grants: File) -> LockServer {
        let give_up = Arc::new(AtomicBool::new(false));
        let waited = Arc::new(Mutex::new(Duration::ZERO));
        let (stop, total) = (give_up.clone(), waited.clone());
        let thread = std::thread::spawn(move || {
            let mut held: Option<(GpuLock, Instant)> = None;
            let release = |held: &mut Option<(GpuLock, Instant)>| {
                if let Some((lock, since)) = held.take() {
                    drop(lock);
                    if std::env::var_os(LOG_HOLDS).is_some() {
                        eprintln!("held GPU for {:.1}s; timing {}", since.elapsed().as_secs_f64(), timing.task);
                    }
                }
            };
            for line in BufReader::new(requests).lines() {
                let Ok(line) = line else { break };
                match line.trim() {
                    ACQUIRE if held.is_none() => {
                        let started = Instant::now();
                        let taken = timing.acquire(&stop);
                        *total.lock().unwrap_or_else(|e| e.into_inner()) += started.elapsed();
                        match taken {
                            Ok(lock) => held = lock.map(|lock| (lock, Instant::now())),
                            Err(e) => eprintln!("warning: cannot take the GPU lock ({e:#}); timing without it"),
                        }
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        // A runner gone meanwhile cannot read it: nothing to do then.
                        let _ = writeln!(grants, "{GRANTED}");
                    }
                    RELEASE => release(&mut held),
                    _ => {}
                }
            }
            release(&mut held);
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
