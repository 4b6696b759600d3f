//! The sandbox's seccomp filters, compiled by `seccompiler` (the filter compiler of Firecracker):
//! system calls that would let a process leave the grader's reach fail, and system calls made
//! through another ABI than the runner's own kill the process.
//!
//! A seccomp filter sees the ABI a call came through (`seccomp_data.arch`) and its number. On
//! x86-64 a program can also call the kernel through the 32-bit entry (`int 0x80`, with i386
//! numbers: `setsid` is 66 there, not 112) and, where the kernel has x32, with x86-64 numbers
//! carrying bit 30. A filter that only compared numbers would let both through, so:
//! - every filter first checks the ABI and kills the process on any other (seccompiler's
//!   architecture check, `SECCOMP_RET_KILL_PROCESS`);
//! - a second filter kills every number with the x32 bit, so that the x32 spelling of a refused
//!   call is no way around it either.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

/// System calls refused with `EPERM`.
const REFUSED: &[i64] = &[
    // Every process stays in the process group the grader kills.
    libc::SYS_setsid,
    libc::SYS_setpgid,
    // No process reads or writes another's memory.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    // No network of any kind: no socket of any family (TCP, UDP, unix streams and datagrams,
    // netlink, raw), and no io_uring, which can open sockets without the `socket` call.
    libc::SYS_socket,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // The sandbox is set up once, by the trampoline: nothing inside changes it.
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    // Nothing that reaches into the kernel itself.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
];

/// The x32 ABI's marker bit in a system call number (`__X32_SYSCALL_BIT`).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// One past the highest x32 system call number the guard names: x32's own calls are numbered
/// 512-547 and the calls it shares with x86-64 stay below 512 (about 470 today). 800 numbers
/// compile to just under the kernel's limit of 4096 instructions; the kernel caches the verdict
/// for each native call number, so the guard costs nothing measurable per call (265 ns per
/// `getppid` with both filters, 432 ns without, on the 2-core development VM: noise).
#[cfg(target_arch = "x86_64")]
const SYSCALL_TABLE_END: i64 = 800;

/// The filters to install, in order: the refusals, then (on x86-64) the x32 guard. Each starts
/// with seccompiler's ABI check.
pub fn filters() -> Result<Vec<BpfProgram>> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| anyhow::anyhow!("sandbox: seccomp filters are not built for {}: {e:?}", std::env::consts::ARCH))?;
    let refused: BTreeMap<i64, Vec<_>> = REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    let refuse = SeccompFilter::new(refused, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .context("sandbox: the seccomp refusals do not compile")?;
    let mut programs = vec![BpfProgram::try_from(refuse).context("sandbox: the seccomp refusals do not compile")?];
    #[cfg(target_arch = "x86_64")]
    {
        let x32: BTreeMap<i64, Vec<_>> = (0..SYSCALL_TABLE_END).map(|n| (X32_SYSCALL_BIT | n, Vec::new())).collect();
        let guard = SeccompFilter::new(x32, SeccompAction::Allow, SeccompAction::KillProcess, arch)
            .context("sandbox: the x32 guard does not compile")?;
        programs.push(BpfProgram::try_from(guard).context("sandbox: the x32 guard does not compile")?);
    }
    Ok(programs)
}

/// Installs [`filters`] on this thread (and so on everything it executes and starts).
pub fn install() -> Result<()> {
    for program in filters()? {
        seccompiler::apply_filter(&program).context("sandbox: cannot install a seccomp filter")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_within_the_kernels_limit() {
        let programs = filters().unwrap();
        assert!(programs.iter().all(|p| !p.is_empty() && p.len() < 4096), "{:?}", programs.iter().map(Vec::len));
    }
}
