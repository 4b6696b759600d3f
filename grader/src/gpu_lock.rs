//! One machine-wide lock per GPU, held by the grader while a check times code on that GPU
//! ([`CheckSpec::gpu_timing`]), so that on a lab server shared by many learners no two timings
//! share a device and skew each other's speed ratios. Correctness checks never take it.
//!
//! PyTorch has no part for this: it is what a shared benchmarking box needs around
//! `triton.testing.do_bench`. The lock is `flock(2)` on a file per GPU in a directory every
//! grader on the machine sees (`/tmp/grader-gpu-locks`, or `$GRADER_LOCK_DIR`). The kernel drops
//! an flock when its holder's process ends, however it ends, so a killed grader never leaves a
//! GPU locked. The holder writes who it is into the file, so a grader that waits can say for whom.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result};
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
    pub fn acquire(dir: &Path, gpu: &str, me: &Holder, mut on_wait: impl FnMut(Option<&Holder>)) -> Result<GpuLock> {
        let file = open_lock_file(dir, gpu)?;
        let started = Instant::now();
        let mut last_seen = None;
        while !try_lock(&file).with_context(|| format!("cannot lock {}", lock_path(dir, gpu).display()))? {
            let holder = read_holder(&file);
            if last_seen.as_ref() != Some(&holder) {
                on_wait(holder.as_ref());
                last_seen = Some(holder);
            }
            std::thread::sleep(POLL);
        }
        let lock = GpuLock { file, waited: started.elapsed() };
        lock.write_holder(me);
        Ok(lock)
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

/// Takes the lock of the GPU that `spec` times code on, when it does and this machine has a
/// usable GPU (elsewhere the check skips itself, saying why, and nothing is locked). The check's
/// runner uses device `cuda:0`; its lock is named by the device's UUID, so that graders in
/// containers that number GPUs differently still share one lock per physical GPU. While another
/// grader holds it, says on stderr that it waits and for whom.
pub fn hold_for(phase: &Phase, spec: &CheckSpec) -> Result<Option<GpuLock>> {
    if !spec.gpu_timing {
        return Ok(None);
    }
    let probe = engine::device::cuda::probe();
    let Some(device) = probe.usable().ok().and_then(|()| probe.device(0)) else { return Ok(None) };
    let gpu = device.uuid.clone().unwrap_or_else(|| format!("cuda{}", device.ordinal));
    let dir = lock_dir();
    let me = Holder::me(format!("{} {}", phase.name, spec.id));
    let lock = GpuLock::acquire(&dir, &gpu, &me, |holder| match holder {
        Some(holder) => eprintln!("waiting for GPU {gpu} ({}): held by {holder}", device.name),
        None => eprintln!("waiting for GPU {gpu} ({}): held by another grader", device.name),
    })?;
    if lock.waited() >= POLL {
        eprintln!("got GPU {gpu} after waiting {:.1}s; timing {} {}", lock.waited().as_secs_f64(), phase.name, spec.id);
    }
    Ok(Some(lock))
}
