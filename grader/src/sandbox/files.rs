//! What a sandboxed process may read, write and execute, enforced by Landlock: a list of what is
//! allowed, everything else denied, whoever the process runs as (root included).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Result, bail};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};

/// The newest Landlock ABI the sandbox asks for (the runner's own layer asks for the same).
pub const WANTED_ABI: ABI = grader_harness::confine::LANDLOCK_ABI;

/// The places a sandboxed process may use, beyond the system's own programs and libraries.
#[derive(Clone, Debug, Default)]
pub struct Places {
    /// Directories or files it may read (and list), not execute.
    pub read: Vec<PathBuf>,
    /// Directories it may read and execute from.
    pub read_exec: Vec<PathBuf>,
    /// Programs it may execute.
    pub executables: Vec<PathBuf>,
    /// Directories it may read and write, not execute from.
    pub writable: Vec<PathBuf>,
}

/// Device files every process may read and write: what a shell, the C compiler and Rust's
/// standard library open.
const DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// Device files every process may read: the kernel's random sources.
const RANDOM_DEVICES: [&str; 2] = ["/dev/random", "/dev/urandom"];

/// The GPU's device files (`/dev/nvidia0`, `/dev/nvidiactl`, `/dev/nvidia-uvm`, and the
/// `/dev/nvidia-caps` directory), which the CUDA driver opens and controls with `ioctl`.
fn gpu_devices() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/dev") else { return Vec::new() };
    let mut found: Vec<PathBuf> =
        entries.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("nvidia")).map(|e| e.path()).collect();
    found.sort();
    found
}

/// The system-wide parts of `/proc` a sandboxed process may read: what the engine reads
/// (`cpuinfo`, to tune generated C), what glibc and Rust's standard library read when they size
/// memory and threads (`meminfo`, `stat`, the kernel's settings under `sys`), and what the CUDA
/// driver reads when it looks for a GPU (its module's parameters and capabilities under `driver`,
/// the loaded `modules` and `devices`); the book's sandbox section lists them too. Not the
/// per-process directories (`/proc/<pid>`, `/proc/self`, `/proc/thread-self`): through
/// `/proc/self/mem` and each thread's `/proc/self/task/<tid>/mem`, safe code could read and write
/// its own process's memory, the runner's seed and its checks' code included. Standard library
/// calls that would read them fall back without them: `available_parallelism` counts the CPUs
/// this process may run on rather than its cgroup's quota, and the main thread's stack-overflow
/// message needs `/proc/self/maps` (an overflow is reported as the signal instead).
const PROC_FILES: [&str; 7] =
    ["/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys", "/proc/driver", "/proc/modules", "/proc/devices"];

/// System directories a sandboxed process reads from, where they exist. `/dev` is not among
/// them: only the device files above are open to it (so `/dev/shm`, where processes share
/// memory, is not).
fn system_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/run"]
            .iter()
            .map(PathBuf::from)
            .collect();
    for variable in ["LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(value) = std::env::var_os(variable) {
            dirs.extend(std::env::split_paths(&value).filter(|p| p.is_absolute()));
        }
    }
    dirs.retain(|d| d.exists());
    dirs
}

/// Restricts this process (and what it executes) to `places`, and the GPU's device files where
/// `gpu` allows them.
///
/// With `gpu`, on a machine with the GPU's device files, the process may also read and write its
/// own `/proc/<pid>` (this process's, which the program it executes keeps): the CUDA driver reads
/// its `maps` and names the threads it starts by writing each one's `/proc/self/task/<tid>/comm`,
/// and fails `cuInit` when it cannot. Landlock can name that directory only whole, and new
/// threads' directories appear beneath it, so it also opens the process's memory to it (`mem`).
/// So a runner given it closes it again itself, once CUDA has started and before any check runs
/// ([`grader_harness::confine`]): the value returned then lists every other place allowed here,
/// for the runner to keep. Every other process gets the system-wide parts of `/proc` alone
/// ([`PROC_FILES`]).
pub fn confine(places: &Places, gpu: bool) -> Result<Option<OsString>> {
    let all = AccessFs::from_all(WANTED_ABI);
    let read = AccessFs::from_read(WANTED_ABI);
    let read_only = read & !AccessFs::Execute;
    let program = AccessFs::from_file(WANTED_ABI) & (AccessFs::Execute | AccessFs::ReadFile);
    let device = AccessFs::from_file(WANTED_ABI) & !AccessFs::Execute;
    let existing = |paths: &[&str]| paths.iter().map(PathBuf::from).filter(|p| p.exists()).collect::<Vec<_>>();
    let gpu_files = if gpu { gpu_devices() } else { Vec::new() };
    let cuda = !gpu_files.is_empty();
    let devices: Vec<PathBuf> = existing(&DEVICES).into_iter().chain(gpu_files).collect();
    let rules: Vec<(Vec<PathBuf>, BitFlags<AccessFs>)> = vec![
        (system_dirs(), read_only),
        (places.read.clone(), read_only),
        (places.read_exec.clone(), read),
        (places.executables.clone(), program),
        (existing(&PROC_FILES).into_iter().chain(existing(&["/sys"])).collect(), read_only),
        (existing(&RANDOM_DEVICES), read_only),
        (devices, device),
        (places.writable.clone(), all & !AccessFs::Execute),
    ];
    let kept = cuda
        .then(|| std::env::join_paths(rules.iter().flat_map(|(paths, _)| paths)))
        .transpose()
        .map_err(|e| anyhow::anyhow!("sandbox: cannot list the places a runner keeps: {e}"))?;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .handle_access(AccessNet::from_all(WANTED_ABI))?
        .scope(Scope::from_all(WANTED_ABI))?
        .create()?;
    for (paths, access) in rules {
        ruleset = ruleset.add_rules(path_beneath_rules(paths, access))?;
    }
    if cuda {
        ruleset = ruleset.add_rules(path_beneath_rules(["/proc/self"], all & !AccessFs::Execute))?;
    }
    let status = ruleset.restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        bail!("sandbox: the kernel refused the Landlock rules");
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The book's account of the sandbox names the `/proc` files a runner may read, all of them.
    #[test]
    fn the_book_lists_the_proc_files_a_runner_reads() {
        let book = include_str!("../../../book/src/grader.md");
        let bullet = &book[book.find("\n- of `/proc` it can read only").expect("the /proc bullet")..];
        let bullet = &bullet[..bullet.find(";\n").expect("the bullet's end")];
        for file in PROC_FILES {
            let name = file.strip_prefix("/proc/").unwrap();
            assert!(bullet.contains(&format!("`{name}`")), "the book's /proc bullet leaves out `{name}`: {bullet}");
        }
    }
}
