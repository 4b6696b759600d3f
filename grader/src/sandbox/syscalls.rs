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
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// System calls refused with `EPERM`.
const REFUSED: &[i64] = &[
    // Every process stays in the process group the grader kills.
    libc::SYS_setsid,
    libc::SYS_setpgid,
    // No process reads or writes another's memory.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    // No network of any kind (the `socket` call is refused too, but for one kind: see
    // `socket_rules`), and no io_uring, which can open sockets without the `socket` call.
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

/// The one kind of socket a confined process may open: a unix `SOCK_SEQPACKET` socket (with any
/// of the `SOCK_NONBLOCK` and `SOCK_CLOEXEC` flags). The CUDA driver opens one at `cuInit` and
/// fails with `CUDA_ERROR_OPERATING_SYSTEM` when it cannot (found on an H200 under the sandbox).
/// Abstract addresses stay inside the sandbox's network namespace and Landlock's scope; of
/// pathname sockets only a listener of the same kind could answer, and the system's own services
/// (D-Bus, Docker, journald) listen as streams or datagrams.
const UNIX_SEQPACKET_TYPES: [u64; 4] = {
    let seqpacket = libc::SOCK_SEQPACKET as u64;
    let (nonblock, cloexec) = (libc::SOCK_NONBLOCK as u64, libc::SOCK_CLOEXEC as u64);
    [seqpacket, seqpacket | nonblock, seqpacket | cloexec, seqpacket | nonblock | cloexec]
};

/// When `socket(domain, type, protocol)` is refused: a domain other than `AF_UNIX`, or a type
/// other than [`UNIX_SEQPACKET_TYPES`] (rules are alternatives, a rule's conditions all hold).
fn socket_rules() -> Result<Vec<SeccompRule>> {
    let condition = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).context("sandbox: a socket condition")
    };
    let other_domain = SeccompRule::new(vec![condition(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?])?;
    let other_type = SeccompRule::new(
        UNIX_SEQPACKET_TYPES.iter().map(|&t| condition(1, SeccompCmpOp::Ne, t)).collect::<Result<Vec<_>>>()?,
    )?;
    Ok(vec![other_domain, other_type])
}

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
    let mut refused: BTreeMap<i64, Vec<_>> = REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    refused.insert(libc::SYS_socket, socket_rules()?);
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

    /// Runs `probe` in a forked child under the filters and returns its exit code.
    fn in_filtered_child(probe: fn() -> i32) -> i32 {
        let programs = filters().unwrap();
        // SAFETY: the child only makes system calls and leaves with `_exit`.
        match unsafe { libc::fork() } {
            0 => {
                let code = if programs.iter().all(|p| seccompiler::apply_filter(p).is_ok()) { probe() } else { 99 };
                // SAFETY: ends the child without running the parent's destructors.
                unsafe { libc::_exit(code) }
            }
            child => {
                let mut status = 0;
                // SAFETY: waits for the child just forked.
                assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
                assert!(libc::WIFEXITED(status), "the probe ended by signal: {status:#x}");
                libc::WEXITSTATUS(status)
            }
        }
    }

    /// 0 when `socket(domain, kind, 0)` succeeds, 1 when it is refused with EPERM, 2 otherwise.
    fn opens(domain: i32, kind: i32) -> i32 {
        // SAFETY: a plain system call.
        let fd = unsafe { libc::socket(domain, kind, 0) };
        if fd >= 0 {
            // SAFETY: closes the socket just opened.
            unsafe { libc::close(fd) };
            0
        } else if std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
            1
        } else {
            2
        }
    }

    /// A socket kind, the probe that opens one (0 opened, 1 refused, 2 another error) and the
    /// answer expected under the filters.
    type SocketCase = (&'static str, fn() -> i32, i32);

    #[test]
    fn only_unix_seqpacket_sockets_open_under_the_filters() {
        let cases: [SocketCase; 6] = [
            (
                "unix seqpacket (the CUDA driver's)",
                || opens(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC),
                0,
            ),
            ("unix stream", || opens(libc::AF_UNIX, libc::SOCK_STREAM), 1),
            ("unix datagram", || opens(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC), 1),
            ("inet seqpacket", || opens(libc::AF_INET, libc::SOCK_SEQPACKET), 1),
            ("inet stream", || opens(libc::AF_INET, libc::SOCK_STREAM), 1),
            ("netlink", || opens(libc::AF_NETLINK, libc::SOCK_RAW), 1),
        ];
        for (name, probe, expected) in cases {
            assert_eq!(in_filtered_child(probe), expected, "{name}: 0 opens, 1 refused");
        }
    }

    #[test]
    fn the_filters_compile_within_the_kernels_limit() {
        let programs = filters().unwrap();
        assert!(programs.iter().all(|p| !p.is_empty() && p.len() < 4096), "{:?}", programs.iter().map(Vec::len));
    }
}
