//! Taking the sandbox off the network: a network namespace of its own, where the kernel lets the
//! trampoline make one. Inside it there is only a loopback interface, down, and abstract unix
//! sockets are the namespace's own, so nothing inside can reach a process outside. Whether or not
//! a namespace could be made, the seccomp filters refuse every socket but a unix seqpacket one
//! (the CUDA driver's, [`super::syscalls`]).

/// What the trampoline managed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    /// A network namespace of its own (as root, or through a user namespace of its own).
    OwnNamespace,
    /// The kernel (or a container's seccomp profile) refused a new namespace: sockets are still
    /// refused by the filters.
    SocketsRefused,
}

/// Moves this process (single-threaded, before it starts anything) into a network namespace of
/// its own: directly where it may (root), else inside a new user namespace that maps its own user
/// and group to themselves, so that files keep their owners. Fails only when a user namespace was
/// made but its mapping could not be written.
pub fn leave() -> anyhow::Result<Network> {
    // SAFETY: unshare(2) with flags only; the trampoline has started no thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
        return Ok(Network::OwnNamespace);
    }
    // SAFETY: getters without arguments.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: as above.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        return Ok(Network::SocketsRefused);
    }
    // Without a mapping every file would belong to "nobody"; `setgroups` must be denied before
    // an unprivileged process may map its group.
    std::fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")))
        .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")))
        .map_err(|e| anyhow::anyhow!("sandbox: cannot map the user into its new namespace: {e}"))?;
    Ok(Network::OwnNamespace)
}
